"""Building a failure notice: a signed message saying what its signer refused, and why.

Issue #13: a party that refuses something (a subscriber refusing a forged document, a bad CRL,
an unauthenticated key message…) shows the reason, records it, and signs a *failure notice*
that it appends to its own provenance log, so the refusal reaches the audit. The notice is a
message of its own, built by the paper's Algorithm 1 like a publication: a content graph
``<M#c1>`` (:mod:`._refusal`: what was refused, the reason, the hop it came from — never
plaintext) with its signature ``<M#c1s>``, and one envelope ``<M#e1>`` with
``msg:hasMessageType xdn:Refusal`` and its signature ``<M#e1s>``. The envelope names its sender
and time, no recipient (it is final: nothing relays or receipts it) and no document or
fragments (the content graph names those, when known). Its message URI lies in the signer's
own notice space (:func:`notice_uri`, ``<node>refusal/…``), apart from the document messages.

It is a :class:`Message` like any other: well-formed by the same conditions, verified by
:func:`~xdn.provenance.verify_message`, logged by :class:`~xdn.provenance.ProvenanceLog`.
"""

from __future__ import annotations

from xdn.provenance import _vocab as v
from xdn.provenance._facts import RefusalFacts, Signer
from xdn.provenance._message import Message, _check_args, _Hop, _seal, _signature
from xdn.provenance._refusal import refusal_quads
from xdn.rdf import IRI, Quad

__all__ = ["failure_notice"]


def failure_notice(
    signer: Signer, *, message_uri: str, refusal: RefusalFacts, timestamp_ms: int
) -> Message:
    """Sign a failure notice saying ``refusal`` (the refusing party is ``signer``).

    Args:
        signer: the party that refused.
        message_uri: a fresh URI below the signer's notice space
            (:func:`~xdn.provenance.notice_uri`), unique per notice.
        refusal: what was refused and why.
        timestamp_ms: when it was refused (milliseconds since the epoch).

    Raises:
        TypeError, ValueError: bad argument types or values.
        UsageError: ``message_uri`` is not below the signer's notice space.
    """
    if not isinstance(refusal, RefusalFacts):
        raise TypeError("refusal must be RefusalFacts")
    _check_args(signer, message_uri, None, timestamp_ms)
    return one_hop(signer, message_uri, refusal_quads(message_uri, refusal), kind=v.REFUSAL,
                   timestamp_ms=timestamp_ms)


def one_hop(
    signer: Signer, message_uri: str, content: list[Quad], *, kind: IRI, timestamp_ms: int
) -> Message:
    """A final one-hop message of ``signer``'s (a failure or policy-change notice): the content
    graph ``<M#c1>`` (``content``) with its signature, and one envelope of type ``kind``, with
    no recipient, document or fragments, sealed and signed (the arguments checked already)."""
    c1 = IRI(f"{message_uri}#c1")
    signature, value = _signature(signer, c1, content)
    hop = _Hop(
        message=message_uri,
        number=1,
        kind=kind,
        sender=signer.node_uri,
        recipient=None,
        timestamp_ms=timestamp_ms,
        document_id="",
        leaves=None,
        content=c1.value,
    )
    sealed = _seal(signer, hop, [(c1.value + "s", c1.value, value)])
    return Message(quads=frozenset(content + signature + sealed))
