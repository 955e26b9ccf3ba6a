"""audit.report and audit.plots: the report is pure, escaped, self-contained, shows names
rather than URIs, and stays small whatever the size of the logs."""

from __future__ import annotations

import re

from audit.report import (
    MAX_FAILURE_GROUPS,
    MAX_LISTED_FAILURES,
    MAX_LISTED_REFUSALS,
    MAX_VERSIONS,
    AuditSummary,
    CrlUsed,
    Failure,
    FailureGroup,
    FanOut,
    HopLatency,
    NodeInfo,
    Percentiles,
    PolicyUsed,
    Refusal,
    TimePoint,
    VersionRecipients,
    refused_what,
    render_report,
)

BASE = {
    "messages": 0,
    "signatures_verified": 0,
    "signatures_failed": 0,
    "chains_ok": 0,
    "chains_broken": 0,
    "fragments_delivered": 0,
    "failures": (),
}
T0 = 1_767_571_200_000
PUB, D1, S1, S2 = (f"https://{n}.xdn.example/" for n in ("pub", "d1", "s1", "s2"))
NODES = (
    NodeInfo(PUB, "production-dept", "publisher"),
    NodeInfo(D1, "d1", "site"),
    NodeInfo(S1, "alice", "subscriber"),
    NodeInfo(S2, "bob", "subscriber"),
)


def _without_figures(html: str) -> str:
    return re.sub(r"<svg.*?</svg>", "", html, flags=re.DOTALL)


def test_report_is_pure_escaped_and_self_contained() -> None:
    summary = AuditSummary(
        **{
            **BASE,
            "messages": 3,
            "signatures_verified": 2,
            "signatures_failed": 1,
            "chains_broken": 1,
            "failures": (Failure("<urn:g>", "n", "a & b"),),
        },
        latencies=(
            HopLatency(
                sender="https://a/",
                receiver="https://b/",
                hops=2,
                mean_ms=12.5,
                max_ms=20,
                p50_ms=11.0,
                p90_ms=19.0,
                p99_ms=20.0,
            ),
        ),
        fan_out=(FanOut(node="https://a/", inbound=1, outbound=2, max_fan_out=2),),
    )
    html = render_report(summary)
    assert html == render_report(summary) and not summary.ok
    assert "&lt;urn:g&gt;" in html and "a &amp; b" in html and "1 failure(s)" in html
    assert html.count("<svg") == 2  # the latency chart and the network
    assert '<td class="n">12.5</td>' in html and "<script" not in html
    assert "<img" not in html and "<link" not in html and 'xlink:href="http' not in html
    assert "No policy given" in html and "No CRL given" in html
    clean = AuditSummary(**BASE)
    assert clean.ok and "Every chain verifies" in render_report(clean)


def test_failures_are_grouped_by_class_and_node_with_a_first_example() -> None:
    failures = tuple(
        Failure(f"{D1}msg/doc{i}/a#e2", S1, "has no receipt", "receipt") for i in range(3)
    )
    summary = AuditSummary(
        **{**BASE, "failures": failures},
        failure_total=5_000,
        failure_group_total=2,
        failure_groups=(
            FailureGroup("receipt", S1, 4_000, failures[0].graph, "has no receipt"),
            FailureGroup("time-order", D1, 1_000, f"{D1}msg/x/a#e2", "stamped 9 s before"),
        ),
        nodes=NODES,
    )
    html = _without_figures(render_report(summary))
    assert "5,000 failure(s) found" in html
    assert '<td>receipt</td><td>alice</td><td class="n">4000</td>' in html
    assert "<td>time-order</td><td>d1</td>" in html
    assert "Only the first 3 of 5,000 failures are shown" in html
    assert "failures.csv/" in html


def test_who_received_what_names_missing_partial_and_refusing_subscribers() -> None:
    summary = AuditSummary(
        **BASE,
        nodes=NODES,
        version_total=1,
        recipient_counts=(("received", 1), ("refused", 1)),
        versions=(
            VersionRecipients(
                publisher="production-dept",
                document="order 7",
                version=3,
                published_ms=T0,
                received=(S1,),
                refused=(S2,),
                counts=(("received", 1), ("refused", 1)),
            ),
        ),
        policies=(
            PolicyUsed(
                publisher="production-dept",
                version=1,
                source="p.toml",
                digest="ab",
                in_force_from="",
                used=True,
            ),
        ),
    )
    html = _without_figures(render_report(summary))
    row = re.search(r"<td>production-dept</td><td>order 7</td>.*?</tr>", html)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0))
    assert cells == [
        "production-dept",
        "order 7",
        "3",
        "2026-01-05T00:00:00.000+00:00",
        "alice",
        "",
        "",
        "bob",
    ]
    assert S1 not in html and S2 not in html  # names, not URIs
    assert "the beginning" in html


def test_latency_percentiles_time_series_and_judged_by() -> None:
    summary = AuditSummary(
        **BASE,
        nodes=NODES,
        latencies=(
            HopLatency(
                sender=PUB,
                receiver=D1,
                hops=10,
                mean_ms=3.0,
                max_ms=9,
                p50_ms=2.0,
                p90_ms=5.0,
                p99_ms=8.0,
            ),
            HopLatency(
                sender=D1,
                receiver=S1,
                hops=10,
                mean_ms=30.0,
                max_ms=90,
                p50_ms=20.0,
                p90_ms=50.0,
                p99_ms=80.0,
            ),
        ),
        end_to_end=Percentiles(count=10, p50_ms=25.0, p90_ms=60.0, p99_ms=95.0, max_ms=99.0),
        timeline=tuple(
            TimePoint(start_ms=T0 + i * 1_000, deliveries=i, p50_ms=20.0 + i, p99_ms=90.0)
            for i in range(5)
        ),
        bucket_ms=1_000,
        crls=(
            CrlUsed(
                number=4,
                this_update="2026-01-05T00:00:00+00:00",
                next_update="2026-01-12T00:00:00+00:00",
                entries=2,
                used=True,
            ),
        ),
    )
    html = render_report(summary)
    assert html.count("<svg") == 3  # latency per link, over time, network
    bare = _without_figures(html)
    assert (
        '<td class="n">10</td><td class="n">25.0</td><td class="n">60.0</td>'
        '<td class="n">95.0</td><td class="n">99.0</td>'
    ) in bare
    assert "<td>d1</td><td>alice</td>" in bare
    assert "<td>2026-01-05T00:00:00+00:00</td>" in bare and "<td>yes</td>" in bare
    figures = "".join(re.findall(r"<svg.*?</svg>", html, flags=re.DOTALL))
    assert "d1 → alice" in figures and "production-dept" in figures  # labels are text
    assert S1 not in figures


def test_report_shows_refusals_per_kind_and_site() -> None:
    assert refused_what({"document": "d", "version": 3}) == "d v3"
    key = {"key_message": "rekey", "concept": "C", "epoch": 2}
    assert refused_what(key) == "rekey of C, epoch 2"
    assert refused_what({"document": None}) == ""
    assert "no party signed a failure notice" in render_report(AuditSummary(**BASE))
    summary = AuditSummary(
        **BASE,
        nodes=NODES,
        refusals_verified=2,
        refusals_unverified=1,
        refusals_by_kind=(("document", 2),),
        refusals_by_site=((D1, 1), ("unknown", 1)),
        refusals=(
            Refusal(
                time="1970-01-01T00:00:03.000+00:00",
                subscriber=S1,
                kind="document",
                publisher="P",
                what="d v3",
                site=D1,
                reason="<b>bad</b>",
                verified=True,
            ),
        ),
    )
    html = render_report(summary)
    assert "2 refusal(s) signed" in html and "1 notice(s) do not verify" in html
    assert "Every chain verifies" in html and "<strong>2 refusal(s)</strong> signed by" in html
    assert "&lt;b&gt;bad&lt;/b&gt;" in html and "<b>bad" not in html
    assert "Only the first 1 of 3 refusals are shown" in html
    assert "<td>alice</td><td>document</td>" in html and '<td>d1</td><td class="n">1</td>' in html
    assert summary.ok  # refusing is what a subscriber should do: not a failure of the audit


def _uri(i: int) -> str:
    return f"https://subscriber-{i:05d}.a-rather-long-domain-name.xdn.example.org/"


def test_the_page_stays_under_2_mb_at_every_maximum() -> None:
    """Every list at its maximum (what the summary of any log size holds), with long names
    and reasons, 5,000 subscribers and links: the page stays well under 2 MB."""
    reason = "r" * 400
    sites = tuple(NodeInfo(f"https://d{i}.xdn.example/", f"d{i}", "site") for i in range(20))
    subscribers = tuple(
        NodeInfo(_uri(i), f"subscriber-{i:05d}", "subscriber") for i in range(5_000)
    )
    links = tuple(
        HopLatency(
            sender=sites[i % 20].uri,
            receiver=_uri(i),
            hops=1 + i % 50,
            mean_ms=12.5,
            max_ms=900,
            p50_ms=10.0,
            p90_ms=40.0,
            p99_ms=300.0,
        )
        for i in range(5_000)
    ) + tuple(
        HopLatency(sender=PUB, receiver=s.uri, hops=10**5, mean_ms=3.0, max_ms=50) for s in sites
    )
    named = tuple(_uri(j) for j in range(25))
    summary = AuditSummary(
        **{
            **BASE,
            "messages": 10**7,
            "signatures_failed": 5,
            "failures": tuple(
                Failure(_uri(i) + "msg/" + "d" * 80 + "#e2", _uri(i), reason, "receipt")
                for i in range(MAX_LISTED_FAILURES)
            ),
        },
        failure_total=61_000,
        failure_group_total=5_000,
        failure_groups=tuple(
            FailureGroup("receipt", _uri(i), 300, _uri(i) + "msg/x#e2", reason)
            for i in range(MAX_FAILURE_GROUPS)
        ),
        versions=tuple(
            VersionRecipients(
                publisher="pub",
                document="d" * 60,
                version=i,
                published_ms=T0 + i,
                received=named,
                partial=named,
                missing=named,
                refused=named,
                counts=(("received", 4_000), ("partial", 25), ("missing", 25), ("refused", 25)),
            )
            for i in range(MAX_VERSIONS)
        ),
        version_total=10**5,
        recipient_counts=(("received", 10**6),),
        end_to_end=Percentiles(count=10**7, p50_ms=30.0, p90_ms=80.0, p99_ms=400.0, max_ms=9_000.0),
        timeline=tuple(
            TimePoint(
                start_ms=T0 + i * 60_000, deliveries=10_000 + i, p50_ms=30.0 + i, p99_ms=300.0 + i
            )
            for i in range(60)
        ),
        bucket_ms=60_000,
        nodes=(NodeInfo(PUB, "pub", "publisher"), *sites, *subscribers),
        latencies=links,
        fan_out=tuple(
            FanOut(node=_uri(i), inbound=1, outbound=2, max_fan_out=2) for i in range(5_000)
        ),
        refusals_verified=10**5,
        refusals_by_kind=(("document", 10**5),),
        refusals_by_site=tuple((s.uri, 5_000) for s in sites),
        refusals=tuple(
            Refusal(
                time="2026-01-05T00:00:00.000+00:00",
                subscriber=_uri(i),
                kind="document",
                publisher="pub",
                what="doc v1",
                site=D1,
                reason=reason,
                verified=True,
            )
            for i in range(MAX_LISTED_REFUSALS)
        ),
    )
    html = render_report(summary)
    assert len(html.encode()) < 2_000_000, len(html.encode())
    assert "Only the first 100 of 100,000 document versions are shown" in html
    assert "… and 3975 more" in html
