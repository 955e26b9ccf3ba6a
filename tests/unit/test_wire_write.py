"""A document streamed for publishing is, byte for byte, what the in-memory path serializes:
the same concepts found before encrypting (the first pass), the same ``Dissemination`` written
from fragments given one at a time, the same ``PublishRequest`` framed by hand around it.

Signatures are ECDSA (random), IVs random: both paths get one fixed IV and memoized signatures
(the same bytes signed once, by the real key), so equal inputs give equal bytes.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lxml import etree
from test_codec_property import CLARK, CONCEPTS, KEYS, ONTOLOGY, SPECS, build

from deploy import docgen
from xdn import crypto
from xdn.codec import (
    XDN_NS,
    ConceptKey,
    Fragment,
    Sequencing,
    concept_order,
    concepts_present,
    encode,
    encode_to_sink,
)
from xdn.errors import MappingError, UsageError
from xdn.mapping import Mapping, load_mapping, map_document, parse_mapping
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_write import (
    DisseminationWriter,
    field_header,
    fragment_header,
    request_framing,
    varint,
)
from xdn.wireconv import dissemination_to_pb, fragment_header_to_pb
from xdn.xmlsafe import parse_bytes

SIGNER = crypto.generate_private_key()
CERT = b"-----BEGIN CERTIFICATE-----\nnot parsed here\n-----END CERTIFICATE-----\n"
PRODUCTION = load_ontology([REPO_ROOT / "ontology" / "production.owl"])  # (both schemas')


@contextmanager
def deterministic() -> Iterator[None]:
    """Memoized signatures: equal bytes get one (real) signature, whoever signs them again."""
    real, memo = crypto.sign, {}

    def sign(key: crypto.PrivateKey, data: bytes) -> bytes:
        if data not in memo:
            memo[data] = real(key, data)
        return memo[data]

    with mock.patch.object(crypto, "sign", sign):
        yield


def concept_keys(publisher: str, concepts: frozenset[str]) -> dict[str, ConceptKey]:
    return {
        c: ConceptKey(publisher=publisher, concept=c, epoch=3, group_key=crypto.sha256(c.encode()))
        for c in concepts
    }


def job_args(publisher: str, keys: dict[str, ConceptKey], order: list[str]) -> dict[str, Any]:
    return {
        "document_id": "doc-1", "publisher": publisher, "version": 2, "issued_at_ms": 1_700,
        "keys": keys, "signer": SIGNER, "concept_order": order,
        "sequencing": Sequencing(sequence=9, previous={c: 4 for c in sorted(keys)[::2]}),
        "iv_factory": lambda: bytes(12),
    }  # fmt: skip


def _in_memory(xml: bytes, mapping: Mapping, job: dict[str, Any], provenance: bytes) -> bytes:
    """The dissemination as the publisher serialized it before it streamed."""
    encoded = encode(map_document(parse_bytes(xml), mapping), **job)
    return dissemination_to_pb(
        encoded.signed_manifest,
        [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
        provenance=provenance,
        publisher_certificate=CERT,
    ).SerializeToString()


def _streamed(xml: bytes, mapping: Mapping, job: dict[str, Any], provenance: bytes) -> bytes:
    records, out = io.BytesIO(), io.BytesIO()
    writer = DisseminationWriter(records)
    sealed = encode_to_sink(io.BytesIO(xml), writer.add, mapping=mapping, **job)
    size = writer.write(out, sealed, provenance=provenance, publisher_certificate=CERT)
    whole = out.getvalue()
    assert size == len(whole)
    body = writer.body(sealed, provenance=provenance, publisher_certificate=CERT)
    for step in (5, 251):  # spans that start and end anywhere read as the same bytes
        assert b"".join(body.read(a, min(a + step, size)) for a in range(0, size, step)) == whole
    return whole


def _random_mapping(by_tag: dict[str, str]) -> Mapping:
    rules: dict[str, list[str]] = {}
    for tag, concept in by_tag.items():
        rules.setdefault(concept, []).append(f"//{CLARK[tag]}")
    toml = '[namespaces]\nx = "urn:x"\ny = "urn:y"\n[concepts]\n' + "".join(
        f"{c} = {exprs!r}\n".replace("'", '"') for c, exprs in rules.items()
    )
    return parse_mapping(toml.encode(), ONTOLOGY, source="random.toml", schema="random")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=SPECS,
    concept_of=st.lists(st.sampled_from((None, *CONCEPTS)), min_size=len(CLARK),
                        max_size=len(CLARK)),
    order=st.permutations(CONCEPTS),
    provenance=st.binary(max_size=300),
)  # fmt: skip
def test_random_documents_stream_to_the_bytes_the_in_memory_path_serializes(
    spec: Any, concept_of: list[str | None], order: list[str], provenance: bytes
) -> None:
    by_tag = {t: c for t, c in zip(CLARK, concept_of, strict=True) if c is not None}
    root = build(spec)
    mapped_tags = {el.tag for el in root.iter()} & by_tag.keys()
    assume(mapped_tags)
    mapping, xml = _random_mapping(by_tag), etree.tostring(root)
    present = concepts_present(io.BytesIO(xml), mapping=mapping)
    assert present == {n.concept for n in map_document(parse_bytes(xml), mapping)}
    job = job_args("pub", KEYS, order)
    with deterministic():
        assert _streamed(xml, mapping, job, provenance) == _in_memory(
            xml, mapping, job, provenance
        )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schema=st.sampled_from(docgen.SCHEMAS),
    size=st.integers(2_000, 120_000),
    seed=st.integers(0, 2**16),
    hint=st.none() | st.integers(1, 40),
)
def test_generated_documents_stream_to_the_same_bytes(
    schema: str, size: int, seed: int, hint: int | None
) -> None:
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / f"{schema}.toml", PRODUCTION)
    out = io.BytesIO()
    docgen.generate(schema, size, out, seed=seed, fragments_hint=hint)
    xml = out.getvalue()
    present = concepts_present(io.BytesIO(xml), mapping=mapping)
    assert present == {n.concept for n in map_document(parse_bytes(xml), mapping)}
    job = job_args(schema, concept_keys(schema, present), concept_order(PRODUCTION))
    with deterministic():
        streamed = _streamed(xml, mapping, job, b"<prov> .\n")
        assert streamed == _in_memory(xml, mapping, job, b"<prov> .\n")
    assert len(pb.Dissemination.FromString(streamed).fragments) > 1


def _full_request(dissemination: bytes) -> pb.PublishRequest:
    return pb.PublishRequest(
        dissemination=pb.Dissemination.FromString(dissemination),
        keys=[pb.KeyMessage(publisher="p", concept="c", epoch=2, subscriber="s", sealed=b"k")],
        rekeys=[pb.GroupRekey(publisher="p", concept="c", epoch=2, message=b"r" * 200)],
        document_keys=[pb.DocumentKeys(publisher="p", concept="c", sealed=b"d")],
        checkpoint=pb.Checkpoint(publisher="p", sequence=9, signature=b"s" * 103),
        entitlements=[pb.Entitlement(publisher="p", subscriber="s", concepts=["c", "d"])],
    )


@pytest.mark.parametrize("alone", [False, True])
def test_a_request_framed_by_hand_is_the_request_serialized(alone: bool) -> None:
    with deterministic():
        xml = (REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml").read_bytes()
        mapping = load_mapping(
            REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", PRODUCTION
        )
        present = concepts_present(io.BytesIO(xml), mapping=mapping)
        job = job_args("production-dept", concept_keys("production-dept", present), [])
        dissemination = _streamed(xml, mapping, job, b"")
    full = _full_request(dissemination) if not alone else pb.PublishRequest(
        dissemination=pb.Dissemination.FromString(dissemination)
    )
    rest = pb.PublishRequest()
    rest.CopyFrom(full)
    rest.ClearField("dissemination")
    before, after = request_framing(rest, len(dissemination))
    assert before + dissemination + after == full.SerializeToString()
    with pytest.raises(ValueError, match="written apart"):
        request_framing(full, len(dissemination))


@pytest.mark.parametrize("value", [1, 127, 128, 300, 16_383, 16_384, 2**32, 2**64 - 1])
def test_varints_and_field_headers_are_as_protobuf_writes_them(value: int) -> None:
    assert b"\x10" + varint(value) == pb.Part(size=value).SerializeToString()
    length = value % 70_000
    data = b"x" * length
    assert field_header(1, length) + data == pb.Part(data=data).SerializeToString() or not data
    assert varint(0) == b"\x00"


def test_varints_out_of_range_are_refused() -> None:
    for value in (-1, 2**64):
        with pytest.raises(ValueError, match="varint"):
            varint(value)


def test_a_seal_of_other_fragments_is_refused() -> None:
    xml = b'<a><b>one</b><b>two</b></a>'
    mapping = _random_mapping({"b": "B"})
    writer = DisseminationWriter(io.BytesIO())
    job = job_args("pub", KEYS, [])
    sealed = encode_to_sink(io.BytesIO(xml), writer.add, mapping=mapping, **job)
    other = DisseminationWriter(io.BytesIO())
    with pytest.raises(ValueError, match="2 leaves for 0 records"):
        other.write(io.BytesIO(), sealed, provenance=b"", publisher_certificate=CERT)


def test_the_first_pass_refuses_what_the_encoder_refuses() -> None:
    twice = parse_mapping(
        b'[namespaces]\nx = "urn:x"\n[concepts]\nA = ["//b"]\nB = ["/r/b"]\n',
        ONTOLOGY, source="two.toml", schema="two",
    )
    with pytest.raises(MappingError, match="mapped to both A and B"):
        concepts_present(io.BytesIO(b"<r><b/></r>"), mapping=twice)
    mapping = _random_mapping({"b": "B"})
    reserved = f'<r xmlns:z="{XDN_NS}"><z:ref/></r>'.encode()
    with pytest.raises(UsageError, match="reserved xdn namespace"):
        concepts_present(io.BytesIO(reserved), mapping=mapping)
    assert concepts_present(io.BytesIO(b"<r><c/></r>"), mapping=mapping) == frozenset()


def test_a_mapping_that_cannot_stream_is_refused_by_the_streaming_functions() -> None:
    toml = '[namespaces]\nx = "urn:x"\n[concepts]\nA = ["//b[1]"]\n'
    mapping = parse_mapping(toml.encode(), ONTOLOGY, source="pred.toml", schema="pred")
    with pytest.raises(UsageError, match="not all simple paths"):
        concepts_present(io.BytesIO(b"<r><b/></r>"), mapping=mapping)
    with pytest.raises(UsageError, match="not all simple paths"):
        job = job_args("pub", KEYS, [])
        encode_to_sink(io.BytesIO(b"<r><b/></r>"), print, mapping=mapping, **job)


_NAMES = st.text(
    st.characters(min_codepoint=0x20, blacklist_characters="\x7f", blacklist_categories=("Cs",)),
    min_size=1,
)


@settings(max_examples=300, deadline=None)
@given(
    names=st.tuples(_NAMES, _NAMES, _NAMES, _NAMES),
    position=st.integers(0, 2**32 - 1),
    parent=st.none() | st.integers(0, 2**31 - 1),
    epoch=st.integers(0, 2**64 - 1),
)
def test_a_fragment_header_is_written_as_protobuf_writes_it(
    names: tuple[str, str, str, str], position: int, parent: int | None, epoch: int
) -> None:
    document_id, publisher, concept, key_name = names
    assume(parent is None or parent < position)
    fragment = Fragment(
        fragment_id=f"{document_id}#{position}", document_id=document_id, publisher=publisher,
        concept=concept, position=position, parent=parent, epoch=epoch, key_name=key_name,
        cipher_value=b"",
    )  # fmt: skip
    assert fragment_header(fragment) == fragment_header_to_pb(fragment).SerializeToString()


@pytest.mark.parametrize(("position", "parent"), [(2**32, None), (2**31 + 1, 2**31)])
def test_a_fragment_header_out_of_the_wire_range_is_refused(
    position: int, parent: int | None
) -> None:
    fragment = Fragment(
        fragment_id=f"d#{position}", document_id="d", publisher="p", concept="c",
        position=position, parent=parent, epoch=1, key_name="k", cipher_value=b"",
    )  # fmt: skip
    with pytest.raises(ValueError):
        fragment_header(fragment)
