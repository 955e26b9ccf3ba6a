"""The audit's result as a value, and its HTML report (a pure function of that value).

The report is one self-contained page without scripts, bounded whatever the size of the logs
(every list is cut to a stated maximum and says so; the full tables are the Parquet and CSV
files beside it): the verdict and counts, failures grouped by class and node with the first
example of each, who received each document version (and who did not, or refused it),
latency percentiles per link and end to end, a time series of throughput and latency, the
network drawn (:mod:`audit.plots`), refusals, fan-out, and the policy versions and CRLs the
audit judged by. Nodes are shown by the name on their certificate, not their URI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any, NamedTuple

from audit.plots import latency_svg, network_svg, timeline_svg

__all__ = [
    "MAX_FAILURE_GROUPS",
    "MAX_LISTED_FAILURES",
    "MAX_LISTED_REFUSALS",
    "MAX_NAMED_PER_STATUS",
    "MAX_VERSIONS",
    "AuditSummary",
    "CrlUsed",
    "Failure",
    "FailureGroup",
    "FanOut",
    "HopLatency",
    "NodeInfo",
    "Percentiles",
    "PolicyUsed",
    "Refusal",
    "TimePoint",
    "VersionRecipients",
    "refused_what",
    "render_report",
]

#: At most this many refusals are listed one by one in the summary and the report (all of
#: them are counted, and all are in the ``refusals`` Parquet table).
MAX_LISTED_REFUSALS = 200
#: At most this many failures are kept in the summary (and printed); the report shows the
#: groups and the first :data:`MAX_FAILURES_SHOWN`. All are in ``failures/`` and
#: ``failures.csv/``.
MAX_LISTED_FAILURES = 1_000
MAX_FAILURES_SHOWN = 100
#: At most this many (class, node) groups of failures are shown, largest first.
MAX_FAILURE_GROUPS = 200
#: At most this many document versions in who-received-what (the earliest), and this many
#: subscribers named per status of one version.
MAX_VERSIONS = 100
MAX_NAMED_PER_STATUS = 25


class Failure(NamedTuple):
    """One thing that failed: the graph at fault, the node responsible, why, and the class of
    fault (the ``class`` column of the failures table, :data:`audit.transforms.FAILURE_COLUMNS`)."""

    graph: str
    node: str
    reason: str
    kind: str = ""


class Refusal(NamedTuple):
    """One failure notice: when, who refused, what (kind, publisher, document or key
    message), the site it came from, why, and whether the notice verifies."""

    time: str
    subscriber: str
    kind: str
    publisher: str
    what: str
    site: str
    reason: str
    verified: bool


def refused_what(row: Mapping[str, Any]) -> str:
    """What a refusal (a row of the refusals table) names: ``document vN`` or
    ``rekey of concept, epoch N`` (empty when it names nothing, as a CRL refusal)."""
    if row.get("key_message"):
        epoch = row.get("epoch")
        return f"{row['key_message']} of {row.get('concept') or '?'}" + (
            f", epoch {epoch}" if epoch is not None else ""
        )
    document, version = row.get("document"), row.get("version")
    if not document:
        return ""
    return f"{document} v{version}" if version is not None else str(document)


@dataclass(frozen=True, slots=True, kw_only=True)
class HopLatency:
    """Latency of one link, from the envelopes' timestamps (percentiles approximate)."""

    sender: str
    receiver: str
    hops: int
    mean_ms: float
    max_ms: int
    p50_ms: float = 0.0
    p90_ms: float = 0.0
    p99_ms: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Percentiles:
    """A latency distribution: how many, p50/p90/p99 (approximate) and max, in ms."""

    count: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TimePoint:
    """One bucket of the time series: receipts signed in ``[start_ms, start_ms + width)`` and
    their end-to-end latency (publication → receipt)."""

    start_ms: int
    deliveries: int
    p50_ms: float
    p99_ms: float


class FailureGroup(NamedTuple):
    """Failures of one class at one node: how many, and the first (by graph name)."""

    kind: str
    node: str
    failures: int
    graph: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionRecipients:
    """Who received one document version (subscriber URIs, at most
    :data:`MAX_NAMED_PER_STATUS` each; ``counts``: all of them, per status)."""

    publisher: str
    document: str
    version: int | None
    published_ms: int
    received: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    counts: tuple[tuple[str, int], ...] = ()


class NodeInfo(NamedTuple):
    """A node that took part: its URI, the name and role on its certificate."""

    uri: str
    name: str
    role: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CrlUsed:
    """A CRL given to the audit: its number, times (ISO 8601), entries, and whether it was
    used (issued by the audit's time)."""

    number: int
    this_update: str
    next_update: str
    entries: int
    used: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyUsed:
    """A signed policy version the audit judged by, and from when it was in force (``""``:
    from the beginning; ``used`` false: no notice says it ever took effect)."""

    publisher: str
    version: int
    source: str
    digest: str
    in_force_from: str
    used: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FanOut:
    """How widely one node forwards: messages in, envelopes out, widest single fan-out."""

    node: str
    inbound: int
    outbound: int
    max_fan_out: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditSummary:
    """Counts and findings of one audit run.

    Attributes:
        messages: envelope graphs found (one per message hop).
        signatures_verified / signatures_failed: signature graphs that do / do not verify.
        chains_ok / chains_broken: chains (leaf envelope back to its publication) with every hop
            sound / with at least one unsound or missing hop.
        fragments_delivered: (fragment, subscriber receipt) pairs over sound chains: the
            manifest leaves each sound receipt carries (the sum of its runs' lengths), summed.
        failures: the failures found, sorted (the first :data:`MAX_LISTED_FAILURES`; all are
            in the ``failures`` table); failure_total: how many in all; failure_groups: per
            (class, node), the count and first example (the largest
            :data:`MAX_FAILURE_GROUPS` groups of ``failure_group_total``).
        versions: who received each document version (the first :data:`MAX_VERSIONS` by
            time of ``version_total``); recipient_counts: (publication, subscriber) rows of
            the ``recipients`` table per status.
        end_to_end: publication → receipt latency over sound chains; timeline: receipts and
            their latency per ``bucket_ms``.
        nodes: every node with a certificate the CA issued it (names for the report).
        policies / crls: the policy versions and CRLs the audit judged by.
        latencies: per-link latency; fan_out: per forwarding node.
        refusals_verified / refusals_unverified: failure notices that do / do not verify
            (those that do not are failures too).
        refusals_by_kind / refusals_by_site: verified refusals per kind and per site the
            refused thing came from; refusals: the first of them (all, verified or not) by
            time, at most :data:`MAX_LISTED_REFUSALS`.
    """

    messages: int
    signatures_verified: int
    signatures_failed: int
    chains_ok: int
    chains_broken: int
    fragments_delivered: int
    failures: tuple[Failure, ...]
    latencies: tuple[HopLatency, ...] = ()
    fan_out: tuple[FanOut, ...] = ()
    refusals_verified: int = 0
    refusals_unverified: int = 0
    refusals_by_kind: tuple[tuple[str, int], ...] = ()
    refusals_by_site: tuple[tuple[str, int], ...] = ()
    refusals: tuple[Refusal, ...] = ()
    failure_total: int | None = None
    failure_groups: tuple[FailureGroup, ...] = ()
    failure_group_total: int = 0
    versions: tuple[VersionRecipients, ...] = ()
    version_total: int = 0
    recipient_counts: tuple[tuple[str, int], ...] = ()
    end_to_end: Percentiles | None = None
    timeline: tuple[TimePoint, ...] = ()
    bucket_ms: int = 0
    nodes: tuple[NodeInfo, ...] = ()
    policies: tuple[PolicyUsed, ...] = ()
    crls: tuple[CrlUsed, ...] = ()

    @property
    def failure_count(self) -> int:
        """Every failure found (``failures`` lists at most :data:`MAX_LISTED_FAILURES`)."""
        return len(self.failures) if self.failure_total is None else self.failure_total

    @property
    def ok(self) -> bool:
        """Whether every chain and signature verified and nothing else failed."""
        return (
            self.failure_count == 0 and self.chains_broken == 0 and self.signatures_failed == 0
        )


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;
vertical-align:top}th{background:#f3f3f3;text-align:left}.ok{color:#17692c}.bad{color:#b00020}
td.n{text-align:right;font-variant-numeric:tabular-nums}.more{color:#666;font-size:.9em}
figure{margin:1em 0}svg{max-width:100%;height:auto}code{font-size:.9em}
"""

Name = Callable[[str], str]


def _namer(nodes: Sequence[NodeInfo]) -> Name:
    """Node URI → the name on its certificate (an unknown URI is shown as it is)."""
    names = {n.uri: n.name for n in nodes if n.name}

    def name(uri: str) -> str:
        return names.get(uri, uri)

    return name


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'NO'}</td>"
    if isinstance(value, int | float):
        return f'<td class="n">{escape(str(value))}</td>'
    return f"<td>{escape(str(value))}</td>"


def _table(headers: tuple[str, ...], rows: Sequence[tuple[object, ...]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _more(shown: int, total: int, what: str, where: str) -> str:
    if shown >= total:
        return ""
    return (
        f'<p class="more">Only the first {shown} of {total:,} {what} are shown; all are in '
        f"{where}.</p>"
    )


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _failures(summary: AuditSummary, name: Name) -> str:
    if not summary.failure_count:
        return "<p>None.</p>"
    groups = _table(
        ("class", "node", "failures", "first graph", "first reason"),
        [(g.kind, name(g.node), g.failures, g.graph, g.reason) for g in summary.failure_groups],
    )
    shown = summary.failures[:MAX_FAILURES_SHOWN]
    listed = _table(
        ("class", "graph", "node", "reason"),
        [(f.kind, f.graph, name(f.node), f.reason) for f in shown],
    )
    return (
        "<h3>Per class and node</h3>"
        + groups
        + _more(len(summary.failure_groups), summary.failure_group_total, "groups", "the "
                "<code>failures</code> table")
        + "<h3>The first failures</h3>"
        + listed
        + _more(len(shown), summary.failure_count, "failures",
                "<code>failures/</code> (Parquet) and <code>failures.csv/</code>")
    )


def _named(uris: Sequence[str], count: int, name: Name) -> str:
    text = ", ".join(sorted(name(u) for u in uris))
    return text + (f" … and {count - len(uris)} more" if count > len(uris) else "")


def _recipients(summary: AuditSummary, name: Name) -> str:
    if not summary.versions:
        return "<p>No document version was published in these logs.</p>"
    totals = _table(("status", "(version, subscriber) pairs"), list(summary.recipient_counts))
    rows = []
    for v in summary.versions:
        counts = dict(v.counts)
        rows.append(
            (
                v.publisher,
                v.document,
                "" if v.version is None else v.version,
                _time(v.published_ms),
                _named(v.received, counts.get("received", 0), name),
                _named(v.partial, counts.get("partial", 0), name),
                _named(v.missing, counts.get("missing", 0), name),
                _named(v.refused, counts.get("refused", 0), name),
            )
        )
    table = _table(
        ("publisher", "document", "version", "published (UTC)", "received", "partly received",
         "missing", "refused"),
        rows,
    )
    judged = any(s in ("partial", "missing") for s, _ in summary.recipient_counts) or (
        summary.policies
    )
    note = (
        "<p>Missing and partly received are judged against the concepts each subscriber was "
        "due under the policy version in force (see Policies).</p>"
        if judged
        else "<p>No policy was given (<code>--policy</code>): only what arrived and what was "
        "refused is shown.</p>"
    )
    return (
        note + totals + table
        + _more(len(summary.versions), summary.version_total, "document versions",
                "the <code>recipients</code> table")
    )


def _latency(summary: AuditSummary, name: Name) -> str:
    if not summary.latencies:
        return "<p>No hops with timestamps.</p>"
    e2e = summary.end_to_end
    end = (
        _table(
            ("deliveries", "p50 ms", "p90 ms", "p99 ms", "max ms"),
            [(e2e.count, e2e.p50_ms, e2e.p90_ms, e2e.p99_ms, e2e.max_ms)],
        )
        if e2e is not None and e2e.count
        else "<p>No receipt on a sound chain.</p>"
    )
    links = _table(
        ("sender", "receiver", "hops", "mean ms", "p50 ms", "p90 ms", "p99 ms", "max ms"),
        [
            (name(h.sender), name(h.receiver), h.hops, round(h.mean_ms, 1), h.p50_ms, h.p90_ms,
             h.p99_ms, h.max_ms)
            for h in summary.latencies[:MAX_LINKS_LISTED]
        ],
    )
    return (
        "<h3>End to end (publication → receipt)</h3>" + end
        + "<h3>Per link</h3>"
        + _figure(latency_svg(summary.latencies, name),
                  "p50 (bar), p90 and p99 (marks) and max (x) per link, busiest first")
        + links
        + _more(min(len(summary.latencies), MAX_LINKS_LISTED), len(summary.latencies), "links",
                "the <code>latency</code> table")
    )


#: At most this many links are listed in the latency table.
MAX_LINKS_LISTED = 200


def _over_time(summary: AuditSummary) -> str:
    if not summary.timeline:
        return "<p>No receipt on a sound chain.</p>"
    return _figure(timeline_svg(summary.timeline, summary.bucket_ms),
                   "receipts per second and end-to-end latency over time")


def _network(summary: AuditSummary, name: Name) -> str:
    edges = [(h.sender, h.receiver, h.hops) for h in summary.latencies]
    if not edges:
        return "<p>No hops.</p>"
    return _figure(network_svg(edges, summary.nodes, name),
                   "the nodes that took part; a line's width is the messages it carried")


def _judged_by(summary: AuditSummary) -> str:
    policies = (
        _table(
            ("publisher", "version", "in force from (UTC)", "file", "SHA-256"),
            [
                (p.publisher, p.version,
                 p.in_force_from or ("the beginning" if p.used else "never, per the logs"),
                 p.source, p.digest)
                for p in summary.policies
            ],
        )
        if summary.policies
        else "<p>No policy given: entitlement by concept and completeness were not judged "
        "(<code>--ontology</code>, <code>--policy</code>).</p>"
    )
    crls = (
        _table(
            ("CRL number", "issued (UTC)", "next update (UTC)", "revoked certificates", "used"),
            [(c.number, c.this_update, c.next_update, c.entries, c.used) for c in summary.crls],
        )
        if summary.crls
        else "<p>No CRL given (<code>--crl</code>): revocations were not judged.</p>"
    )
    return f"<h3>Policies</h3>{policies}<h3>CRLs</h3>{crls}"


def _refusals(summary: AuditSummary, name: Name) -> str:
    """The refusals section: counts per kind and per site, then the notices one by one."""
    total = summary.refusals_verified + summary.refusals_unverified
    if not total:
        return "<p>None: no party signed a failure notice.</p>"
    intro = (
        f"<p>{summary.refusals_verified} refusal(s) signed by the parties that refused"
        + (
            f"; {summary.refusals_unverified} notice(s) do not verify (see Failures)"
            if summary.refusals_unverified
            else ""
        )
        + ".</p>"
    )
    by_kind = _table(("kind", "refusals"), list(summary.refusals_by_kind))
    by_site = _table(
        ("came from site", "refusals"), [(name(s), n) for s, n in summary.refusals_by_site]
    )
    listed = _table(
        ("time (UTC)", "refused by", "kind", "publisher", "what", "site", "reason", "verified"),
        [
            (r.time, name(r.subscriber), r.kind, r.publisher, r.what, name(r.site), r.reason,
             r.verified)
            for r in summary.refusals
        ],
    )
    more = _more(len(summary.refusals), total, "refusals", "the <code>refusals</code> table")
    return f"{intro}<h3>Per kind</h3>{by_kind}<h3>Per site</h3>{by_site}{listed}{more}"


def render_report(summary: AuditSummary) -> str:
    """The self-contained HTML report of ``summary`` (no scripts, no external resources)."""
    name = _namer(summary.nodes)
    verdict = (
        '<p class="ok"><strong>Every chain verifies.</strong></p>'
        if summary.ok
        else f'<p class="bad"><strong>{summary.failure_count:,} failure(s) found.</strong></p>'
    ) + (
        f'<p class="bad"><strong>{summary.refusals_verified:,} refusal(s)</strong> signed by '
        "the parties that refused something (see Refusals).</p>"
        if summary.refusals_verified
        else ""
    )
    counts = _table(
        ("measure", "count"),
        [
            ("messages (envelopes)", summary.messages),
            ("signatures verified", summary.signatures_verified),
            ("signatures failed", summary.signatures_failed),
            ("chains ok", summary.chains_ok),
            ("chains broken", summary.chains_broken),
            ("fragments delivered", summary.fragments_delivered),
            ("refusals signed", summary.refusals_verified),
        ],
    )
    fan = _table(
        ("node", "messages in", "envelopes out", "max fan-out"),
        [(name(f.node), f.inbound, f.outbound, f.max_fan_out)
         for f in summary.fan_out[:MAX_LINKS_LISTED]],
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>xdn provenance audit</title><style>{_STYLE}</style></head><body>"
        f"<h1>xdn provenance audit</h1>{verdict}<h2>Summary</h2>{counts}"
        f"<h2>Failures</h2>{_failures(summary, name)}"
        f"<h2>Who received what</h2>{_recipients(summary, name)}"
        f"<h2>Refusals</h2>{_refusals(summary, name)}"
        f"<h2>Latency</h2>{_latency(summary, name)}"
        f"<h2>Over time</h2>{_over_time(summary)}"
        f"<h2>Network</h2>{_network(summary, name)}"
        f"<h2>Fan-out</h2>{fan}"
        + _more(min(len(summary.fan_out), MAX_LINKS_LISTED), len(summary.fan_out), "nodes",
                "the <code>fan_out</code> table")
        + f"<h2>Judged by</h2>{_judged_by(summary)}</body></html>\n"
    )
