"""What each subscriber's application should hold after a campaign, and what it does hold.

Entitlement is computed here, from the publishers' signed policies, mappings and the
subscriber's certificate, never taken from a site: a subscriber is due, for every document
version a publisher reported, the fragments of the concepts its policy grants it, once each, in
the publisher's order. :func:`judge` holds ``received.jsonl`` against that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from deploy.network import LocalNetwork
from xdn import certs, xmlsafe
from xdn.codec import fragment_id
from xdn.mapping import load_mapping, map_document
from xdn.ontology import Ontology
from xdn.policy import auth_list, load_policy

__all__ = ["InboxTail", "Verdict", "due", "fragments_of", "judge"]

Version = tuple[str, int]  # (document, version)


def fragments_of(
    net: LocalNetwork, ontology: Ontology, publisher: str, paths: Sequence[Path]
) -> list[dict[str, str]]:
    """Each document's fragments (fragment id → concept), by the publisher's mapping."""
    mapping = load_mapping(net.publishers[publisher].mapping, ontology)
    return [
        {
            fragment_id(path.stem, i): node.concept
            for i, node in enumerate(map_document(xmlsafe.parse_file(path), mapping))
        }
        for path in paths
    ]


def due(
    net: LocalNetwork,
    ontology: Ontology,
    subscriber: str,
    published: Mapping[str, Sequence[tuple[Version, Mapping[str, str]]]],
) -> dict[str, list[tuple[Version, dict[str, str]]]]:
    """Publisher → the versions ``subscriber`` is due, in order, each with its fragments."""
    credential = certs.credential_from_pem((net.certs / f"{subscriber}.pem").read_bytes())
    now = datetime.now(UTC)
    out: dict[str, list[tuple[Version, dict[str, str]]]] = {}
    for publisher, versions in published.items():
        policy = load_policy(net.publishers[publisher].policy, ontology)
        granted = auth_list(credential, policy, ontology, at=now).concepts
        out[publisher] = [
            (version, kept)
            for version, fragments in versions
            if (kept := {f: c for f, c in fragments.items() if c in granted})
        ]
    return out


class InboxTail:
    """``received.jsonl`` of one subscriber, read as it grows (complete lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[dict[str, object]] = []
        self.newest_issued_ms = 0
        self._offset = 0

    def poll(self) -> int:
        """Read what was appended; return the number of records so far."""
        if not self.path.exists():
            return 0
        with open(self.path, "rb") as src:
            src.seek(self._offset)
            data = src.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            record = json.loads(line)
            self.records.append(record)
            self.newest_issued_ms = max(self.newest_issued_ms, int(record["issued_at_ms"]))
        return len(self.records)


@dataclass(slots=True)
class Verdict:
    """Per-subscriber findings, summed over subscribers."""

    deliveries: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    altered: int = 0
    unexpected: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.reordered or self.altered or self.unexpected
        )


def judge(
    subscriber: str,
    records: Sequence[Mapping[str, object]],
    owed: Mapping[str, Sequence[tuple[Version, Mapping[str, str]]]],
    verdict: Verdict,
) -> None:
    """Add what ``subscriber`` got (``records``, in its order) against what it is ``owed``."""
    for publisher, versions in owed.items():
        got = [
            ((str(r["document"]), int(str(r["version"]))), r["fragments"])
            for r in records
            if r["publisher"] == publisher
        ]
        verdict.deliveries += len(got)
        wanted = dict(versions)
        seen: set[Version] = set()
        order = [v for v, _ in versions]
        position = {v: i for i, v in enumerate(order)}
        last = -1
        for version, fragments in got:
            where = f"{subscriber}: {publisher} {version[0]} v{version[1]}"
            if version not in wanted:
                verdict.unexpected += 1
                verdict.problems.append(f"{where} was not due")
                continue
            if version in seen:
                verdict.duplicated += 1
                verdict.problems.append(f"{where} reached the application twice")
                continue
            seen.add(version)
            if fragments != wanted[version]:
                verdict.altered += 1
                verdict.problems.append(f"{where} has other fragments than granted")
            if position[version] < last:
                verdict.reordered += 1
                verdict.problems.append(f"{where} arrived after a later version")
            last = max(last, position[version])
        for version in order:
            if version not in seen:
                verdict.lost += 1
                verdict.problems.append(
                    f"{subscriber}: {publisher} {version[0]} v{version[1]} lost"
                )
