"""Message URIs a site minted, as resources: which one a path names, and who may read it.

A site mints ``<NODE>msg/<document>/v<version>/<hop>`` for each hop it signs
(:func:`xdn.provenance.message_uri`: every part one percent-encoded path segment). The resource
is the message as this site sent it: every named graph of the chain it received plus the
envelope and signature graphs of its hop. A message names its parties, and only they — and
auditors — may read it (:func:`may_read`): its publisher (the content graph), every node that
signed a hop (envelope senders) and every recipient of one, which covers the sites on its path
and the subscriber it was for. A party is known by its node URI: the URI in its certificate's
subjectAltName, else ``https://CN.xdn.example/`` (:func:`xdn.certs.node_uri`), as provenance
names it.
"""

from __future__ import annotations

from typing import Final

from xdn import certs, provenance
from xdn.rdf_syntax import iri_problem

__all__ = ["AUDITOR_ROLE", "may_read", "message_readers", "message_uri_of_path", "party"]

AUDITOR_ROLE: Final = "auditor"


def message_uri_of_path(node_uri: str, raw_path: str) -> str | None:
    """The message URI a request path names below the site's ``msg/`` space, or ``None``.

    ``raw_path`` is the path as sent (percent-encoded, no query): message URIs are compared
    as minted, escapes and all.
    """
    if not raw_path.startswith("/msg/") or len(raw_path) > 2048:
        return None
    uri = node_uri + raw_path[1:]
    if iri_problem(uri) is not None or "?" in uri or "#" in uri:
        return None
    return uri


def message_readers(message: provenance.Message) -> frozenset[str]:
    """The node URIs of a message's parties: publisher, every sender and every recipient."""
    parties = {certs.node_uri(message.content().publisher)}
    for envelope in message.envelopes():
        parties.add(envelope.sender)
        if envelope.recipient is not None:
            parties.add(envelope.recipient)
    return frozenset(parties)


def party(credential: certs.Credential) -> str:
    """The node URI a credential is known by: its subjectAltName URI, else its CN's."""
    return credential.uri or certs.node_uri(credential.name)


def may_read(message: provenance.Message, credential: certs.Credential) -> bool:
    """Whether the holder of ``credential`` (checked and in force) may read ``message``."""
    if credential.role == AUDITOR_ROLE:
        return True
    return party(credential) in message_readers(message)
