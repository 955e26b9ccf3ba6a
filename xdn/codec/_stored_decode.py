"""Subscriber side, for a delivery larger than memory: its ciphertexts are read where they are
kept (a spooled file), never held whole (issue #15).

Theory of operation
-------------------
:func:`decode_stored` runs the in-memory decoder's checks in the same order, with the same
opaque :class:`~xdn.errors.DecryptError`:

1. each fragment's ciphertext is hashed as a stream, and the leaf hashes built from those
   digests go through every check that needs no key (:func:`~xdn.codec._view.check_delivery`:
   signature, freshness, headers, whole concepts, range proofs, completeness);
2. each fragment is decrypted as a stream (:func:`xdn.crypto.aead_decrypt_chunks`) into one
   temporary file in ``workdir``; none of it is parsed before its GCM tag has verified, and a
   tag that fails ends everything;
3. the plaintexts are opened, planned and written to ``out`` as the canonical view
   (:mod:`xdn.codec._canonical_view`): the bytes ``View.to_bytes()`` gives for the same
   delivery decoded in memory. ``out`` is the caller's temporary file: on any error, what was
   written to it is to be thrown away.

Memory: one read of :data:`READ_BYTES` at a time, plus what :mod:`xdn.codec._canonical_view`
holds. Disk: the plaintexts (deleted on return).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from xdn import crypto
from xdn.codec._assemble import plan_view
from xdn.codec._canonical_view import PlaintextSpan, plan_spans, write_canonical_view
from xdn.codec._fragments import Delivery
from xdn.codec._verify import DocumentKeyLookup, KeyLookup, KeySource, expected_concepts, fail
from xdn.codec._view import HeldFragment, check_delivery, held_fragments
from xdn.xmlsafe import Limits

__all__ = ["READ_BYTES", "StoredCiphertext", "decode_stored"]

READ_BYTES = 1 << 20


class StoredCiphertext(Protocol):
    """A fragment's ``IV ‖ ciphertext ‖ tag`` kept elsewhere, read a span at a time."""

    def __len__(self) -> int: ...

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``."""
        ...


def _chunks(stored: StoredCiphertext, start: int, end: int) -> Iterator[bytes]:
    for at in range(start, end, READ_BYTES):
        yield stored.read(at, min(end, at + READ_BYTES))


def _digest(stored: StoredCiphertext) -> bytes:
    digest = hashlib.sha256()
    for chunk in _chunks(stored, 0, len(stored)):
        digest.update(chunk)
    return digest.digest()


def decode_stored(
    delivery: Delivery,
    ciphertexts: Sequence[StoredCiphertext],
    out: Callable[[bytes], object],
    *,
    workdir: Path,
    publisher_key: crypto.PublicKey,
    keys: KeyLookup | None = None,
    document_keys: DocumentKeyLookup | None = None,
    concepts: Iterable[str] | None = None,
    seen: Mapping[tuple[str, str], int] | None = None,
    limits: Limits | None = None,
) -> tuple[HeldFragment, ...]:
    """Verify and decrypt a delivery whose ciphertexts are kept elsewhere, writing its canonical
    view to ``out``; return the fragments the view holds, in position order.

    Args:
        delivery: the delivery's manifest, proofs and fragment headers (each fragment's
            ``cipher_value`` is not read: empty).
        ciphertexts: each fragment's ciphertext, in the order of ``delivery.fragments``.
        out: where the canonical view goes (see the module docstring).
        workdir: where the plaintexts are kept meanwhile (a folder on disk, not in memory).
        publisher_key, keys, document_keys, concepts, seen, limits: as for
            :func:`xdn.codec.decode`.

    Raises:
        DecryptError: any check failed (opaque).
        HostileXmlError: authentic plaintext is XML the hardened parser refuses.
        TypeError: misuse.
    """
    if not isinstance(delivery, Delivery):
        raise TypeError("delivery must be a Delivery")
    if len(ciphertexts) != len(delivery.fragments):
        raise TypeError("give one ciphertext per fragment of the delivery")
    limits = limits or Limits()
    m = delivery.signed_manifest.manifest
    source = KeySource(
        publisher=m.publisher, document_id=m.document_id, keys=keys, document_keys=document_keys
    )
    digests = [_digest(c) for c in ciphertexts]
    check_delivery(delivery, publisher_key, expected_concepts(m, concepts, source), seen, digests)
    order = sorted(range(len(ciphertexts)), key=lambda n: delivery.fragments[n].position)
    with tempfile.TemporaryFile(dir=workdir) as plain:
        spans: dict[int, tuple[int | None, PlaintextSpan]] = {}
        for n in order:
            f, stored = delivery.fragments[n], ciphertexts[n]
            doc_key = source.doc_key(f.concept, f.epoch)
            if doc_key is None:
                raise fail("no key for fragment %s (epoch %d)", f.fragment_id, f.epoch)
            size = len(stored)
            if size < crypto.GCM_OVERHEAD:
                raise fail("fragment %s: ciphertext too short", f.fragment_id)
            start = plain.seek(0, 2)
            crypto.aead_decrypt_chunks(
                doc_key,
                iv=stored.read(0, crypto.IV_BYTES),
                tag=stored.read(size - crypto.GCM_OVERHEAD + crypto.IV_BYTES, size),
                chunks=_chunks(
                    stored, crypto.IV_BYTES, size - crypto.GCM_OVERHEAD + crypto.IV_BYTES
                ),
                write=plain.write,
            )
            plain.flush()
            spans[f.position] = (f.parent, PlaintextSpan(plain.fileno(), start, plain.tell()))
        templates = plan_spans(spans, document_id=m.document_id, limits=limits)
        tops = plan_view(templates, leaf_count=m.leaf_count, max_depth=limits.max_depth)
        write_canonical_view(
            out, start=(m.document_id, m.publisher, m.version), tops=tops, spans=spans,
            limits=limits, templates=templates,
        )  # fmt: skip
    return held_fragments(delivery)
