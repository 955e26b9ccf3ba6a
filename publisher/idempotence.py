"""Publication ids, and what the publisher keeps of a publication until its root acknowledges it.

Theory of operation. Publishing is idempotent per content (:mod:`xdn.publication`): each
publication carries a ``publish_id``, and the root answers one it routed before as its
document's newest version with that version, its sequence number and the provenance message it
routed, instead of routing it again (:mod:`disseminator.publications`).

* The id (:func:`publish_id`) is HMAC-SHA-256, under a secret kept in the publisher's key store,
  of the document id and the SHA-256 of the document's bytes. Sites see document ids anyway;
  they never see a plain digest of content they cannot read (a plain one would let a site
  confirm a guess of a document's text). The same file published again under the same id gets
  the same publish id in any process of this publisher.
* What the site answers is checked (:func:`own_message`): the provenance message must be ours,
  signed by our key, and name the version the site says it routed; a site that answers with
  anything else is refused (the publisher records nothing).
* Each attempt is kept durably before it is sent (the key store's ``attempts``: version, sequence
  number, document keys), so a publication the root routed before the publisher could record it
  is recorded with the keys it was encrypted with, and the provenance log gets the message the
  root's hop references — never a message signed anew for a retry.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from xdn import crypto, provenance
from xdn.errors import PeerError, ProtocolError, UsageError
from xdn.publication import PublishedBefore

__all__ = ["own_message", "publish_id"]

_READ_BYTES = 1 << 20
_CONTEXT = b"xdn publish id v1\x00"


def publish_id(secret: bytes, document_id: str, path: Path) -> bytes:
    """The id of publishing ``path``'s content as ``document_id`` (32 bytes).

    Raises:
        UsageError: the file cannot be read.
    """
    if len(secret) < 16:
        raise ValueError("the publish id secret must be at least 16 bytes")
    digest = hashlib.sha256()
    try:
        with path.open("rb") as file:
            while chunk := file.read(_READ_BYTES):
                digest.update(chunk)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    data = _CONTEXT + document_id.encode("utf-8") + b"\x00" + digest.digest()
    return hmac.new(secret, data, hashlib.sha256).digest()


def own_message(
    before: PublishedBefore, *, node_uri: str, public_key: crypto.PublicKey, document_id: str,
) -> provenance.Message:
    """The provenance message a site says it routed before: checked to be ours, signed by us,
    for version ``before.version`` of ``document_id``.

    Raises:
        ProtocolError: it is not (the site's answer cannot be taken).
    """
    expected = provenance.message_uri(node_uri, document_id, f"v{before.version}")
    try:
        message = provenance.Message.from_nquads(
            before.provenance, max_bytes=provenance.MAX_CHAIN_BYTES
        )
        if message.uri != expected or message.sender != node_uri:
            raise ProtocolError(
                f"the message it says it routed is <{message.uri}> by <{message.sender}>, "
                f"not <{expected}>"
            )
        provenance.verify_message(message, {node_uri: public_key})
    except PeerError as exc:
        raise ProtocolError(f"its answer 'published before' does not hold: {exc}") from None
    return message
