"""Fuzz targets: every parser that takes bytes from outside, one function per input kind.

A target takes one input (``bytes``) and feeds it to the real parser the way the product does.
It returns normally, or raises one of the target's *expected* errors (the typed errors the
parser documents — :class:`~xdn.errors.XdnError` subclasses, or the named exception of a
library contract such as ``ValueError`` from :func:`xdn.identity.split_member_id`). The driver
(:mod:`fuzz_driver`) and the corpus replay (``test_fuzz_replay.py``) treat anything else that
escapes — an ``AttributeError``, a ``UnicodeDecodeError``, a failed round-trip assertion — as
a finding, as they do a hang (per-input time limit) or a blow-up (RSS limit).

Inputs that need several fields are split on a line break (a header line, then the body), so
that seeds stay readable files in ``corpus/<target>/``. Fixtures (ontology, a throwaway PKI made
at first use: :func:`pki_dir`) are built once per process; their clock is fixed (:data:`NOW`),
so a seed means the same thing in every run.

The gRPC request targets live in :mod:`fuzz_grpc` and register here too (:data:`TARGETS`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from xdn.errors import XdnError

FUZZ_DIR = Path(__file__).resolve().parent
CORPUS_DIR = FUZZ_DIR / "corpus"
REGRESSIONS_DIR = FUZZ_DIR / "regressions"
PKI_ENV = "XDN_FUZZ_PKI"  # a PKI directory shared by the driver and its workers
SCRATCH_ENV = "XDN_FUZZ_SCRATCH"  # where workers make scratch dirs (the driver removes it)
NOW = datetime(2026, 6, 1, tzinfo=UTC)  # the targets' clock
ISSUED = NOW - timedelta(days=150)  # when the fuzz PKI is issued (valid ten years)
PUBLISHER = "production-dept"  # the publisher of the production policy and mapping


@dataclass(frozen=True, slots=True)
class Target:
    """One fuzz target: ``run(data)`` may raise only ``expected``."""

    name: str
    run: Callable[[bytes], None]
    expected: tuple[type[BaseException], ...] = (XdnError,)
    setup: Callable[[], object] = lambda: None  # builds fixtures before the clock starts


TARGETS: dict[str, Target] = {}


def target(
    name: str,
    *,
    expected: tuple[type[BaseException], ...] = (XdnError,),
    setup: Callable[[], object] = lambda: None,
) -> Callable[[Callable[[bytes], None]], Callable[[bytes], None]]:
    """Register ``run`` as the target ``name``."""

    def register(run: Callable[[bytes], None]) -> Callable[[bytes], None]:
        TARGETS[name] = Target(name=name, run=run, expected=expected, setup=setup)
        return run

    return register


def header_and_body(data: bytes) -> tuple[str, bytes]:
    """The first line (decoded leniently: a header is text) and the rest."""
    head, _, body = data.partition(b"\n")
    return head.decode("utf-8", "replace"), body


def scratch_dir() -> Path:
    """A per-process directory for targets whose parser reads a file (on tmpfs if there);
    removed at exit, or with ``$XDN_FUZZ_SCRATCH`` by the driver (a libFuzzer worker that
    stops on a finding runs no exit handlers)."""
    return _scratch()


@functools.cache
def _scratch() -> Path:
    shm = Path("/dev/shm")
    base = os.environ.get(SCRATCH_ENV) or (shm if shm.is_dir() else None)
    path = Path(tempfile.mkdtemp(prefix="xdn-fuzz-", dir=base))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


# ---- fixtures ---------------------------------------------------------------------------


@functools.cache
def production_ontology():  # type: ignore[no-untyped-def]
    from deploy.network import ONTOLOGY
    from xdn.ontology import load_ontology

    return load_ontology([ONTOLOGY])


@functools.cache
def production_mapping():  # type: ignore[no-untyped-def]
    from xdn.mapping import load_mapping
    from xdn.paths import REPO_ROOT

    return load_mapping(
        REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", production_ontology()
    )


@functools.cache
def pki_dir() -> Path:
    """The throwaway PKI of the targets: a CA, sites d1 (ProductionProcess, the site the gRPC
    targets call) and d2 (WorkOrder), publisher production-dept, subscriber alice (Cred1).

    ``$XDN_FUZZ_PKI`` when set (the driver makes one for all its workers, so that a signed
    seed or finding means the same in each), else one of this process; made when absent. Never
    committed: private keys stay out of the repository (``*.key`` in .gitignore).
    """
    from deploy.pki import Party, ensure_ca, issue_party
    from xdn import certs

    path = Path(os.environ.get(PKI_ENV) or scratch_dir() / "pki")
    parties = (
        Party(name="production-dept", role="publisher"),
        Party(
            name="d1",
            role="site",
            hosts=("localhost",),
            attributes={certs.BLOCK_FIELD: "ProductionProcess"},
        ),
        Party(
            name="d2",
            role="site",
            hosts=("localhost",),
            attributes={certs.BLOCK_FIELD: "WorkOrder"},
        ),
        Party(name="alice", role="subscriber", attributes={"OU": "Cred1"}),
    )
    if not (path / f"{parties[-1].name}.pem").exists():
        ensure_ca(path, now=ISSUED, name="xdn-fuzz-ca")
        for party in parties:
            issue_party(path, party, now=ISSUED, days=3650)
    return path


def pki(name: str) -> bytes:
    """A file of the fuzz PKI (``ca.pem``, ``ca.key``, ``<party>.pem``, ``<party>.key``)."""
    return (pki_dir() / name).read_bytes()


# ---- XML --------------------------------------------------------------------------------

SMALL_XML = dict(max_depth=64, max_text_bytes=4096, max_document_bytes=1 << 20)


@target("xml_document")
def xml_document(data: bytes) -> None:
    """The hardened parser, in memory and streamed (every XML xdn reads goes through it)."""
    from xdn.xmlsafe import Limits, iterparse_file, parse_bytes

    limits = Limits(**SMALL_XML)
    parse_bytes(data, limits=limits)
    for _event, element in iterparse_file(io.BytesIO(data), limits=limits):
        element.clear(keep_tail=True)


def _publish_keys():  # type: ignore[no-untyped-def]
    from xdn.codec import ConceptKey

    return {
        concept: ConceptKey(publisher=PUBLISHER, concept=concept, epoch=1, group_key=bytes(32))
        for concept in production_ontology().concepts
    }


@functools.cache
def _signer():  # type: ignore[no-untyped-def]
    from xdn import crypto

    return crypto.load_private_key_pem(pki("production-dept.key"))


@target("xml_publish", setup=lambda: (production_mapping(), _signer()))
def xml_publish(data: bytes) -> None:
    """A publisher's document through the codec: in memory, then streamed when the mapping
    allows, with the production mapping (the sample orders are the seeds)."""
    from xdn.codec import encode_document, encode_file
    from xdn.xmlsafe import Limits

    common = dict(
        mapping=production_mapping(),
        document_id="d",
        publisher=PUBLISHER,
        version=1,
        issued_at_ms=0,
        keys=_publish_keys(),
        signer=_signer(),
        limits=Limits(**SMALL_XML),
    )
    encode_document(io.BytesIO(data), streaming=False, **common)
    encode_file(io.BytesIO(data), io.BytesIO(), streaming=True, **common)


@target("xml_export", setup=lambda: _signer())
def xml_export(data: bytes) -> None:
    """An XML Encryption export, read back (in memory) and decoded (streamed)."""
    from xdn.codec import decode_file, from_encrypted_xml
    from xdn.xmlsafe import Limits

    limits = Limits(**SMALL_XML)
    from_encrypted_xml(data, limits=limits)
    keys = {(PUBLISHER, c, 1): bytes(32) for c in production_ontology().concepts}
    decode_file(
        io.BytesIO(data),
        io.BytesIO(),
        publisher_key=_signer().public_key(),
        keys=keys,
        limits=limits,
    )


# ---- RDF --------------------------------------------------------------------------------


@target("nquads")
def nquads(data: bytes) -> None:
    """The strict N-Quads parser; what it accepts must survive canonical form unchanged."""
    from xdn.rdf import canonicalise, parse_nquads

    quads = parse_nquads(data)
    canonical = canonicalise(quads)
    again = parse_nquads(canonical)
    assert set(again) == set(quads), "canonical N-Quads do not parse back to the same quads"
    assert canonicalise(again) == canonical, "canonical form is not idempotent"


@functools.cache
def _chain_verifier():  # type: ignore[no-untyped-def]
    from xdn.provenance import ChainVerifier

    return ChainVerifier(pki("ca.pem"))


@target("provenance", setup=_chain_verifier)
def provenance(data: bytes) -> None:
    """A peer's provenance chain (a receipt, a log entry): parse, shape, then Algorithm 2."""
    from xdn.provenance import MAX_CHAIN_BYTES, Message

    message = Message.from_nquads(data, max_bytes=MAX_CHAIN_BYTES)
    message.latest_graphs_nquads()
    _chain_verifier().verify(message, at=NOW)


# ---- TOML -------------------------------------------------------------------------------


@target("policy_toml", setup=production_ontology)
def policy_toml(data: bytes) -> None:
    """A policy document, validated against the production ontology."""
    from xdn.policy import parse_policy

    parse_policy(data, production_ontology(), at=NOW)


@functools.cache
def _sample_tree():  # type: ignore[no-untyped-def]
    from xdn.paths import REPO_ROOT
    from xdn.xmlsafe import parse_file

    return parse_file(REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml")


@target("mapping_toml", setup=lambda: (production_ontology(), _sample_tree()))
def mapping_toml(data: bytes) -> None:
    """A concept → XPath mapping, validated, then evaluated on the sample order."""
    from xdn.mapping import map_document, parse_mapping

    mapping = parse_mapping(data, production_ontology(), source="fuzz.toml", schema="fuzz")
    map_document(_sample_tree(), mapping)


def _as_file(data: bytes, name: str) -> Path:
    path = scratch_dir() / name
    path.write_bytes(data)
    return path


@target("site_toml")
def site_toml(data: bytes) -> None:
    """A site's configuration file (``xdn disseminator serve --config``)."""
    from disseminator.config import load_site_config

    load_site_config(_as_file(data, "site.toml"))


@target("topology_toml", setup=production_ontology)
def topology_toml(data: bytes) -> None:
    """A deployment topology (``xdn cluster``: sites, uplinks, publishers)."""
    from deploy.cluster import load_topology

    load_topology(_as_file(data, "topology.toml"))


# ---- certificates -----------------------------------------------------------------------


def _pem(data: bytes, label: str) -> bytes:
    """PEM as given, or DER wrapped in PEM (so the fuzzer mutates the structure, not base64)."""
    if data.startswith(b"-----BEGIN"):
        return data
    import base64

    body = base64.encodebytes(data)
    return b"-----BEGIN " + label + b"-----\n" + body + b"-----END " + label + b"-----\n"


@target("certificate")
def certificate(data: bytes) -> None:
    """A certificate as a peer presents it (or a CRL, after a first byte ``C``): read its
    fields, check it against the CA for every role, derive its member id."""
    from xdn import certs, identity

    ca = pki("ca.pem")
    if data[:1] == b"C":
        certs.read_crl(_pem(data[1:], b"X509 CRL"), ca)
        return
    pem = _pem(data, b"CERTIFICATE")
    credential = certs.credential_from_pem(pem)
    identity.split_member_id(credential.member_id)
    certs.public_key_of(pem)
    certs.curve_of_certificate(pem)
    for role in (None, "site", "publisher", "subscriber"):
        with contextlib.suppress(certs.CertificateError):
            certs.verify_certificate(pem, ca, at=NOW, role=role)


# ---- linked data ------------------------------------------------------------------------


@target("notification")
def notification(data: bytes) -> None:
    """A notification POSTed to an inbox: ``Content-Type`` on the first line, then the body."""
    from xdn.linked_data import (
        NotificationLimits,
        is_receipt,
        is_refusal,
        parse_notification,
    )

    content_type, body = header_and_body(data)
    posted = parse_notification(
        body,
        content_type,
        uri="https://site.example/inbox/1",
        limits=NotificationLimits(max_bytes=64 * 1024, max_statements=1000),
    )
    is_receipt(posted)
    is_refusal(posted)
    posted.nquads  # noqa: B018 (stored as N-Quads: must serialise)


@target("http_headers")
def http_headers(data: bytes) -> None:
    """The request headers the HTTPS edge reads: ``Accept``, ``Content-Type``, ``Link`` and
    the ``after`` cursor, one per line."""
    from xdn.linked_data import choose, page_cursor, parse_accept, parse_links
    from xdn.linked_data._media import parse_content_type

    lines = data.decode("utf-8", "replace").split("\n")
    accept = lines[0]
    parse_accept(accept)
    choose(accept, ("application/n-quads", "application/trig", "application/ld+json"))
    if len(lines) > 1:
        parse_content_type(lines[1])
    parse_links(lines[2:3])
    if len(lines) > 3:
        page_cursor({"after": lines[3]})


@target("member_id", expected=(ValueError,))
def member_id(data: bytes) -> None:
    """A member id as a peer names one (``name@fingerprint``): split and rebuilt."""
    from xdn.identity import member_id as build
    from xdn.identity import person, split_member_id

    text = data.decode("utf-8", "replace")
    person(text)
    name, prefix = split_member_id(text)
    assert build(name, prefix * 2).startswith(name), "a member id does not keep its name"


# ---- what arrives from upstream ---------------------------------------------------------


def _protobuf_errors() -> tuple[type[BaseException], ...]:
    from google.protobuf.message import DecodeError

    return (XdnError, DecodeError)  # (a response deserializer's error: the call fails)


@target("wire_delivery", expected=_protobuf_errors())
def wire_delivery(data: bytes) -> None:
    """A ``Delivery`` from an uplink (to a downlink site or a subscriber): the site's framing
    reader, then each body through :mod:`xdn.wireconv` into our types, key messages checked
    against the CA as a member checks them."""
    from disseminator.uplink import read_delivery
    from xdn import certs, lkh, wireconv
    from xdn.provenance import MAX_CHAIN_BYTES, Message
    from xdn.wire.v1 import dissemination_pb2 as pb

    received = read_delivery(data)
    if not isinstance(received, pb.Delivery):  # (a document: read as records, as routed)
        received = pb.Delivery.FromString(data)
    kind = received.WhichOneof("body")
    body = getattr(received, kind) if kind else None
    ca = pki("ca.pem")
    if kind == "dissemination":
        wireconv.delivery_from_pb(body)
        Message.from_nquads(body.provenance, max_bytes=MAX_CHAIN_BYTES)
    elif kind in ("key", "rekey", "document_keys"):
        read = {
            "key": wireconv.enrolment_from_pb,
            "rekey": wireconv.rekey_from_pb,
            "document_keys": wireconv.document_keys_from_pb,
        }[kind]
        lkh.verify_key_message(read(body), ca_pem=ca, at=NOW)
    elif kind == "checkpoint":
        wireconv.checkpoint_from_pb(body)
    elif kind == "entitlement":
        wireconv.entitlement_from_pb(body)
    elif kind == "revocation_list" and body.crl:
        certs.read_crl(body.crl, ca)


def load_all() -> dict[str, Target]:
    """Every target, the gRPC ones included."""
    import fuzz_grpc  # noqa: F401 (registers its targets)

    return TARGETS
