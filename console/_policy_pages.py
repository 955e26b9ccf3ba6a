"""Pages of one publisher's policy: the rules, the editor with its checks, the diff, signing.

The editor is a plain form: "Check" posts the draft back to the policy page, "Show diff" to the
diff page, whose "Sign" button posts the same draft to be signed. ``console.js`` adds live
validation (the draft is posted as you type and the verdict shown in a live region); without
JavaScript the buttons do the same work.
"""

from __future__ import annotations

from collections.abc import Iterable

from console._html import Nav, attr, esc, listing, page, table
from console._workspace import Current, DraftCheck, DraftDiff
from xdn.policy import Authorization, Impact, Policy, Rule

__all__ = [
    "authorization_html",
    "check_html",
    "diff_page",
    "policy_page",
    "rules_table",
    "signed_page",
]


def _rule_row(rule: Rule) -> list[str]:
    extra = [f"if {', '.join(rule.requires)} granted"] if rule.requires else []
    extra += [f"after {a.concept} of {a.publisher}" for a in rule.after]
    if rule.max_instances is not None:
        extra.append(f"at most {rule.max_instances} instance(s)")
    concept = rule.concept + (" and sub-concepts" if rule.inherit else "")
    return [
        esc(rule.id),
        esc(rule.effect),
        esc(concept),
        esc(rule.when.describe()),
        esc("; ".join(extra)),
        esc(rule.description),
    ]


def rules_table(policy: Policy, *, caption: str) -> str:
    """The rules of ``policy`` as a table."""
    return table(
        ["rule", "effect", "concept", "for", "conditions", "description"],
        (_rule_row(r) for r in policy.rules),
        caption=caption,
        empty="no rule",
    )


def check_html(check: DraftCheck | None) -> str:
    """The verdict on a draft (the live region's content)."""
    if check is None:
        return '<p class="muted">Edit the draft: it is checked as you type.</p>'
    if check.error is not None:
        where = f" (line {check.line})" if check.line else ""
        return f'<p class="error">Error{esc(where)}: {esc(check.error)}</p>'
    assert check.policy is not None
    grants = sum(1 for r in check.policy.rules if r.effect == "grant")
    warnings = "".join(f'<p class="warning">Warning: {esc(w)}</p>' for w in check.warnings)
    return (
        f'<p class="ok">Valid: version {check.policy.version}, {grants} grant / '
        f"{len(check.policy.rules) - grants} deny rule(s).</p>{warnings}"
    )


def _signature_line(current: Current) -> str:
    state = "ok" if current.signed else "warning"
    return f'<span class="{state}">signature {esc(current.signature)}</span>'


def policy_page(
    publisher: str,
    path: str,
    current: Current,
    *,
    draft: str,
    check: DraftCheck | None,
    can_sign: bool,
    nav: Nav,
) -> str:
    """The policy in force, and the editor holding ``draft``."""
    base = f"/policies/{publisher}"
    key = (
        "its key is here: drafts can be signed"
        if can_sign
        else "no key given for it: drafts cannot be signed here"
    )
    body = (
        f"<p>File <code>{esc(path)}</code>, version {current.policy.version}, "
        f"{_signature_line(current)}; {esc(key)}.</p>"
        + rules_table(current.policy, caption=f"rules of version {current.policy.version}")
        + f'<h2 id="edit">Edit a draft</h2><form method="post"{attr("action", base)}>'
        '<label for="draft">Draft (TOML, see docs/policies.md)</label>'
        f'<textarea id="draft" name="draft" rows="24" spellcheck="false" '
        f'aria-describedby="verdict"{attr("data-check", base + "/check")}>{esc(draft)}</textarea>'
        f'<div id="verdict" role="status" aria-live="polite">{check_html(check)}</div>'
        '<div class="buttons"><button type="submit" id="check">Check</button>'
        f'<button type="submit" id="show-diff"{attr("formaction", base + "/diff")}>'
        "Show diff against the signed version</button></div></form>"
    )
    return page(f"Policy of {publisher}", body, nav=nav, current=base)


def _impact_rows(found: Iterable[Impact]) -> list[list[str]]:
    return [
        [esc(i.who), esc(", ".join(sorted(i.gained)) or "—"), esc(", ".join(sorted(i.lost)) or "—")]
        for i in found
        if i.gained or i.lost
    ]


def _changes(diff: DraftDiff) -> str:
    changes = diff.rules
    items = [f'<span class="gain">added</span> {esc(_rule_text(r))}' for r in changes.added]
    items += [f'<span class="loss">removed</span> {esc(_rule_text(r))}' for r in changes.removed]
    items += [
        f'<span class="edit">edited</span> {esc(_rule_text(a))}<br>was: {esc(_rule_text(b))}'
        for b, a in changes.edited
    ]
    return listing(items, empty="no rule changed")


def _rule_text(rule: Rule) -> str:
    cells = [
        c
        for c in (
            rule.effect,
            rule.concept + (" and sub-concepts" if rule.inherit else ""),
            "for " + rule.when.describe(),
        )
        if c
    ]
    return f"{rule.id}: {' '.join(cells)}"


def diff_page(publisher: str, diff: DraftDiff, *, draft: str, can_sign: bool, nav: Nav) -> str:
    """Rules changed and who gains or loses which concepts; the buttons to edit or sign."""
    base = f"/policies/{publisher}"
    old = diff.current.policy
    hidden = f'<input type="hidden" name="draft"{attr("value", draft)}>'
    back = (
        f'<form method="post"{attr("action", base)}>{hidden}'
        '<button type="submit" id="back">Back to the draft</button></form>'
    )
    if not diff.check.ok or diff.check.policy is None:
        body = check_html(diff.check) + back
        return page(f"Diff of {publisher}'s draft", body, nav=nav, current=base)
    new = diff.check.policy
    signed = "signed" if diff.current.signed else f"current ({diff.current.signature})"
    known = table(
        ["certificate", "gains", "loses"],
        _impact_rows(diff.known),
        caption="known subscribers",
        empty="nobody gains or loses anything",
    )
    conditions = table(
        ["credentials with", "gains", "loses"],
        _impact_rows(diff.by_condition),
        caption="every condition set",
        empty="nobody gains or loses anything",
    )
    if can_sign:
        sign = (
            f'<form method="post"{attr("action", base + "/sign")}>{hidden}'
            f'<button type="submit" id="sign">Sign version {new.version} with '
            f"{esc(publisher)}'s key</button></form>"
        )
    else:
        sign = '<p class="muted">No key for this publisher here: it cannot be signed.</p>'
    body = (
        f"<p>The {esc(signed)} version {old.version} → the draft's version {new.version}.</p>"
        + check_html(diff.check)
        + "<h2>Rules</h2>"
        + _changes(diff)
        + "<h2>Who gains and loses what</h2>"
        + known
        + conditions
        + f'<div class="buttons">{sign}{back}</div>'
    )
    return page(f"Diff of {publisher}'s draft", body, nav=nav, current=base)


def signed_page(publisher: str, policy: Policy, path: str, sig: str, *, nav: Nav) -> str:
    """What signing wrote."""
    body = (
        f'<p class="ok" role="status">Signed version {policy.version} of {esc(publisher)}\'s '
        f"policy: wrote <code>{esc(path)}</code> and <code>{esc(sig)}</code>.</p>"
        "<p>Sites that read this file reload it at once; others take it up when it is copied "
        "to where they read their policies (docs/operations.md).</p>"
        f'<p><a href="/policies/{esc(publisher)}">Back to the policy</a></p>'
    )
    return page(f"Signed {publisher}'s policy", body, nav=nav, current=f"/policies/{publisher}")


def authorization_html(auth: Authorization) -> str:
    """What one publisher's policy grants, and why (rules, containment paths, notes)."""
    rows = [
        [
            esc(g.effect),
            esc(g.concept),
            esc(g.rule),
            esc(" ⊒ ".join(g.via)),
            esc(", ".join(g.because)),
        ]
        for g in auth.explain
    ]
    notes = [esc(f"at most {n} instance(s) of {c}") for c, n in auth.limits]
    notes += [esc(n) for n in auth.notes]
    return (
        f"<p><strong>{esc(auth.publisher)}</strong>: "
        f"{esc(', '.join(sorted(auth.concepts)) or 'nothing')}</p>"
        + table(
            ["effect", "concept", "rule", "via", "because granted"],
            rows,
            caption=f"why, by {auth.publisher}'s rules",
            empty="no rule matches",
        )
        + (listing(notes) if notes else "")
    )
