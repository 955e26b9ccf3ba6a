"""``xdn provenance canonicalize|show|verify|receipts``: look into signed provenance messages.

Theory of operation
-------------------
A provenance message (:mod:`xdn.provenance`) travels and is stored as N-Quads: content graph,
one envelope per hop, a signature graph for each. Files handed to these commands may also hold
*node descriptions* (``<NODE#cert>``, the certificate a node's provenance log starts with);
those are taken out as signer certificates before the rest is read as one message, so a file
made by concatenating a message and the logs of the nodes it passed through works as it is.

* ``canonicalize`` parses strictly and writes the RDFC-1.0 canonical N-Quads of any
  blank-node-free dataset (what every signature covers);
* ``show`` reads one message (a file, or its message URI: fetched from the site that minted
  it, over HTTPS with ``--web``, ``--certs`` and ``--name``) and prints its graphs by kind,
  its hops in order (sender, recipient, time, how long each hop took, fragments), its
  signers with the names their certificates give when known, the document and fragments —
  or, for a failure notice, what was refused and why;
* ``verify`` runs the paper's Algorithm 2 with the signer keys of the certificates found (in
  the file, ``--log`` files and ``--cert`` files: :func:`xdn.provenance.verify_message`), each
  checked against ``--ca`` when given — or, with ``--ca`` alone, of the certificates the
  signature graphs carry (:class:`xdn.provenance.ChainVerifier`, which also checks each
  signer's role); exit 0 when every graph verifies, else a refusal (exit 2) that starts with
  the graph at fault: ``graph <…>: why``.

* ``receipts`` is the publisher's: it fetches the delivery receipts its root site keeps for it,
  verifies and stores them, and says who received which version of a document and who has not
  (:mod:`publisher.receipts`, imported when the command runs: this admin CLI is an edge).

Input is bounded (``--max-bytes``) before it is parsed. Every refusal is an
:class:`~xdn.errors.PeerError` raised here and printed by ``cli.main.main``; this module is the
edge that reads files and prints, the provenance core stays pure.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.admin._common import at_arg, read, when
from cli.admin._web import client_for, web_args
from xdn.errors import CertificateError, ProvenanceError, SignatureError, UsageError

if TYPE_CHECKING:
    from xdn.crypto import PublicKey
    from xdn.provenance import EnvelopeInfo, Message, SignatureInfo
    from xdn.rdf import Quad

__all__ = [
    "DEFAULT_MAX_BYTES",
    "cmd_provenance_canonicalize",
    "cmd_provenance_receipts",
    "cmd_provenance_show",
    "cmd_provenance_verify",
    "register",
]

#: Inputs larger than this are refused before parsing (``--max-bytes`` overrides it).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024

_GROUP_HELP = """\
Provenance messages are signed linked data: a content graph, one envelope graph per hop and a
signature graph for each, as N-Quads. Files may also carry node descriptions (the certificate
graph a provenance log starts with); they supply the signers' certificates."""


def _input_args(parser: argparse.ArgumentParser, what: str, *, web: bool = False) -> None:
    if not web:
        parser.add_argument("file", type=Path, metavar="FILE", help=f"{what} ('-' for stdin)")
    else:  # (a str: Path would fold the // of a URI)
        parser.add_argument(
            "file", metavar="FILE|URI",
            help=f"{what} ('-' for stdin), or its message URI, fetched over HTTPS from --web, or "
            "from the site that minted it, found through --via",
        )
        web_args(parser, required=False)
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"refuse a larger input (default {DEFAULT_MAX_BYTES})",
    )


def _key_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log",
        type=Path,
        action="append",
        default=[],
        metavar="LOG",
        help="a node's provenance log: take the certificate it starts with (repeatable)",
    )
    parser.add_argument(
        "--cert",
        type=Path,
        action="append",
        default=[],
        metavar="CERT.pem",
        help="a node's certificate; its URI names the node (repeatable)",
    )


def register(subparsers: Any) -> None:
    """Add ``provenance`` and its actions."""
    group = subparsers.add_parser(
        "provenance",
        help="canonicalize, show or verify signed provenance (N-Quads); receipts of documents",
        description=_GROUP_HELP,
    )
    sub = group.add_subparsers(dest="provenance_command", metavar="ACTION", required=True)
    p = sub.add_parser(
        "canonicalize",
        help="print the RDFC-1.0 canonical N-Quads of a dataset",
        description="Parse N-Quads strictly (no blank nodes) and print the RDFC-1.0 canonical "
        "form: every quad's canonical line, sorted by code point, duplicates removed.",
    )
    _input_args(p, "N-Quads dataset")
    p.set_defaults(func=cmd_provenance_canonicalize)
    p = sub.add_parser(
        "show",
        help="pretty-print one message: graphs, hops, signers, timing",
        description="Print one provenance message: its graphs by kind, its hops in order with "
        "sender, recipient, time and duration, its signers (with certificate names when a "
        "certificate is known), the document and fragments, or what a failure notice refused.",
    )
    _input_args(p, "one message, as N-Quads", web=True)
    _key_args(p)
    p.set_defaults(func=cmd_provenance_show)
    p = sub.add_parser(
        "verify",
        help="verify every signature of one message (Algorithm 2)",
        description="Check one message's well-formedness and every signature against its "
        "signer's certificate. Exit 0 when valid; exit 2 naming the graph at fault when not.",
    )
    _input_args(p, "one message, as N-Quads")
    _key_args(p)
    p.add_argument(
        "--ca",
        type=Path,
        metavar="CA.pem",
        help="check every signer certificate against this CA (default: no CA check); with "
        "no --cert or --log, the certificates the message carries are used",
    )
    at_arg(p)
    p.set_defaults(func=cmd_provenance_verify)
    p = sub.add_parser(
        "receipts",
        help="at the publisher: who received which version of a document, who refused it and "
        "who has not",
        description=_RECEIPTS_HELP,
    )
    p.add_argument("document", metavar="DOC", help="the document id")
    p.add_argument("--version", type=int, metavar="V", help="only this version")
    p.add_argument("--connect", help="the publisher's root site HOST:PORT (as for xdn publish)")
    p.add_argument("--name", required=True, help="publisher name (certificate CN)")
    p.add_argument(
        "--certs", type=Path, required=True, help="directory with NAME.pem, NAME.key and ca.pem"
    )
    p.add_argument(
        "--state-dir", type=Path, default=Path("state"),
        help="the key service state xdn publish used (default ./state)",
    )
    p.add_argument(
        "--crl", type=Path, metavar="CRL",
        help="the CA's CRL: receipts signed under revoked certificates are refused (default: "
        "crl.pem in --certs, if present)",
    )
    p.add_argument(
        "--no-fetch", action="store_true",
        help="do not ask the site: show the receipts fetched before",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_provenance_receipts)


_RECEIPTS_HELP = """\
Run by a publisher: fetch the delivery receipts its root site keeps for it (every subscriber
signs one for each document it accepts; they travel upstream, verified by every site), verify
each again (Algorithm 2 under the CA and CRL; our own publication), store them in
STATE/NAME/receipts.sqlite, then print, per version of DOC, who received it (subscriber, member
id, when, how many fragments, the sites on its path) and who has not: the members of the key
service (STATE/NAME/keys.sqlite) whose lease is in force and who are in the group of a concept
of that version. A member that joined after the version was published counts among those who
have not (it may still receive it from a site's retained documents). Subscribers' failure
notices come with the receipts (a subscriber that refused a version signs one: what, and why),
each verified again; a member that refused a version and has no receipt of it is listed as
"refused: REASON (KIND)" instead of among those who have not received it; so is a member
whose site could not replay the version it found missing (kind gap: the notice names the
version's number in our signed sequence). The notices that name no document version (a key
message, a checkpoint, an entitlement refused) follow in a section "other refusals": who,
kind, what, why and when, newest first; a refused key message is listed only if its group's
concept is one of DOC's (of version V's, with --version), the others always."""


# ------------------------------------------------------------------------------- reading


def _fetch(args: argparse.Namespace) -> bytes:
    """The message at URI ``args.file``, as N-Quads, from the site at ``args.web`` (or the
    site that minted it, resolved through ``args.via``)."""
    if not ((args.web or args.via) and args.certs and args.name):
        raise UsageError(f"to fetch {args.file}, give --web (or --via), --certs and --name")
    client = client_for(args, args.file)
    return client.request("GET", args.file, accept="application/n-quads").body


def _read_input(path: Path | str, max_bytes: int) -> bytes:
    """The bytes of ``path`` (``-``: stdin), refused when larger than ``max_bytes``."""
    if max_bytes < 1:
        raise UsageError("--max-bytes must be positive")
    path = Path(path)
    if str(path) == "-":
        data = sys.stdin.buffer.read(max_bytes + 1)
    else:
        try:
            with path.open("rb") as file:
                data = file.read(max_bytes + 1)
        except OSError as exc:
            raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise ProvenanceError(f"{path}: input is larger than {max_bytes} bytes")
    return data


def _by_graph(quads: Iterable[Quad]) -> dict[str | None, list[Quad]]:
    graphs: dict[str | None, list[Quad]] = defaultdict(list)
    for quad in quads:
        graphs[None if quad.g is None else quad.g.value].append(quad)
    return graphs


def _split(data: bytes) -> tuple[frozenset[Quad], dict[str, bytes]]:
    """The message's quads, and node URI → certificate PEM of the node descriptions."""
    from xdn.provenance import graph_type, read_node_description
    from xdn.rdf import parse_nquads

    message: list[Quad] = []
    certificates: dict[str, bytes] = {}
    for name, quads in _by_graph(parse_nquads(data)).items():
        if name is not None and graph_type(name, quads) == "node":
            node, pem = read_node_description(name, quads)
            _add_certificate(certificates, node, pem, f"graph <{name}>")
        else:
            message += quads
    return frozenset(message), certificates


def _add_certificate(certificates: dict[str, bytes], node: str, pem: bytes, source: str) -> None:
    if certificates.setdefault(node, pem) != pem:
        raise ProvenanceError(f"{source}: a second, different certificate for <{node}>")


def _gather_certificates(args: argparse.Namespace, found: dict[str, bytes]) -> dict[str, bytes]:
    """Certificates by node URI from the input, ``--log`` files and ``--cert`` files."""
    from xdn.certs import credential_from_pem

    certificates = dict(found)
    for log in args.log:
        for node, pem in _split(_read_input(log, args.max_bytes))[1].items():
            _add_certificate(certificates, node, pem, str(log))
    for path in args.cert:
        pem = read(path)
        node = credential_from_pem(pem).uri
        if not node:
            raise UsageError(f"{path}: the certificate names no node URI")
        _add_certificate(certificates, node, pem, str(path))
    return certificates


def _message(quads: frozenset[Quad]) -> Message:
    from xdn.provenance import Message

    if not quads:
        raise ProvenanceError("the input holds no message graphs")
    return Message(quads=quads)


# -------------------------------------------------------------------------- canonicalize


def cmd_provenance_canonicalize(args: argparse.Namespace) -> int:
    """``xdn provenance canonicalize``: RDFC-1.0 canonical N-Quads on stdout."""
    from xdn.rdf import canonicalise, parse_nquads

    data = _read_input(args.file, args.max_bytes)
    sys.stdout.buffer.write(canonicalise(parse_nquads(data)))
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------------------------- show


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _graph_lines(quads: frozenset[Quad]) -> list[str]:
    from xdn.provenance import graph_type

    graphs = _by_graph(quads)
    kinds = {name: graph_type(name, graphs[name]) for name in graphs if name is not None}
    lines = [f"graphs ({len(kinds)}):"]
    order = {"content": 0, "refusal": 0, "policy": 0, "envelope": 1, "signature": 2}
    for name, kind in sorted(kinds.items(), key=lambda item: (order[item[1]], item[0])):
        lines.append(f"  {kind:<9}  <{name}>  ({len(graphs[name])} quads)")
    return lines


def _signatures(quads: frozenset[Quad]) -> list[SignatureInfo]:
    from xdn.provenance import graph_type, read_signature

    graphs = _by_graph(quads)
    found = [
        read_signature(name, g)
        for name, g in graphs.items()
        if name is not None and graph_type(name, g) == "signature"
    ]
    return sorted(found, key=lambda s: s.name)


def _hop_lines(envelopes: Sequence[EnvelopeInfo]) -> list[str]:
    lines = [f"hops ({len(envelopes)}):"]
    previous: int | None = None
    for env in envelopes:
        to = f" -> <{env.recipient}>" if env.recipient else ""
        took = "" if previous is None else f", took {env.timestamp_ms - previous} ms"
        lines.append(f"  {env.number}. {env.kind:<11} <{env.sender}>{to}")
        lines.append(f"     at {_time(env.timestamp_ms)}{took}")
        lines.append(f"     message <{env.message}>")
        if env.leaves is not None:
            lines.append(f"     fragments ({env.leaves.count}): manifest leaves {env.leaves}")
        previous = env.timestamp_ms
    return lines


def _list(items: Iterable[str], limit: int = 8) -> str:
    ordered = sorted(items)
    more = f", … ({len(ordered) - limit} more)" if len(ordered) > limit else ""
    return ", ".join(ordered[:limit]) + more


def _signer_lines(
    signatures: Sequence[SignatureInfo], certificates: Mapping[str, bytes]
) -> list[str]:
    from xdn.certs import credential_from_pem

    signed: dict[str, list[str]] = defaultdict(list)
    carried: dict[str, bytes] = {}
    for sig in signatures:
        signed[sig.signer].append(sig.signed_graph + (" (batch)" if sig.batch else ""))
        if sig.certificate is not None:
            carried[sig.signer] = _pem(sig.certificate)
    lines = [f"signers ({len(signed)}):"]
    for node, graphs in sorted(signed.items()):
        pem = certificates.get(node, carried.get(node))
        if pem is None:
            known = "certificate unknown"
        else:
            credential = credential_from_pem(pem)
            known = f"certificate CN={credential.name}, role {credential.role or '?'}"
        lines.append(f"  <{node}>  {known}")
        lines += [f"     signs <{graph}>" for graph in sorted(graphs)]
    return lines


def _pem(der: bytes) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_der_x509_certificate(der).public_bytes(Encoding.PEM)


def _what_lines(message: Message) -> list[str]:
    refusal = message.refusal
    if refusal is None:
        content = message.content()
        return [
            f"document {content.document_id!r} of publisher {content.publisher!r}",
            f"manifest root {content.manifest_root.hex().upper()} ({content.leaf_count} leaves)",
            f"fragments carried ({message.leaves().count}): manifest leaves {message.leaves()}",
        ]
    lines = [f"FAILURE NOTICE: refused a {refusal.kind}", f"  reason: {refusal.reason}"]
    for field in ("publisher", "document_id", "version", "key_message", "concept", "epoch"):
        value = getattr(refusal, field)
        if value is not None:
            lines.append(f"  {field.replace('_', ' ')}: {value}")
    if refusal.manifest_root is not None:
        lines.append(f"  manifest root: {refusal.manifest_root.hex().upper()}")
    if refusal.received_from is not None:
        lines.append(f"  received from: <{refusal.received_from}>")
    return lines


def cmd_provenance_show(args: argparse.Namespace) -> int:
    """``xdn provenance show``: one message (a file, or a message URI fetched over HTTPS),
    pretty-printed."""
    fetched = str(args.file).startswith("https://")
    data = _fetch(args) if fetched else _read_input(args.file, args.max_bytes)
    quads, found = _split(data)
    message = _message(quads)
    certificates = _gather_certificates(args, found)
    lines = [f"message <{message.uri}>", *_what_lines(message)]
    lines += _graph_lines(quads)
    lines += _hop_lines(message.envelopes())
    lines += _signer_lines(_signatures(quads), certificates)
    print("\n".join(lines))
    return 0


# -------------------------------------------------------------------------------- verify

_VERIFIES_GRAPH = re.compile(r"does not verify graph <([^>]*)>")
_GRAPH = re.compile(r"graph <([^>]*)>")


def graph_at_fault(error: str) -> str:
    """``error`` as ``graph <G>: …``, G the graph it blames (unchanged when it names none).

    When a signature does not verify, the graph at fault is the one it signs.
    """
    match = _VERIFIES_GRAPH.search(error) or _GRAPH.search(error)
    if match is None or error.startswith(f"graph <{match.group(1)}>: "):
        return error
    return f"graph <{match.group(1)}>: {error}"


def _public_keys(
    certificates: Mapping[str, bytes], ca: bytes | None, at: datetime
) -> dict[str, PublicKey]:
    from xdn import certs

    keys = {}
    for node, pem in sorted(certificates.items()):
        if ca is not None:
            try:
                credential = certs.verify_certificate(pem, ca, at=at)
            except CertificateError as exc:
                raise CertificateError(f"signer <{node}>: {exc}") from None
            if credential.uri != node:
                raise SignatureError(
                    f"graph <{node}#cert>: the certificate is for <{credential.uri}>, not <{node}>"
                )
        keys[node] = certs.public_key_of(pem)
    return keys


def cmd_provenance_verify(args: argparse.Namespace) -> int:
    """``xdn provenance verify``: Algorithm 2; 0 when valid, a refusal naming the graph if not."""
    from xdn.provenance import ChainVerifier, verify_message

    try:
        quads, found = _split(_read_input(args.file, args.max_bytes))
        message = _message(quads)
        certificates = _gather_certificates(args, found)
        ca = read(args.ca) if args.ca else None
        carried = all(s.certificate is not None for s in _signatures(quads))
        if ca is not None and carried and not certificates:
            ChainVerifier(ca).verify(message, at=when(args))  # the certificates it carries
        else:
            verify_message(message, _public_keys(certificates, ca, when(args)))
    except (ProvenanceError, SignatureError, CertificateError) as exc:
        raise type(exc)(graph_at_fault(str(exc))) from None
    graphs = len(_by_graph(quads))
    signers = sorted({s.signer for s in _signatures(quads)})
    print(f"valid: <{message.uri}>: {graphs} graphs, every signature verifies")
    print(f"signers: {', '.join(f'<{s}>' for s in signers)}")
    if ca is None:
        print("note: no --ca given: the signer certificates were not checked against a CA")
    return 0


# ------------------------------------------------------------------------------ receipts


def cmd_provenance_receipts(args: argparse.Namespace) -> int:
    """``xdn provenance receipts``: fetch, verify and store receipts; say who received what.

    An edge command of the publisher (it reads its key service state and calls its root site),
    so it imports the publisher package here, when it runs.
    """
    import asyncio
    import json

    from publisher.receipts import (
        ReceiptArchive,
        fetch,
        key_service_state,
        members_by_concept,
        other_lines,
        report,
        version_sequences,
    )
    from xdn.grpc_tls import TlsFiles
    from xdn.provenance import ChainVerifier

    if args.version is not None and args.version < 1:
        raise UsageError("--version must be at least 1")
    if not args.no_fetch and not args.connect:
        raise UsageError("give --connect (the root site) to fetch receipts, or --no-fetch")
    tls = TlsFiles.from_dir(args.certs, args.name)
    state = args.state_dir / args.name
    keys = state / "keys.sqlite"
    if not keys.exists():
        raise UsageError(
            f"{keys}: no key service state; give the --state-dir that xdn publish used"
        )
    archive = ReceiptArchive(state / "receipts.sqlite")
    try:
        if not args.no_fetch:
            revoked = _revoked(args, tls.ca_pem)
            verifier = ChainVerifier(tls.ca_pem, revoked=lambda: revoked)
            print(f"fetching receipts from {args.connect}…", file=sys.stderr, flush=True)
            fetched = asyncio.run(
                fetch(
                    publisher=args.name, tls=tls, connect=args.connect, archive=archive,
                    verifier=verifier, progress=lambda line: print(line, file=sys.stderr),
                )
            )
            print(
                f"site {fetched.site}: {fetched.fetched} receipts fetched, {fetched.new} new, "
                f"{fetched.notices} new failure notices, {len(fetched.refused)} refused",
                file=sys.stderr, flush=True,
            )
            for reason in fetched.refused:
                print(f"xdn: warning: receipt refused: {reason}", file=sys.stderr)
        received = archive.of(args.document)
        refused = archive.refusals_of(
            args.document, version_sequences(keys, args.name, args.document)
        )
        versions, groups, leases = key_service_state(keys, args.name, args.document)
        others = archive.other_refusals(_concepts_asked(versions, args.version))
    finally:
        archive.close()
    members = members_by_concept(groups, leases.get, at_ms=int(when(args).timestamp() * 1000))
    reports = report(
        args.document, versions=versions, received=received, members=members, only=args.version,
        refused=refused,
    )
    if args.json:
        print(json.dumps({
            "versions": [r.to_json() for r in reports],
            "other_refusals": [r.to_json() for r in others],
        }, indent=2))
        return 0
    if not reports:
        which = "" if args.version is None else f" v{args.version}"
        print(f"{args.document}{which}: not published by {args.name}, and no receipt of it")
    else:
        print("\n".join(line for r in reports for line in r.lines()))
    for line in other_lines(others):
        print(line)
    return 0


def _concepts_asked(
    versions: Mapping[int, frozenset[str]], only: int | None
) -> frozenset[str] | None:
    """The concepts of the document (or of version ``only``) a report is asked about, which
    its key-message refusals must name (``None``: not recorded, so every one is shown)."""
    if only is not None:
        return versions.get(only)
    return frozenset().union(*versions.values()) if versions else None


def _revoked(args: argparse.Namespace, ca_pem: bytes) -> frozenset[int]:
    """The serials revoked by ``--crl`` (default: crl.pem in --certs, if there is one)."""
    from publisher.revocation import CrlFile

    path = args.crl if args.crl is not None else args.certs / "crl.pem"
    if not path.exists():
        if args.crl is not None:
            raise UsageError(f"--crl {path}: no such file")
        print(f"xdn: warning: no CRL ({path}): receipts are verified without a revocation "
              "check", file=sys.stderr)
        return frozenset()
    return CrlFile(path, ca_pem, warn=lambda m: print(f"xdn: warning: {m}", file=sys.stderr)
                   ).revoked(datetime.now(UTC))
