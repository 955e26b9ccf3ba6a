"""What each subscriber of a local network should receive, and what it recorded.

The expectation is computed independently of the network, from the publishers' mappings and
signed policies and the subscriber's certificate, so the demo and the integration tests can
hold the network's deliveries against it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from xdn import certs, xmlsafe
from xdn.codec import fragment_id
from xdn.mapping import load_mapping, map_document
from xdn.ontology import Ontology
from xdn.policy import auth_list, load_policy

__all__ = ["Deliveries", "expected_deliveries", "read_received"]

Deliveries = dict[tuple[str, str], dict[str, str]]  # (publisher, document) → fragment → concept


class _Publisher(Protocol):
    @property
    def mapping(self) -> Path: ...
    @property
    def policy(self) -> Path: ...


class _Network(Protocol):
    """What is read of a :class:`deploy.network.LocalNetwork`."""

    @property
    def certs(self) -> Path: ...
    @property
    def publishers(self) -> Mapping[str, _Publisher]: ...


def expected_deliveries(
    net: _Network, ontology: Ontology, subscriber: str, published: dict[str, list[Path]]
) -> Deliveries:
    """Fragments the policies grant ``subscriber``, computed from mappings and policies."""
    credential = certs.credential_from_pem((net.certs / f"{subscriber}.pem").read_bytes())
    now = datetime.now(UTC)
    out: Deliveries = {}
    for publisher, documents in published.items():
        spec = net.publishers[publisher]
        allowed = auth_list(credential, load_policy(spec.policy, ontology), ontology, at=now)
        mapping = load_mapping(spec.mapping, ontology)
        for doc in documents:
            mapped = map_document(xmlsafe.parse_file(doc), mapping)
            fragments = {
                fragment_id(doc.stem, i): node.concept
                for i, node in enumerate(mapped)
                if node.concept in allowed.concepts
            }
            if fragments:
                out[(publisher, doc.stem)] = fragments
    return out


def _written_lines(path: Path) -> list[str]:
    """The complete lines of a file a subscriber appends to: a line still being written (a
    large document's record takes several writes' worth) is not recorded yet."""
    if not path.exists():
        return []
    text = path.read_text()
    return text[: text.rfind("\n") + 1].splitlines()


def read_received(inbox: Path) -> tuple[Deliveries, int]:
    """What a subscriber recorded: accepted deliveries and the number refused."""
    received: Deliveries = {}
    for line in _written_lines(inbox / "received.jsonl"):
        record = json.loads(line)
        received[(record["publisher"], record["document"])] = record["fragments"]
    return received, len(_written_lines(inbox / "refused.jsonl"))
