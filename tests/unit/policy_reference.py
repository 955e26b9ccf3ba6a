"""A tiny reference evaluator written from docs/policies.md, not from the engine's code.

It reads the policy *document* (the dict ``tomllib`` gives) and a certificate as the list of
(attribute, value) pairs it carries, and follows "How rules combine — precedence" literally:

1. Gate: a credential outside its validity period, or a policy past ``valid_until``: nothing.
2. Match: the rules whose ``when`` holds; a grant with ``after`` waits until every named
   (publisher, concept) has been disseminated.
3. Deny: everything a matching deny covers is denied.
4. Grant to a fixed point: a grant applies once all its ``requires`` are granted; it gives its
   cover minus the denied concepts minus the concepts whose budget is spent (received
   ``max_instances`` or more). Repeat until nothing changes.

Conditions: every condition given holds (AND); a field holds if *any* of the certificate's
values for it is among the accepted ones; a short name, long name or dotted OID is one field
(only the spellings the tests use are known here). A cover is the concept, or with
``inherit`` the concept and everything below it in the containment graph.
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import networkx as nx

__all__ = ["Cert", "decide", "field_oid"]

_OIDS = {
    "ou": "2.5.4.11",
    "organizationalunitname": "2.5.4.11",
    "2.5.4.11": "2.5.4.11",
    "o": "2.5.4.10",
    "organizationname": "2.5.4.10",
    "2.5.4.10": "2.5.4.10",
    "title": "2.5.4.12",
    "2.5.4.12": "2.5.4.12",
    "cn": "2.5.4.3",
    "2.5.4.3": "2.5.4.3",
}


def field_oid(name: str) -> str:
    """The OID of a field spelt any way the tests spell it (names ignore case)."""
    return _OIDS[name.lower()]


@dataclass(frozen=True)
class Cert:
    """A certificate as the reference sees it: its name attributes, role and validity."""

    subject: tuple[tuple[str, str], ...]  # (attribute spelt any way, value), repeats allowed
    issuer: tuple[tuple[str, str], ...]
    role: str
    not_before: datetime
    not_after: datetime


def _values(pairs: tuple[tuple[str, str], ...], field: str) -> set[str]:
    return {value for name, value in pairs if field_oid(name) == field_oid(field)}


def _holds(when: dict[str, Any], cert: Cert) -> bool:
    roles = when.get("role", [])
    roles = [roles] if isinstance(roles, str) else roles
    if roles and cert.role not in roles:
        return False
    for scope, pairs in (("subject", cert.subject), ("issuer", cert.issuer)):
        for field, accepted in when.get(scope, {}).items():
            accepted = {accepted} if isinstance(accepted, str) else set(accepted)
            if not _values(pairs, field) & accepted:
                return False
    return True


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def decide(
    doc: dict[str, Any],
    graph: nx.DiGraph,
    cert: Cert,
    *,
    at: datetime,
    disseminated: abc.Set[tuple[str, str]] = frozenset(),
    instances: abc.Mapping[str, int] | None = None,
) -> tuple[frozenset[str], frozenset[str]]:
    """(concepts granted, ids of the grant rules that applied)."""
    head = doc["policy"]
    until = head.get("valid_until")
    if not cert.not_before <= at <= cert.not_after or (until is not None and at > until):
        return frozenset(), frozenset()
    counts = instances or {}

    def cover(rule: dict[str, Any]) -> set[str]:
        concept = rule["concept"]
        return {concept} | nx.descendants(graph, concept) if rule.get("inherit") else {concept}

    matching = []
    for rule in doc.get("rule", []):
        waits = [
            (a.get("publisher", head["publisher"]), a["concept"])
            for a in _listed(rule.get("after", []))
        ]
        if _holds(rule["when"], cert) and all(w in disseminated for w in waits):
            matching.append(rule)
    denied: set[str] = set()
    for rule in matching:
        if rule["effect"] == "deny":
            denied |= cover(rule)
    granted: set[str] = set()
    applied: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rule in matching:
            if rule["effect"] != "grant" or rule["id"] in applied:
                continue
            if all(c in granted for c in _listed(rule.get("requires", []))):
                limit = rule.get("max_instances")
                spent = {c for c in cover(rule) if limit is not None and counts.get(c, 0) >= limit}
                granted |= cover(rule) - denied - spent
                applied.add(rule["id"])
                changed = True
    return frozenset(granted), frozenset(applied)
