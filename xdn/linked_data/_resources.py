"""The graphs of a site's own resources: its root (the node description) and its inbox.

A site's URI space is its node URI (:func:`xdn.certs.node_uri`, ``https://NAME.xdn.example/``):
the root ``/`` describes the node, ``/inbox/`` is its LDN inbox, ``/inbox/ID`` a notification.
The root holds the node description graph ``<NODE#cert>`` exactly as the provenance log starts
with it (:func:`xdn.provenance.node_description`: the certificate, so a verifier needs only a
message and the CA), and in the default graph the node's inbox (``ldp:inbox``, LDN discovery)
and its public key (PEM, ``sec:publicKeyPem``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import pyoxigraph as ox

from xdn import certs, crypto, provenance
from xdn.linked_data._dataset import Dataset, from_nquads

__all__ = [
    "LDP",
    "LDP_INBOX",
    "SEC_PUBLIC_KEY_PEM",
    "inbox_listing",
    "inbox_uri",
    "is_notification_id",
    "notification_uri",
    "root_description",
]

LDP: Final = "http://www.w3.org/ns/ldp#"
LDP_INBOX: Final = LDP + "inbox"
SEC_PUBLIC_KEY_PEM: Final = "https://w3id.org/security#publicKeyPem"
_RDF_TYPE: Final = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def inbox_uri(node_uri: str) -> str:
    """The inbox of the node ``node_uri`` (a container: it ends with ``/``)."""
    return node_uri + "inbox/"


def is_notification_id(text: str) -> bool:
    """Whether ``text`` is the form of id an inbox mints (letters, digits, ``-``, ``_``)."""
    return _ID.fullmatch(text) is not None


def notification_uri(node_uri: str, notification_id: str) -> str:
    """The URI of notification ``notification_id`` in the inbox of ``node_uri``.

    Raises:
        ValueError: ``notification_id`` is not of the minted form.
    """
    if not is_notification_id(notification_id):
        raise ValueError(f"{notification_id!r} is not a notification id")
    return inbox_uri(node_uri) + notification_id


def inbox_listing(inbox: str, notifications: Iterable[str]) -> Dataset:
    """The inbox as an LDP basic container listing every notification with ``ldp:contains``."""
    node = ox.NamedNode(inbox)
    quads = [
        ox.Quad(node, _RDF_TYPE, ox.NamedNode(LDP + "Container")),
        ox.Quad(node, _RDF_TYPE, ox.NamedNode(LDP + "BasicContainer")),
    ]
    contains = ox.NamedNode(LDP + "contains")
    quads.extend(ox.Quad(node, contains, ox.NamedNode(uri)) for uri in notifications)
    return tuple(quads)


def root_description(node_uri: str, cert_pem: bytes) -> Dataset:
    """The node's description: its certificate graph, its inbox and its public key.

    Raises:
        UsageError: ``cert_pem`` is not a PEM certificate.
    """
    described = from_nquads(provenance.node_description(node_uri, cert_pem))
    node = ox.NamedNode(node_uri)
    key_pem = crypto.public_key_to_pem(certs.public_key_of(cert_pem)).decode("ascii")
    return (
        *described,
        ox.Quad(node, ox.NamedNode(LDP_INBOX), ox.NamedNode(inbox_uri(node_uri))),
        ox.Quad(node, ox.NamedNode(SEC_PUBLIC_KEY_PEM), ox.Literal(key_pem)),
    )
