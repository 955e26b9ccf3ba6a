"""The audit's result as a value, and its HTML report (a pure function of that value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any, NamedTuple

__all__ = [
    "MAX_LISTED_REFUSALS",
    "AuditSummary",
    "Failure",
    "FanOut",
    "HopLatency",
    "Refusal",
    "refused_what",
    "render_report",
]

#: At most this many refusals are listed one by one in the summary and the report (all of
#: them are counted, and all are in the ``refusals`` Parquet table).
MAX_LISTED_REFUSALS = 200


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
    """Latency of one link, from the envelopes' timestamps."""

    sender: str
    receiver: str
    hops: int
    mean_ms: float
    max_ms: int


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
        failures: every failure found, sorted.
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

    @property
    def ok(self) -> bool:
        """Whether every chain and signature verified and nothing else failed."""
        return not self.failures and self.chains_broken == 0 and self.signatures_failed == 0


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}
th{background:#f3f3f3;text-align:left}.ok{color:#17692c}.bad{color:#b00020}
td.n{text-align:right;font-variant-numeric:tabular-nums}
"""


def _table(headers: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(str(c))}</td>'
            if isinstance(c, int | float)
            else f"<td>{escape(str(c))}</td>"
            for c in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bar_chart(latencies: tuple[HopLatency, ...]) -> str:
    """A horizontal SVG bar chart of the mean latency of each link."""
    if not latencies:
        return "<p>No hops with timestamps.</p>"
    widest = max(h.mean_ms for h in latencies) or 1.0
    bar_h, label_w, plot_w = 22, 360, 300
    parts = []
    for i, h in enumerate(latencies):
        y, width = i * bar_h, max(1.0, plot_w * h.mean_ms / widest)
        label = escape(f"{h.sender} → {h.receiver}")
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{label}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width:.1f}" height="{bar_h - 6}" '
            f'fill="#3b6ea8"><title>{label}: {h.mean_ms:.1f} ms</title></rect>'
            f'<text x="{label_w + width + 4:.1f}" y="{y + 15}">{h.mean_ms:.1f} ms</text>'
        )
    height, total_w = bar_h * len(latencies), label_w + plot_w + 80
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{total_w}" height="{height}" '
        f'font-size="12" aria-label="mean latency per hop">{"".join(parts)}</svg>'
    )


def _refusals(summary: AuditSummary) -> str:
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
    by_site = _table(("came from site", "refusals"), list(summary.refusals_by_site))
    listed = _table(
        ("time (UTC)", "refused by", "kind", "publisher", "what", "site", "reason", "verified"),
        [
            (r.time, r.subscriber, r.kind, r.publisher, r.what, r.site, r.reason,
             "yes" if r.verified else "NO")
            for r in summary.refusals
        ],
    )
    more = (
        f"<p>Only the first {len(summary.refusals)} of {total} are listed; all are in the "
        "<code>refusals</code> table.</p>"
        if len(summary.refusals) < total
        else ""
    )
    return f"{intro}<h3>Per kind</h3>{by_kind}<h3>Per site</h3>{by_site}{listed}{more}"


def render_report(summary: AuditSummary) -> str:
    """The self-contained HTML report of ``summary`` (no scripts, no external resources)."""
    verdict = (
        '<p class="ok"><strong>Every chain verifies.</strong></p>'
        if summary.ok
        else f'<p class="bad"><strong>{len(summary.failures)} failure(s) found.</strong></p>'
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
        ],
    )
    failures = (
        _table(
            ("class", "graph", "node", "reason"),
            [(f.kind, f.graph, f.node, f.reason) for f in summary.failures],
        )
        if summary.failures
        else "<p>None.</p>"
    )
    latency = _table(
        ("sender", "receiver", "hops", "mean ms", "max ms"),
        [(h.sender, h.receiver, h.hops, round(h.mean_ms, 1), h.max_ms) for h in summary.latencies],
    )
    fan = _table(
        ("node", "messages in", "envelopes out", "max fan-out"),
        [(f.node, f.inbound, f.outbound, f.max_fan_out) for f in summary.fan_out],
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>xdn provenance audit</title><style>{_STYLE}</style></head><body>"
        f"<h1>xdn provenance audit</h1>{verdict}<h2>Summary</h2>{counts}"
        f"<h2>Failures</h2>{failures}"
        f"<h2>Refusals</h2>{_refusals(summary)}"
        f"<h2>Latency per hop</h2>{_bar_chart(summary.latencies)}{latency}"
        f"<h2>Fan-out</h2>{fan}</body></html>\n"
    )
