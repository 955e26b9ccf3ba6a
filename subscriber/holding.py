"""Documents a subscriber holds until it can open them: checked first, capped, indexed.

Theory of operation. A dissemination whose keys have not arrived (or that came while the CRL in
force is stale, see :mod:`subscriber.revocation`) cannot be opened yet, but a site must not be
able to fill the subscriber's disk with anything it likes. So before anything is held:

* :func:`vouch` checks everything that needs no key: the publisher certificate (the CA's, role
  publisher, valid now, not revoked by the CRL in force, the manifest's publisher) and, with
  :func:`xdn.codec.verify_delivery`, the manifest signature, freshness, fragment headers, range
  table and proofs. Anything forged or altered is refused and never stored;
* :class:`Holding` keeps what passed, within a cap per publisher (documents and bytes): past
  it the oldest held document of that publisher is dropped — reported as a refusal, never
  silently — and a document bigger than the whole cap is refused;
* each held document is indexed by what it waits for (the (publisher, concept) groups whose
  keys it lacks, and :data:`~subscriber.store.CRL_WAIT`), so a key message reads back only the
  documents it may open (:meth:`subscriber.store.Keyring.waiting`), not the whole store.

Since only genuine documents are held, the cap only bites when a publisher's keys really are
late (or a site withholds them); the refusals say which documents were lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from subscriber.revocation import Crl, check_publisher
from subscriber.store import CRL_WAIT, Keyring
from xdn import certs
from xdn.codec import key_name, verify_delivery
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import delivery_from_pb

__all__ = ["Holding", "Refuse", "vouch"]

Refuse = Callable[..., None]
"""``refuse(kind, reason, *, manifest=…, publisher=…, document=…, version=…)``."""


def vouch(
    message: pb.Dissemination,
    *,
    ca_pem: bytes,
    at: datetime,
    crl: Crl | None,
    last: int | None,
    cipher_digests: Sequence[bytes] | None = None,
) -> int:
    """Check what can be checked without keys; return the publisher certificate's serial.

    ``last`` is the version of the document accepted last, if any (a replay is refused);
    ``cipher_digests`` the fragments' ciphertext digests when the ciphertexts are kept elsewhere
    (a spooled delivery, :mod:`subscriber.spool`).

    Raises:
        PeerError: forged, altered, replayed, or signed by a certificate that is not a valid
            publisher's (:class:`~subscriber.revocation.RevokedError`: revoked by ``crl``).
    """
    manifest = message.manifest
    publisher = check_publisher(
        manifest.publisher_certificate, manifest.publisher, ca_pem=ca_pem, at=at, crl=crl
    )
    verify_delivery(
        delivery_from_pb(message),
        publisher_key=certs.public_key_of(manifest.publisher_certificate),
        seen={} if last is None else {(manifest.publisher, manifest.document_id): last},
        cipher_digests=cipher_digests,
    )
    return publisher.serial


class Holding:
    """The capped, indexed store of checked documents waiting for their keys."""

    def __init__(
        self, keyring: Keyring, *, max_documents: int, max_bytes: int, refuse: Refuse
    ) -> None:
        self.keyring = keyring
        self.max_documents = max_documents
        self.max_bytes = max_bytes
        self._refuse = refuse

    def waits(self, message: pb.Dissemination, *, crl_stale: bool) -> list[tuple[str, str]]:
        """What ``message`` waits for: the groups whose keys are missing, a fresh CRL."""
        needed = {(f.publisher, f.concept, f.epoch, f.document_id) for f in message.fragments}
        waits = sorted(
            {
                (publisher, concept)
                for publisher, concept, epoch, document in needed
                if self.keyring.get(publisher, concept, epoch) is None
                and self.keyring.document_key(key_name(publisher, concept, epoch, document))
                is None
            }
        )
        if crl_stale:
            waits.append(CRL_WAIT)
        return waits

    def hold(self, message: pb.Dissemination, serial: int, waits: list[tuple[str, str]]) -> bool:
        """Keep a checked document, the oldest of its publisher making room; False if not kept.

        Not kept: bigger than the whole cap (refused), or held already (delivered again).
        """
        manifest = message.manifest
        payload = message.SerializeToString()
        if len(payload) > self.max_bytes:
            self.refuse_oversize(manifest, len(payload))
            return False
        count, size = self.keyring.held_usage(manifest.publisher)
        while count + 1 > self.max_documents or size + len(payload) > self.max_bytes:
            oldest = self.keyring.oldest_held(manifest.publisher)
            if oldest is None:  # pragma: no cover - the usage says there is one
                break
            self.keyring.drop_held(oldest.id)
            count, size = count - 1, size - oldest.size
            self._refuse(
                "overflow",
                f"held store of {manifest.publisher} full ({self.max_documents} documents / "
                f"{self.max_bytes} bytes): dropped the oldest held document, whose keys never "
                "arrived",
                publisher=oldest.publisher, document=oldest.document, version=oldest.version,
            )
        return self.keyring.hold(
            publisher=manifest.publisher, document=manifest.document_id,
            version=manifest.version, serial=serial, payload=payload, waits=waits,
            needs=_needs(message),
        )


    def refuse_oversize(self, manifest: pb.Manifest, size: int) -> None:
        """Refuse to hold a document of ``size`` bytes, more than the whole cap."""
        self._refuse(
            "overflow",
            f"not held: {size} bytes exceed the held store's cap of {self.max_bytes} bytes "
            "per publisher",
            manifest=manifest,
        )


def _needs(message: pb.Dissemination) -> set[tuple[str, str, int, str]]:
    """Every key a document needs: (publisher, concept, epoch, per-document key name). The
    keyring keeps them while it is held (:mod:`subscriber.retention`)."""
    return {
        (f.publisher, f.concept, f.epoch, key_name(f.publisher, f.concept, f.epoch, f.document_id))
        for f in message.fragments
    }
