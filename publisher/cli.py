"""``xdn publish``: encrypt and publish XML documents into the network."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from xdn.errors import UsageError
from xdn.parts import DEFAULT_PART_BYTES, MIN_PART_BYTES
from xdn.paths import REPO_ROOT

if TYPE_CHECKING:
    import asyncio

__all__ = ["register"]


def _publish(args: argparse.Namespace) -> int:
    import asyncio

    from publisher.client import Publisher, PublisherSetup
    from xdn import certs
    from xdn.grpc_tls import TlsFiles
    from xdn.mapping import load_mapping
    from xdn.ontology import load_ontology
    from xdn.policy import load_signed_policy

    if args.id is not None and len(args.documents) != 1:
        raise UsageError("--id names one document: give exactly one DOC with it")
    _check_part_bytes(args.part_bytes)
    tls = TlsFiles.from_dir(args.certs, args.name)
    ontology = load_ontology(args.ontology)
    setup = PublisherSetup(
        name=args.name,
        tls=tls,
        ontology=ontology,
        mapping=load_mapping(args.mapping, ontology),
        policy=load_signed_policy(  # the document the sites enforce, signed by us
            args.policy, ontology, certs.public_key_of(tls.cert_pem), publisher=args.name
        ),
        state_dir=args.state_dir / args.name,
        provenance_log=args.log or args.state_dir / args.name / "provenance.nq",
        connect=args.connect,
        retain=args.retain,
        allow_older_policy=args.allow_older_policy,
        crl=_crl(args),
        part_bytes=args.part_bytes,
        republish=args.again,
    )

    def warn(message: str) -> None:
        print(f"xdn: warning: {message}", file=sys.stderr, flush=True)

    async def run() -> None:
        publisher = Publisher(setup, warn=warn)
        try:
            if args.wait_for:
                await publisher.wait_for_members(args.wait_for, timeout=args.wait_timeout)
            if not args.documents:
                groups, sent = await publisher.sync_keys()
                print(
                    f"keys synchronised: rekeyed {', '.join(sorted(groups)) or 'none'}, "
                    f"{sent} key messages",
                    flush=True,
                )
                return
            loop = asyncio.get_running_loop()
            start = loop.time()
            stop = _stop_on_sigterm(loop)

            async def pace(index: int) -> None:
                if args.rate:  # pace the documents: the n-th leaves at n / rate seconds
                    delay = max(0.0, start + index / args.rate - loop.time())
                    with contextlib.suppress(TimeoutError):  # (a SIGTERM ends the wait)
                        await asyncio.wait_for(stop.wait(), delay)

            named = None if args.id is None else [args.id]
            published = 0
            async for result in publisher.publish_each(
                args.documents, pace=pace, document_ids=named, stop=stop
            ):
                published += 1
                rekeyed = ", ".join(sorted(result.rekeyed)) or "none"
                if result.published_before:
                    print(
                        f"already published {result.document_id} v{result.version}: "
                        f"this content is its newest version; {result.describe()} "
                        f"(rekeyed: {rekeyed}, {result.key_messages} key messages)",
                        flush=True,
                    )
                    continue
                print(
                    f"published {result.document_id} v{result.version}: "
                    f"{result.fragments} fragments, {len(result.concepts)} concepts, "
                    f"rekeyed: {rekeyed}, {result.key_messages} key messages; "
                    f"{result.describe()}",
                    flush=True,
                )
            if stop.is_set():
                left = len(args.documents) - published
                raise _Stopped(
                    f"stopped by SIGTERM: {published} documents published, {left} not sent "
                    "(publish them again)"
                )
        finally:
            await publisher.close()

    try:
        asyncio.run(run())
    except _Stopped as stopped:
        print(f"xdn: {stopped}", file=sys.stderr, flush=True)
        return 128 + signal.SIGTERM
    return 0


class _Stopped(Exception):
    """``xdn publish`` stopped early on a SIGTERM, cleanly."""


def _stop_on_sigterm(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """An event set by the first SIGTERM: the document in flight is acknowledged and recorded,
    nothing more is sent (a SIGTERM that kills the publisher mid-document would leave the
    root's answer unrecorded). A second SIGTERM kills it at once."""
    import asyncio

    stop = asyncio.Event()

    def stopping() -> None:
        print("xdn: SIGTERM: finishing the document in flight (again to kill)",
              file=sys.stderr, flush=True)
        stop.set()
        loop.remove_signal_handler(signal.SIGTERM)  # (the default again: a second one kills)

    loop.add_signal_handler(signal.SIGTERM, stopping)
    return stop


def _check_part_bytes(part_bytes: int) -> None:
    """``--part-bytes`` must be a part size the publisher can send (checked before any work)."""
    from publisher.client import MAX_PART_BYTES

    if not MIN_PART_BYTES <= part_bytes <= MAX_PART_BYTES:
        raise UsageError(
            f"--part-bytes {part_bytes}: a part must be at least {MIN_PART_BYTES} bytes "
            f"(smaller parts would cost more in framing than they carry) and at most "
            f"{MAX_PART_BYTES} (half of one gRPC message)"
        )


def _crl(args: argparse.Namespace) -> Path | None:
    """``--crl``; by default ``crl.pem`` next to the CA in --certs, when there is one."""
    if args.crl is not None:
        if not args.crl.exists():
            raise UsageError(f"--crl {args.crl}: no such file")
        return Path(args.crl)
    default = Path(args.certs) / "crl.pem"
    if not default.exists():
        print(f"xdn: warning: no CRL ({default}): keys are sealed without a revocation check",
              file=sys.stderr, flush=True)
        return None
    return default


_DESCRIPTION = (
    "Map each document to ontology concepts, rekey groups whose membership changed, encrypt "
    "every fragment with its concept's key, sign the manifest and push it to the root "
    "disseminator. Without DOC, only bring the group keys up to date: enrol subscribers "
    "registered since the last publication (granting them the retained recent documents' "
    "keys) and rekey after leaves.",
    "Each 'published' line says whom the document reached. Reaching no subscriber is not an "
    "error (the site may retain the document for subscribers who join later); the line says "
    "so. Each line is printed as soon as the site acknowledged the document and the key "
    "service recorded it, before the next document is sent.",
    "Publishing is idempotent per content: a document whose content (and id) is that of its "
    "newest version the root site routed — a retry after a crash or a failed run — is not "
    "published again: the line says 'already published DOC vN' and the key service records "
    "that version. The root remembers publications for its routed window's retention (7 days "
    "by default). --again publishes the same content as a new version anyway.",
    "SIGTERM stops publishing cleanly: the document in flight is acknowledged and recorded, "
    "nothing more is sent, and the exit status is 143 with the count of documents not sent "
    "(publish them again). A second SIGTERM kills the process at once.",
    "Publishing is refused, with exit status 1 and nothing sent, when the site is not a root "
    "site (publish at the root; the error names the site's uplink), when it enforces no "
    "policy of this publisher (add the publisher to the sites' configuration), or when it "
    "enforces a newer version of this publisher's policy than --policy (the key service "
    "would hand out keys by replaced rules: publish with the current signed policy, or pass "
    "--allow-older-policy to publish anyway, with a warning). A --policy newer than the "
    "site's is a warning: the site loads a new signed policy when its file changes.",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``xdn publish``."""
    parser = subparsers.add_parser(
        "publish",
        help="encrypt and publish XML documents (or, without DOC, only update group keys)",
        description="\n\n".join(textwrap.fill(p, 88) for p in _DESCRIPTION),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "documents", type=Path, nargs="*", metavar="DOC",
        help="XML documents (none: only synchronise group keys)",
    )
    parser.add_argument(
        "--id", metavar="ID",
        help="document id of the one DOC (default: the file name without its extension); any "
        "text without control characters, e.g. 'order 7', 'café' or '2024/03/order'",
    )
    parser.add_argument("--connect", required=True, help="root disseminator HOST:PORT")
    parser.add_argument("--name", required=True, help="publisher name (certificate CN)")
    parser.add_argument(
        "--certs", type=Path, required=True, help="directory with NAME.pem, NAME.key and ca.pem"
    )
    parser.add_argument("--mapping", type=Path, required=True, help="concept → XPath mapping")
    parser.add_argument(
        "--policy", type=Path, required=True,
        help="this publisher's policy, signed (POLICY.sig beside it): the one the sites enforce",
    )
    parser.add_argument(
        "--ontology", type=Path, nargs="+", default=[REPO_ROOT / "ontology" / "production.owl"],
        help="OWL files (default: the sample production ontology)",
    )
    parser.add_argument(
        "--state-dir", type=Path, default=Path("state"), help="key service state (default ./state)"
    )
    parser.add_argument(
        "--log", type=Path, help="provenance log (default STATE/NAME/provenance.nq)"
    )
    parser.add_argument(
        "--wait-for", action="append", default=[], metavar="SUBSCRIBER",
        help="first wait until this subscriber is registered (repeatable)",
    )
    parser.add_argument(
        "--wait-timeout", type=float, default=30.0, help="seconds --wait-for waits (default 30)"
    )
    parser.add_argument(
        "--retain", type=int, default=10, metavar="N",
        help="grant joiners the keys of the last N documents, which sites retain for new "
        "subscribers (default 10; 0: none)",
    )
    parser.add_argument(
        "--rate", type=float, help="publish at most this many documents per second"
    )
    parser.add_argument(
        "--crl", type=Path, metavar="CRL",
        help="the CA's CRL: no key is sealed to a revoked member, an older CRL than one seen "
        "is refused, a CRL stale for over an hour stops the key service (default: crl.pem in "
        "--certs, if present)",
    )
    parser.add_argument(
        "--allow-older-policy", action="store_true",
        help="publish even when the site enforces a newer version of this publisher's policy "
        "than --policy (a warning instead of a refusal)",
    )
    parser.add_argument(
        "--part-bytes", type=int, default=DEFAULT_PART_BYTES, metavar="N",
        help="largest message sent; a larger document goes in parts of this size "
        "(default 4 MiB)",
    )
    parser.add_argument(
        "--again", action="store_true",
        help="publish each DOC as a new version even when its content is its newest version "
        "already (by default that is answered 'already published' and nothing is sent again)",
    )
    parser.set_defaults(func=_publish)
