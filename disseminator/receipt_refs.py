"""A receipt's inbox notification kept by reference to the message this site minted.

Theory of operation. A receipt that reaches a site wraps, somewhere in its chain, a hop this
site signed: the message ``<NODE>msg/<doc>/v<N>/<hop>`` that the site keeps anyway, so that
its URI dereferences (:mod:`disseminator.messages`: the chain it received, and its hop in the
provenance log). Every graph of a chain is named ``<M#…>`` after the message ``M`` whose hop
added it, so the receipt's dataset splits by graph name into

* the graphs of the messages up to and including the site's own — the message it keeps;
* the rest: the hops after it (a downlink's, …) and the receipt's envelope and signature, a
  few KB, which is all the notification stores (:func:`after_message`).

Reading the notification joins the kept message and the rest again (:func:`rejoin`) and checks
the result against the SHA-256 of the whole chain taken when it was accepted (the receipt's
id), so what is served is byte for byte the canonical N-Quads the receipt had — or nothing,
when the message is no longer kept as it was (pruned, log rotated): the caller answers
``410 Gone``.

Pure: values in, values out.
"""

from __future__ import annotations

import hashlib

from xdn import provenance
from xdn.errors import ProvenanceError
from xdn.rdf import canonicalise, parse_nquads

__all__ = ["after_message", "rejoin"]


def after_message(message: provenance.Message, uri: str) -> bytes:
    """The canonical N-Quads of ``message``'s graphs added after message ``uri``'s hop.

    Raises:
        ValueError: no hop of ``message`` is message ``uri``.
    """
    uris = [envelope.message for envelope in message.envelopes()]
    if uri not in uris:
        raise ValueError(f"<{message.uri}> wraps no message <{uri}>")
    kept = set(uris[: uris.index(uri) + 1])
    return canonicalise(
        q for q in message.quads if q.g is None or q.g.value.partition("#")[0] not in kept
    )


def rejoin(kept: bytes, rest: bytes, digest: str) -> bytes | None:
    """The whole chain, canonical N-Quads: the kept message ``kept`` and the ``rest``, if
    their union hashes to ``digest`` (SHA-256, hex); else ``None``."""
    try:
        data = canonicalise([*parse_nquads(kept), *parse_nquads(rest)])
    except ProvenanceError:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None
