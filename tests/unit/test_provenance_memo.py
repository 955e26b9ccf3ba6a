"""A node reads a chain's graphs once: when the receipt of a document it relayed comes back,
only the graphs added below it are parsed and read again (xdn.rdf, xdn.provenance._shape)."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from xdn import crypto, rdf
from xdn.errors import ProvenanceError
from xdn.provenance import (
    ContentFacts,
    LeafRanges,
    Message,
    Signer,
    _shape,
    message_uri,
    originate,
    receipt,
    relay,
)
from xdn.provenance._graphs import EnvelopeInfo, read_envelope

NODES = ("pub", "d1", "alice")


def _chain() -> tuple[Message, Message, Message]:
    signers = {n: Signer(node_uri=f"https://{n}.xdn.example/",
                         private_key=crypto.generate_private_key()) for n in NODES}  # fmt: skip
    sent = originate(
        signers["pub"], message_uri=message_uri(signers["pub"].node_uri, "doc", "v1"),
        recipient_uri=signers["d1"].node_uri, timestamp_ms=1,
        content=ContentFacts(document_id="doc", publisher="pub", manifest_root=bytes(32),
                             leaf_count=4),
    )  # fmt: skip
    relayed = relay(
        sent, signers["d1"], message_uri=message_uri(signers["d1"].node_uri, "doc", "v1"),
        recipient_uri=signers["alice"].node_uri, leaves=LeafRanges(((0, 4),)), timestamp_ms=2,
    )  # fmt: skip
    received = receipt(relayed, signers["alice"],
                       message_uri=message_uri(signers["alice"].node_uri, "doc", "r"),
                       timestamp_ms=3)  # fmt: skip
    return sent, relayed, received


def test_a_receipt_coming_back_reads_only_the_graphs_added_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[str] = []

    def counting(name: str, quads: Iterable[rdf.Quad]) -> EnvelopeInfo:
        read.append(name)
        return read_envelope(name, quads)

    _, relayed, received = _chain()  # (made elsewhere: a relay, then the receipt below it)
    monkeypatch.setattr(_shape, "read_envelope", counting)
    monkeypatch.setattr(_shape, "_READ", {})
    Message.from_nquads(relayed.to_nquads())  # d1's relay, as the next hop parses it
    before = len(read)
    back = Message.from_nquads(received.to_nquads())
    assert read[before:] == [received.envelopes()[-1].name]  # only the receipt's envelope
    assert back.envelopes() == received.envelopes()
    parsed_again = rdf.parse_nquads(relayed.to_nquads())
    assert all(q in relayed.quads for q in parsed_again)


def test_a_remembered_line_parses_to_the_statement_it_was_written_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent, _, _ = _chain()
    by_line = {rdf.format_quad(q): q for q in sent.quads}

    def unexpected(line: str) -> rdf.Quad:
        raise AssertionError(f"parsed again: {line}")

    monkeypatch.setattr(rdf, "_parse_statement", unexpected)
    for line in sent.to_nquads().decode().splitlines():
        assert rdf.parse_line(line) == by_line[line]


def test_a_malformed_graph_is_refused_every_time() -> None:
    sent, _, _ = _chain()
    broken = sent.to_nquads().replace(b"EnvelopeGraph", b"EnvelopeGraf")
    for _ in range(2):  # a refusal is never remembered as a reading
        with pytest.raises(ProvenanceError):
            Message.from_nquads(broken)
