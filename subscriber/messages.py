"""What the subscriber tells its user: a site's status, turned into a sentence that says what
is likely wrong and whether to stop, retry or end cleanly.

Pure: :func:`stream_end` takes the status code's name and its details (as gRPC gave them) and
returns an :class:`Ending`; the client does the printing, the raising or the reconnecting.
:func:`accepted_line` is the one line logged (INFO, shown with ``xdn -v subscribe``) per accepted
document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xdn.grpc_tls import handshake_hint

__all__ = ["UNSUBSCRIBED_REASON", "Ending", "accepted_line", "stream_end"]

# The reason a site gives when it ends a stream after `xdn unsubscribe` (disseminator/server.py).
UNSUBSCRIBED_REASON = "unsubscribed at the subscriber's request"
_ENDED_PREFIX = "subscription ended by the site: "
# grpc.aio's text when a failed write replaced the site's status (grpc/grpc#36066).
_CORE_INTERNAL = "Internal error from Core"
# Codes by which a site refuses a subscription for good; any other ends in a reconnect.
_REFUSALS = frozenset(
    {
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "FAILED_PRECONDITION",
        "UNIMPLEMENTED",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending:
    """How a stream ended: ``done`` (a clean end, exit 0), ``refused`` (stop with an error)
    or ``lost`` (reconnect); ``text`` says it to the user."""

    kind: Literal["done", "refused", "lost"]
    text: str


def stream_end(name: str, address: str, code: str, details: str) -> Ending:
    """The meaning of a Subscribe stream ended by status ``code`` with ``details``.

    Args:
        name: the subscriber's name.
        address: the site's address.
        code: the status code's name (``"PERMISSION_DENIED"``).
        details: the status details.
    """
    if code == "PERMISSION_DENIED" and details == _ENDED_PREFIX + UNSUBSCRIBED_REASON:
        return Ending(kind="done", text=f"{name}: unsubscribed at {address}; subscription ended")
    if code == "UNAUTHENTICATED" and details.endswith("was revoked"):
        return Ending(
            kind="refused",
            text=f"your certificate ({name}.pem in --certs) was revoked by the CA; the "
            f"site {address} refused it ({details})",
        )
    if code == "UNAVAILABLE" and (hint := handshake_hint(details)) is not None:
        return Ending(kind="refused", text=f"cannot connect to {address}: {hint}")
    if code in _REFUSALS:
        return Ending(kind="refused", text=f"subscription refused by {address}: {code}: {details}")
    if code == "INTERNAL" and details == _CORE_INTERNAL:
        return Ending(
            kind="lost",
            text=f"{address} ended the call before its reason arrived (asking again to learn it)",
        )
    return Ending(kind="lost", text=f"{address}: {code}: {details}")


def accepted_line(
    name: str, *, publisher: str, document: str, version: int, fragments: int, size: int
) -> str:
    """The line logged for one accepted document."""
    return (
        f"{name}: accepted {publisher} {document} v{version}: {fragments} fragments, "
        f"{size} bytes of view"
    )
