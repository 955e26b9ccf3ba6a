"""The signed failure notice a subscriber appends to its provenance log for each refusal.

Issue #13: a refusal is printed, recorded in ``refused.jsonl`` and counted (see
:meth:`subscriber.session.Session.refuse`); it also reaches the audit as a failure notice
(:func:`xdn.provenance.failure_notice`) signed with the subscriber's key. This module turns what
the session knows of a refusal into the notice: empty names become "unknown", the hop it came
from is the site we are subscribed at (when we know it), and the notice gets a fresh URI in our
``refusal/`` space. A notice that cannot be built (a hostile name no IRI or literal can hold)
is logged and skipped: a refusal must never crash the subscriber.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime

from xdn import certs, provenance
from xdn.errors import UsageError

__all__ = ["sign_notice"]

log = logging.getLogger(__name__)


def _site(served_by: str) -> str | None:
    if not served_by:
        return None
    uri = certs.node_uri(served_by)
    try:
        provenance.RefusalFacts(kind="crl", reason="-", received_from=uri)
    except ValueError:
        return None  # not a name a node URI can be made of: the hop stays unknown
    return uri


def sign_notice(
    signer: provenance.Signer,
    *,
    at: datetime,
    kind: str,
    reason: str,
    served_by: str = "",
    publisher: str = "",
    document: str = "",
    version: int | None = None,
    manifest_root: bytes = b"",
    key_message: str | None = None,
    concept: str = "",
    epoch: int | None = None,
    sequence: int | None = None,
) -> provenance.Message | None:
    """The failure notice of one refusal, signed by ``signer`` at ``at`` (``None``: not built).

    Args:
        kind: the refusal kind (:data:`xdn.provenance.REFUSAL_KINDS`).
        served_by: the name of the site the refused thing came from ("" if unknown).
        publisher, document, version, manifest_root: what a refused document claims.
        key_message, concept, epoch: a refused key message (kind ``key``).
        sequence: a gap's number in the publisher's signed sequence (kind ``gap``).
    """
    stamp = int(at.timestamp() * 1000)
    try:
        facts = provenance.RefusalFacts(
            kind=kind,
            reason=reason,
            publisher=publisher or None,
            document_id=document or None,
            version=version if document else None,
            manifest_root=(manifest_root or None) if document else None,
            key_message=key_message,
            concept=concept or None,
            epoch=epoch,
            sequence=sequence,
            received_from=_site(served_by),
        )
        return provenance.failure_notice(
            signer,
            message_uri=provenance.notice_uri(signer.node_uri, f"{stamp}-{secrets.token_hex(6)}"),
            refusal=facts,
            timestamp_ms=stamp,
        )
    except (ValueError, UsageError) as exc:
        log.error("refusal of kind %r could not be signed as a failure notice: %s", kind, exc)
        return None
