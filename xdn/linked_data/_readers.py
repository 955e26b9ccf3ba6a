"""Who may read a notification of a site's inbox: its readers, decided once, when it is stored.

Theory of operation
-------------------
A notification can say who received what (a delivery receipt names the publisher, every site
on the path and the subscriber), so the inbox serves each one only to its **readers**, and
lists to a caller only what it may read. The readers are node URIs (:func:`party`: a party is
known by the node URI its certificate names, as provenance names it, so a renewed certificate
of the same name reads what the old one did). They are:

* the notification's **sender**: the party whose certificate posted it, or for a receipt the
  party that passed it to the site (the subscriber that signed it, or the downlink);
* the parties it **concerns**: for a signed chain (a delivery receipt) every party of its
  message, exactly as :func:`~xdn.linked_data.may_read` decides for messages — the publisher,
  every node that signed a hop and every recipient, so the sites on the path and the
  subscriber (:func:`chain_readers`); for a generic notification the parties it *names* in
  ActivityStreams' addressing and actor properties (:data:`ADDRESSING`: ``as:actor``,
  ``as:target``, ``as:to``, ``as:cc``, ``as:bto``, ``as:bcc``, ``as:audience``) when the IRI is
  a node URI of the network (:func:`is_node_uri`), at most a limit of them
  (:func:`notification_readers`; more is :class:`InvalidNotification`, so a post cannot make
  the store write an unbounded list).

Besides its readers, **the site itself and auditors** read every notification
(:func:`reads_every_notification`). Another kind of notification fits by giving the store
its own readers (a refusal notice: its subscriber, the sites on its path, its publisher).

The store indexes the readers (:mod:`disseminator.notifications`), so listing what a party may
read is an index range, not a parse of every notification per request.
"""

from __future__ import annotations

from typing import Final

import pyoxigraph as ox

from xdn import certs, provenance
from xdn.linked_data._errors import InvalidNotification
from xdn.linked_data._messages import AUDITOR_ROLE, message_readers, party
from xdn.linked_data._notification import Notification

__all__ = [
    "ADDRESSING",
    "chain_readers",
    "is_node_uri",
    "notification_readers",
    "party",
    "reads_every_notification",
]

_AS: Final = "https://www.w3.org/ns/activitystreams#"
#: The properties whose objects name the parties a generic notification concerns.
ADDRESSING: Final = frozenset(
    _AS + name for name in ("actor", "target", "to", "cc", "bto", "bcc", "audience")
)
_NODE_PREFIX, _NODE_SUFFIX = certs.node_uri("\0").split("\0")


def is_node_uri(iri: str) -> bool:
    """Whether ``iri`` is a node URI of the network (``https://NAME.xdn.example/``)."""
    name = iri.removeprefix(_NODE_PREFIX).removesuffix(_NODE_SUFFIX)
    return (
        iri == _NODE_PREFIX + name + _NODE_SUFFIX and bool(name)
        and not any(c in name for c in "/?#@:[] \t\r\n")
    )


def chain_readers(message: provenance.Message, sender: certs.Credential) -> frozenset[str]:
    """The readers of a notification that is a signed chain (a delivery receipt): the parties
    of its message (publisher, every signer and recipient of a hop) and its sender."""
    return message_readers(message) | {party(sender)}


def notification_readers(
    notification: Notification, sender: certs.Credential, *, max_parties: int
) -> frozenset[str]:
    """The readers of a generic notification: its sender and the node URIs it names in
    :data:`ADDRESSING` (at most ``max_parties`` of them).

    Raises:
        InvalidNotification: it names more than ``max_parties`` parties.
    """
    named = {
        q.object.value for q in notification.dataset
        if q.predicate.value in ADDRESSING and isinstance(q.object, ox.NamedNode)
        and is_node_uri(q.object.value)
    }
    if len(named) > max_parties:
        raise InvalidNotification(
            f"the notification names {len(named)} parties of the network as its actor or "
            f"audience, over the inbox's limit of {max_parties}"
        )
    return frozenset(named) | {party(sender)}


def reads_every_notification(credential: certs.Credential, site_uri: str) -> bool:
    """Whether ``credential`` reads every notification of the inbox of ``site_uri``: the site
    itself, or an auditor."""
    return credential.role == AUDITOR_ROLE or party(credential) == site_uri
