"""The DHT's typed errors, placed in xdn's one hierarchy (:mod:`xdn.errors`).

Split by who is at fault, as everywhere in xdn:

* :class:`DhtUsageError` — our own caller misused the node (announcing without credentials, an
  illegal lookup transition). Never caused by a peer.
* :class:`DhtProtocolError` — a peer sent a malformed or oversized message
  (``INVALID_ARGUMENT`` on the wire). :class:`InvalidRecordError` is the same for a site record
  that is structurally wrong, expired, or filed under the wrong key.
* :class:`RecordAuthenticationError` — a site record whose certificate or signature does not
  check out: a forgery attempt (``UNAUTHENTICATED`` on the wire).
* :class:`PeerUnavailableError` / :class:`PeerRefusedError` — raised by transports when a peer
  does not answer, or answers with an error status. Lookups treat both as "this peer failed".
* :class:`BootstrapError` — none of the bootstrap peers answered.
"""

from __future__ import annotations

from xdn.errors import PeerError, ProtocolError, UsageError

__all__ = [
    "BootstrapError",
    "DhtProtocolError",
    "DhtUsageError",
    "InvalidRecordError",
    "LookupStateError",
    "PeerRefusedError",
    "PeerUnavailableError",
    "RecordAuthenticationError",
    "StoreFullError",
]


class DhtUsageError(UsageError):
    """The DHT node was asked to do something invalid by its own caller."""


class LookupStateError(DhtUsageError):
    """An event was fed to a lookup in a state where it is not allowed."""


class DhtProtocolError(ProtocolError):
    """A DHT message from a peer is malformed or oversized."""


class InvalidRecordError(DhtProtocolError):
    """A site record is malformed, expired, too long-lived or filed under the wrong key."""


class RecordAuthenticationError(PeerError):
    """A site record's certificate or signature does not verify: it was not made by its site."""


class StoreFullError(PeerError):
    """The record store holds as many records for this key as it is allowed to."""


class PeerUnavailableError(PeerError):
    """A peer did not answer (unreachable, timed out, or gone)."""


class PeerRefusedError(PeerError):
    """A peer answered with an error (it refused our request or found it malformed)."""


class BootstrapError(PeerError):
    """No bootstrap peer answered, so the node could not join the network."""
