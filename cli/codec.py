"""``xdn encode`` / ``xdn decode``: the codec's XML Encryption export, for interop checks.

``xdn encode`` maps a document with a concept mapping, encrypts every fragment as a W3C XML
Encryption 1.1 ``EncryptedData`` and writes the export (see :mod:`xdn.codec._xmlenc`). It makes
a fresh random group key per concept (epoch 1) and writes each per-document key, raw 32 bytes,
to ``KEYDIR/<KeyName>`` — the ``KeyName`` the ``EncryptedData`` elements carry, so that
``xmlsec1 --decrypt --aeskey:NAME KEYDIR/NAME`` opens them. That file layout exists for tests
and operators' interop checks only: in the network, keys travel sealed to group members. The
publisher's public key is written beside the export (``OUT`` minus ``.xml`` plus
``.publisher.pem``); without ``--signing-key`` a fresh P-256 key signs.

``xdn decode`` verifies an export with the keys found in ``KEYDIR`` (every concept whose key is
there must be complete) and writes the view those keys entitle to; fragments without a key are
``xdn:withheld``. Both stream: memory stays bounded by the largest fragment, and a progress bar
shows on big inputs. Outputs are written to a temporary file and renamed when complete.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from xdn import crypto
from xdn.errors import UsageError
from xdn.xmlsafe import Limits

__all__ = ["register"]

_PROGRESS_FROM = 8 * 1024 * 1024  # show a progress bar for inputs of at least 8 MiB


def register(subparsers: Any) -> None:
    """Add the ``encode`` and ``decode`` subcommands to ``xdn``."""
    enc = subparsers.add_parser(
        "encode",
        help="encrypt a document into an XML Encryption export (interop, testing)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    enc.add_argument("--ontology", type=Path, action="append", required=True, metavar="O",
                     help="OWL ontology file (repeat for imports)")  # fmt: skip
    enc.add_argument("--mapping", type=Path, required=True, metavar="M", help="mapping (TOML)")
    enc.add_argument("--doc", type=Path, required=True, metavar="D", help="the XML document")
    enc.add_argument("--out", type=Path, required=True, metavar="OUT.xml", help="the export")
    enc.add_argument("--keys-out", type=Path, required=True, metavar="KEYDIR",
                     help="directory for the per-document keys (one file per KeyName)")  # fmt: skip
    enc.add_argument("--publisher", help="publisher name (default: the mapping's schema name)")
    enc.add_argument("--signing-key", type=Path, metavar="KEY.pem",
                     help="publisher's ECDSA private key (default: a fresh one)")  # fmt: skip
    enc.add_argument("--document-id", help="document id (default: the file's stem)")
    enc.add_argument("--version", type=int, default=1, help="document version (default 1)")
    _limit_argument(enc)
    enc.set_defaults(func=_encode)

    dec = subparsers.add_parser(
        "decode",
        help="verify an XML Encryption export and write the view its keys open",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dec.add_argument("--in", dest="source", type=Path, required=True, metavar="OUT.xml")
    dec.add_argument("--keys", type=Path, required=True, metavar="KEYDIR",
                     help="directory of per-document keys named by KeyName")  # fmt: skip
    dec.add_argument("--out", type=Path, required=True, metavar="VIEW.xml")
    dec.add_argument("--publisher-key", type=Path, metavar="PUB.pem",
                     help="publisher's public key (default: beside the export)")  # fmt: skip
    _limit_argument(dec)
    dec.set_defaults(func=_decode)


def _limit_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-text-mb", type=int, default=64, metavar="N",
                        help="largest text node accepted, in MiB (default 64; an export's "
                        "CipherValue is 4/3 of its fragment)")  # fmt: skip


def _limits(args: argparse.Namespace) -> Limits:
    if args.max_text_mb < 1:
        raise UsageError("--max-text-mb must be positive")
    return Limits(max_text_bytes=args.max_text_mb * 1024 * 1024)


def public_key_path(export: Path) -> Path:
    """Where ``xdn encode`` writes the publisher's public key for ``export``."""
    stem = export.name[: -len(".xml")] if export.name.endswith(".xml") else export.name
    return export.with_name(f"{stem}.publisher.pem")


@contextlib.contextmanager
def _atomic(path: Path) -> Iterator[IO[bytes]]:
    """A temporary file beside ``path``, renamed to it only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - renamed or removed below
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
    )
    try:
        with handle:
            yield handle
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _progress(path: Path, what: str) -> Iterator[Callable[[int], None] | None]:
    size = path.stat().st_size
    if size < _PROGRESS_FROM:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    columns = (f"[bold]{what}", BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=size)
        yield lambda done: bar.update(task, completed=done)


def _encode(args: argparse.Namespace) -> int:
    from xdn.codec import ConceptKey, concept_order, encode_file, key_name
    from xdn.mapping import load_mapping
    from xdn.ontology import load_ontology

    ontology = load_ontology(args.ontology)
    mapping = load_mapping(args.mapping, ontology)
    publisher = args.publisher or mapping.publisher_schema
    document_id = args.document_id or args.doc.stem
    if args.signing_key is not None:
        signer = crypto.load_private_key_pem(args.signing_key.read_bytes())
    else:
        signer = crypto.generate_private_key()
    keys = {
        c: ConceptKey(publisher=publisher, concept=c, epoch=1, group_key=crypto.random_bytes(32))
        for c in sorted(mapping.concepts)
    }
    with _progress(args.doc, "encoding") as progress, _atomic(args.out) as out:
        report = encode_file(
            args.doc, out, mapping=mapping, document_id=document_id, publisher=publisher,
            version=args.version, issued_at_ms=int(time.time() * 1000), keys=keys,
            signer=signer, concept_order=concept_order(ontology), limits=_limits(args),
            progress=progress,
        )  # fmt: skip
    args.keys_out.mkdir(parents=True, exist_ok=True)
    manifest = report.signed_manifest.manifest
    for row in manifest.ranges:
        name = key_name(publisher, row.concept, row.epoch, document_id)
        key_file = args.keys_out / name
        key_file.write_bytes(keys[row.concept].for_document(document_id))
        key_file.chmod(0o600)
    pub_path = public_key_path(args.out)
    pub_path.write_bytes(crypto.public_key_to_pem(signer.public_key()))
    mode = "streamed" if report.streamed else "in memory"
    print(f"{args.out}: {manifest.leaf_count} fragments of {len(manifest.ranges)} concepts "
          f"({mode}); keys in {args.keys_out}/; publisher key {pub_path}")  # fmt: skip
    return 0


def _key_files(directory: Path) -> Callable[[str], bytes | None]:
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory of keys")

    def lookup(name: str) -> bytes | None:
        if "/" in name or name.startswith("."):
            return None
        path = directory / name
        return path.read_bytes() if path.is_file() else None

    return lookup


def _decode(args: argparse.Namespace) -> int:
    from xdn.codec import decode_file

    pub_path = args.publisher_key or public_key_path(args.source)
    publisher_key = crypto.load_public_key_pem(pub_path.read_bytes())
    lookup = _key_files(args.keys)
    with _progress(args.source, "decoding") as progress, _atomic(args.out) as out:
        report = decode_file(
            args.source, out, publisher_key=publisher_key, document_keys=lookup,
            limits=_limits(args), progress=progress,
        )  # fmt: skip
    m = report.signed_manifest.manifest
    print(f"{args.out}: {m.publisher}/{m.document_id} v{m.version} verified; "
          f"{len(report.fragments)} fragments opened, {report.withheld} withheld")  # fmt: skip
    return 0
