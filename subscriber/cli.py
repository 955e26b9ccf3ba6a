"""``xdn subscribe``: register a credential and receive the views it is entitled to."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["register"]

_Number = TypeVar("_Number", int, float)


def _subscribe(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    from datetime import timedelta

    from subscriber.client import SubscriberSetup, run_subscriber
    from subscriber.retention import Retention
    from xdn.collector import tune_for_service
    from xdn.errors import UsageError
    from xdn.grpc_tls import TlsFiles

    try:
        local_crl = None if args.crl is None else args.crl.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the CRL {args.crl}: {exc.strerror}") from None
    setup = SubscriberSetup(
        name=args.name,
        tls=TlsFiles.from_dir(args.certs, args.name),
        connect=args.connect,
        out_dir=args.out,
        state_dir=args.state_dir / args.name,
        provenance_log=args.log or args.state_dir / args.name / "provenance.nq",
        concepts=tuple(args.concept),
        max_documents=args.max_documents,
        retained=args.retained,
        rejoin=args.rejoin,
        heartbeat_s=args.heartbeat,
        max_held_documents=args.max_held,
        max_held_bytes=args.max_held_mib * 1024 * 1024,
        max_document_bytes=args.max_document_mib * 1024 * 1024,
        local_crl=local_crl,
        crl_grace=timedelta(seconds=args.crl_grace),
        lease_s=args.lease,
        checkpoint_max_age_s=args.checkpoint_max_age,
        retention=Retention(
            days=args.retention_days, documents=args.keep_documents, epochs=args.keep_epochs
        ),
    )

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        report = await run_subscriber(setup, stop)
        print(
            f"{setup.name}: {report.accepted} documents accepted, {report.refused} refused, "
            f"{report.keys} keys received (views in {setup.out_dir / 'views'})"
            + (f"; {report.held} held waiting for their keys" if report.held else "")
            + (
                " (refusals: "
                + ", ".join(f"{n} {kind}" for kind, n in sorted(report.refusals.items()))
                + f"; see {setup.out_dir / 'refused.jsonl'})"
                if report.refusals
                else ""
            ),
            flush=True,
        )
        if report.missing or report.gaps or report.withheld:
            print(
                f"{setup.name}: {report.missing} documents found missing, {report.gaps} of them "
                f"withheld for good; {report.withheld} grants or concepts withheld against our "
                f"signed entitlements (see {setup.out_dir / 'gaps.jsonl'})",
                flush=True,
            )
        return 0 if report.refused == 0 and not report.refusals else 2

    tune_for_service()
    return asyncio.run(run())


def _unsubscribe(args: argparse.Namespace) -> int:
    import asyncio

    from subscriber.client import unsubscribe
    from xdn.errors import UsageError
    from xdn.grpc_tls import TlsFiles

    tls = TlsFiles.from_dir(args.certs, args.name)
    state: Path | None = args.state_dir / args.name
    if not (args.state_dir / args.name / "keyring.sqlite").exists():
        print(f"{args.name}: no subscriber state in {state}: the leave is not recorded there "
              "(only the site is told)")
        state = None
    try:
        site, discarded = asyncio.run(unsubscribe(tls, args.connect, state_dir=state))
    except UsageError as exc:
        if state is None:
            raise
        raise UsageError(
            f"{exc}; the leave is recorded in {state} (the subscriber will not register "
            "again), but the site was not told: run xdn unsubscribe again, or its "
            "registration lapses with its lease"
        ) from None
    print(f"{args.name}: unsubscribed at {site} ({discarded} queued deliveries dropped)"
          + ("" if state is None else f"; recorded in {state}"))
    return 0


def _bounded(
    convert: Callable[[str], _Number],
    kind: str,
    low: float,
    high: float,
    message: str,
    *,
    above: bool = False,
) -> Callable[[str], _Number]:
    """Build an argparse ``type`` that converts its text and checks it lies within bounds.

    Args:
        convert: ``int`` or ``float``; a :class:`ValueError` from it is refused as
            ``'TEXT' is not KIND``.
        kind: what the text should have been ("a whole number", "a number of seconds").
        low: the lower bound, included unless ``above``.
        high: the upper bound, included (``math.inf`` for none).
        message: the refusal when the value is out of bounds (NaN always is).
        above: whether the value must be strictly above ``low``.

    Returns:
        The validator, raising :class:`argparse.ArgumentTypeError` with a clear message.
    """

    def validate(text: str) -> _Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not ((low < value if above else low <= value) and value <= high):
            raise argparse.ArgumentTypeError(message)
        return value

    return validate


def _seconds(low: float, high: float, what: str) -> Callable[[str], float]:
    """A validator of a number of seconds from ``low`` to ``high``, ``what`` naming it."""
    return _bounded(
        float, "a number of seconds", low, high, f"{what} must be {low:g} to {high:g} seconds"
    )


_positive = _bounded(int, "a whole number", 1, math.inf, "must be at least 1")
_heartbeat = _seconds(0.001, 86_400, "the heartbeat interval")
_grace = _seconds(0, 30 * 86_400, "the CRL grace")
_max_age = _seconds(1, 30 * 86_400, "the checkpoint age bound")
_days = _bounded(
    float, "a number of days", 0, 36_500,
    "the retention must be more than 0 and at most 36500 days", above=True,
)


def _lease_seconds(text: str) -> float:
    from xdn.lease import MAX_PERIOD_MS  # imported when used: it loads the crypto stack

    return _seconds(1, MAX_PERIOD_MS / 1000, "a lease (a week at most)")(text)


# The numeric bounds and the CRL file of ``xdn subscribe``, one row an option:
# (flag, type, default, metavar, help); every bound is checked by its validator above.
_TUNING: tuple[tuple[str, Callable[[str], object], object, str | None, str], ...] = (
    (
        "--heartbeat", _heartbeat, 5.0, "SECONDS",
        "send a heartbeat when idle this long; a site silent for 3x its own announced "
        "interval is taken for dead and the subscriber reconnects (default 5)",
    ),
    (
        "--crl", Path, None, None,
        "a CA-signed CRL file to check publishers against from the start; the site's "
        "relayed CRL replaces it when newer (a higher CRL number), never when older",
    ),
    (
        "--crl-grace", _grace, 3600.0, "SECONDS",
        "past the CRL's next update by more than this, revocation cannot be told: new "
        "documents are held (not opened) until a fresh CRL arrives (default 3600)",
    ),
    (
        "--max-held", _positive, 256, "DOCS",
        "documents held per publisher while their keys have not arrived; past it the "
        "oldest is dropped and reported (default 256)",
    ),
    (
        "--max-held-mib", _positive, 64, "MIB",
        "bytes held per publisher, in MiB, likewise (default 64)",
    ),
    (
        "--max-document-mib", _positive, 1024, "MIB",
        "the largest delivery accepted when a site sends one in parts (a large document), "
        "in MiB; a larger one is refused at its first part (default 1024)",
    ),
    (
        "--lease", _lease_seconds, 3600.0, "SECONDS",
        "membership lease period, renewed at a third of it while subscribed; offline "
        "longer than this, the subscriber leaves the groups and rejoins when back "
        "(default 3600)",
    ),
    (
        "--checkpoint-max-age", _max_age, 3600.0, "SECONDS",
        "past this age of a publisher's newest signed checkpoint, say we cannot vouch "
        "that none of its newest documents was withheld (default 3600)",
    ),
    (
        "--retention-days", _days, 30.0, "DAYS",
        "the keyring's record of accepted documents (what makes a redelivery a duplicate "
        "and an older version a replay) and the per-document keys are pruned after this long; "
        "a document numbered at or below what was pruned is refused as a replay (default 30)",
    ),
    (
        "--keep-documents", _positive, 100_000, "N",
        "likewise, entries numbered more than N below their publisher's newest are pruned "
        "(default 100000)",
    ),
    (
        "--keep-epochs", _positive, 32, "K",
        "group keys kept per group: the newest K epochs, plus those a held document "
        "needs (default 32)",
    ),
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``xdn subscribe`` and ``xdn unsubscribe``."""
    unsub = subparsers.add_parser(
        "unsubscribe",
        help="end a subscription at the site that holds it",
        description="Ends the (durable) subscription of this credential at a site; the site "
        "drops its queue and the publisher rekeys the groups it leaves at the next publication. "
        "The leave is recorded first in the subscriber's state (STATE/NAME, when it exists): an "
        "`xdn subscribe` running on it (reconnecting, say) stops without registering again, "
        "and a later one refuses to start until given --rejoin.",
    )
    unsub.add_argument("--connect", required=True, help="the site it is registered at")
    unsub.add_argument("--name", required=True, help="subscriber name (certificate CN)")
    unsub.add_argument(
        "--certs", type=Path, required=True, help="directory with NAME.pem, NAME.key and ca.pem"
    )
    unsub.add_argument(
        "--state-dir", type=Path, default=Path("state"),
        help="the subscriber's state location, where the leave is recorded (default ./state)",
    )
    unsub.set_defaults(func=_unsubscribe)
    parser = subparsers.add_parser(
        "subscribe",
        help="receive, decrypt and verify what a credential may see",
        description="Register this credential at a disseminator (following redirects to "
        "uplinks), then decrypt, verify and store each view until Ctrl-C / SIGTERM or "
        "--max-documents. Nothing is taken on the site's word: key messages must carry the "
        "publisher's signature, publishers are checked against the CA's CRL, and a document "
        "missing from a publisher's signed sequence is asked of the site, then reported in "
        "OUT/gaps.jsonl. Every refusal (a document that fails verification, a revoked "
        "publisher, a bad or older CRL, a forged key message, a held document dropped past "
        "the cap) is printed, recorded in OUT/refused.jsonl and signed into the provenance "
        "log; exit code 2 if there was any.",
    )
    parser.add_argument("--connect", required=True, help="disseminator HOST:PORT")
    parser.add_argument("--name", required=True, help="subscriber name (certificate CN)")
    parser.add_argument(
        "--certs", type=Path, required=True, help="directory with NAME.pem, NAME.key and ca.pem"
    )
    parser.add_argument("--out", type=Path, required=True, help="where views and records go")
    parser.add_argument(
        "--concept", action="append", default=[],
        help="only this concept's block (repeatable; default: everything granted)",
    )
    parser.add_argument("--max-documents", type=int, help="stop after this many documents")
    parser.add_argument(
        "--retained", action="store_true",
        help="when first registering, also receive the recent documents the site retains "
        "(state at subscribe time; their keys come with the publisher's next key update: "
        "`xdn publish` with no DOC, or the next publication)",
    )
    parser.add_argument(
        "--rejoin", action="store_true",
        help="subscribe again after an `xdn unsubscribe` (recorded in the state, which "
        "otherwise refuses to register again)",
    )
    for flag, kind, default, metavar, text in _TUNING:
        parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    parser.add_argument(
        "--state-dir", type=Path, default=Path("state"), help="keyring location (default ./state)"
    )
    parser.add_argument(
        "--log", type=Path, help="provenance log (default STATE/NAME/provenance.nq)"
    )
    parser.set_defaults(func=_subscribe)
