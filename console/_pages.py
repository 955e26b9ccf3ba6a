"""The console's other pages: overview, ontology, who gets what, sites, audit report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from console._html import Nav, attr, esc, listing, page, table
from console._policy_pages import authorization_html
from deploy.site_admin import SiteReport, SubscriberPage, SubscriberState
from xdn.ontology import Ontology, Problem
from xdn.policy import Authorization

__all__ = [
    "SiteAnswer",
    "audit_page",
    "message_page",
    "ontology_page",
    "overview_page",
    "sites_page",
    "subscribers_page",
    "who_page",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteAnswer:
    """What asking one site gave: its report, or why there is none."""

    address: str
    report: SiteReport | None = None
    error: str = ""


def overview_page(
    publishers: Mapping[str, str], *, sites: Sequence[str], subscribers: int, audit: bool, nav: Nav
) -> str:
    """Where to go: one line per page, with what is configured."""
    policies = listing(
        (
            f'<a href="/policies/{esc(p)}">{esc(p)}</a> — {esc(state)}'
            for p, state in publishers.items()
        ),
        empty="no policy given (--policy)",
    )
    body = (
        "<h2>Policies</h2>" + policies + "<h2>Network</h2><ul>"
        '<li><a href="/ontology">The ontology</a>: its concept-containment DAG</li>'
        f'<li><a href="/who">Who gets what</a>: {subscribers} known subscriber certificate(s)'
        "</li>"
        f'<li><a href="/sites">Sites</a>: {len(sites)} site(s) asked for their status</li>'
        + (
            '<li><a href="/audit">The latest audit report</a></li>'
            if audit
            else "<li>No audit report given (--audit-report)</li>"
        )
        + "</ul>"
    )
    return page("xdn console", body, nav=nav, current="/")


def ontology_page(ontology: Ontology, svg: str, problems: Sequence[Problem], *, nav: Nav) -> str:
    """The DAG drawn (``svg``, from the core's renderer) and what is wrong with it."""
    found = listing((esc(p) for p in problems), empty="no problem found")
    body = (
        f"<p><code>{esc(ontology.iri)}</code>: {len(ontology.concepts)} concepts, "
        f"{ontology.graph.number_of_edges()} containments (an arrow points from a concept to "
        "one it contains).</p>"
        f'<figure class="dag" role="img" aria-label="containment DAG of {esc(ontology.iri)}">'
        f"{svg}</figure><h2>Problems</h2>{found}"
    )
    return page("Ontology", body, nav=nav, current="/ontology")


def who_page(
    grid: Mapping[str, Mapping[str, Authorization]],
    publishers: Sequence[str],
    *,
    pasted: str = "",
    explained: tuple[str, Mapping[str, Authorization]] | None = None,
    error: str = "",
    nav: Nav,
) -> str:
    """What each known subscriber gets from each publisher; the explanation for one certificate."""
    rows = [
        [f'<a href="/who/{esc(name)}">{esc(name)}</a>']
        + [esc(", ".join(sorted(grants[p].concepts)) or "—") for p in publishers]
        for name, grants in grid.items()
    ]
    everyone = table(
        ["subscriber", *publishers],
        rows,
        caption="known subscribers, now",
        empty="no subscriber certificate known (--subscribers DIR)",
    )
    form = (
        '<h2>A certificate</h2><form method="post" action="/who">'
        '<label for="cert">Certificate (PEM)</label>'
        f'<textarea id="cert" name="cert" rows="8" spellcheck="false">{esc(pasted)}</textarea>'
        '<div class="buttons"><button type="submit">What does it get?</button></div></form>'
    )
    detail = f'<p class="error" role="alert">{esc(error)}</p>' if error else ""
    if explained is not None:
        who, grants = explained
        detail += f'<h2 id="explained">{esc(who)}</h2>' + "".join(
            authorization_html(a) for a in grants.values()
        )
    return page("Who gets what", everyone + detail + form, nav=nav, current="/who")


def _subscriber_rows(rows: Sequence[SubscriberState]) -> list[list[str]]:
    return [
        [esc(r.name), _grants(r), esc(r.queue_depth), "yes" if r.connected else "no"] for r in rows
    ]


def _grants(row: SubscriberState) -> str:
    return esc("; ".join(f"{p}: {', '.join(c)}" for p, c in sorted(row.grants.items())) or "—")


def _site(answer: SiteAnswer, signed: Mapping[str, int]) -> str:
    head = f"<h2>{esc(answer.address)}</h2>"
    s = answer.report
    if s is None:
        return head + f'<p class="error">{esc(answer.error)}</p>'
    uplink = "none: a root site" if s.root else (s.uplink_address or "not found yet")
    if not s.root:
        uplink += " (connected)" if s.uplink_connected else " (not connected)"
    policies = [
        [
            esc(p),
            esc(v),
            esc(d[:16]),
            esc("" if p not in signed else "same" if signed[p] == v else f"here: {signed[p]}"),
        ]
        for p, (v, d) in sorted(s.policies.items())
    ]
    links = [
        [
            esc(d.site),
            esc(d.block),
            "yes" if d.connected else "no",
            esc(d.members),
            esc(d.queue_depth),
        ]
        for d in s.downlinks
    ]
    more = ""
    if s.subscribers_total > len(s.subscribers):
        href = "/sites/subscribers?" + urlencode({"site": answer.address})
        more = (
            f"<p><a{attr('href', href)}>Every subscriber of {esc(s.site)}, a page at a time</a></p>"
        )
    return (
        f"<h2>{esc(s.site)} <small>{esc(answer.address)}</small></h2>"
        f"<p>Block {esc(s.block)}; uplink {esc(uplink)}; {s.queued_total} deliveries queued; "
        f"{s.subscribers_total} subscriber(s); DHT neighbours: "
        f"{esc(', '.join(n.address for n in s.neighbours) or 'none')}.</p>"
        + table(
            ["site", "block", "connected", "members", "queue"],
            links,
            caption="downlinks",
            empty="none",
        )
        + table(
            ["subscriber", "grants", "queue", "connected"],
            _subscriber_rows(s.subscribers),
            caption=f"subscribers (first {len(s.subscribers)} of {s.subscribers_total})",
            empty="none",
        )
        + more
        + table(
            ["publisher", "version", "digest", "policy file here"],
            policies,
            caption="policies in force",
            empty="none",
        )
    )


def sites_page(
    answers: Sequence[SiteAnswer], signed: Mapping[str, int], *, configured: bool, nav: Nav
) -> str:
    """Each site's status as its Admin API gives it to the console's certificate."""
    if not configured:
        body = (
            '<p class="muted">Start the console with <code>--site HOST:PORT</code> (and '
            "<code>--certs DIR --name NAME</code> of an admin certificate) to see sites."
            "</p>"
        )
    else:
        body = "".join(_site(a, signed) for a in answers)
    return page("Sites", body, nav=nav, current="/sites")


def subscribers_page(
    address: str, found: SubscriberPage | None, *, after: str, error: str = "", nav: Nav
) -> str:
    """One page of a site's subscribers, and the link to the next."""
    if found is None:
        body = f'<p class="error">{esc(error)}</p>'
    else:
        start = f"after {after}" if after else "from the first"
        body = table(
            ["subscriber", "grants", "queue", "connected"],
            _subscriber_rows(found.subscribers),
            caption=f"{len(found.subscribers)} of {found.total}, {start}",
        )
        if found.next_after:
            href = "/sites/subscribers?" + urlencode({"site": address, "after": found.next_after})
            body += f'<p><a{attr("href", href)} rel="next">Next page</a></p>'
    return page(f"Subscribers of {address}", body, nav=nav, current="/sites")


def audit_page(path: str, written: str, *, nav: Nav) -> str:
    """A link to the audit's HTML report (served as it is, sandboxed)."""
    body = (
        f"<p>Report <code>{esc(path)}</code>, written {esc(written)}.</p>"
        f"<p><a{attr('href', '/audit/report.html')}>Open the report</a></p>"
    )
    return page("Audit report", body, nav=nav, current="/audit")


def message_page(title: str, message: str, *, nav: Nav, kind: str = "error") -> str:
    """A page saying one thing (an error, a refusal)."""
    return page(title, f'<p class="{esc(kind)}" role="alert">{esc(message)}</p>', nav=nav)
