"""Who a subscriber is: its certificate, not the common name written in it.

Two certificates may carry the same common name — a namesake, or the same person's re-issued
certificate after a device was stolen. Queues, registrations, leases and group membership must
never mix them up, so every party is keyed by a *member id* that names the certificate: the
common name (for people reading logs) followed by ``@`` and the first 128 bits of the
certificate's SHA-256 fingerprint, e.g. ``alice@3f9a…`` (32 hex digits).

A member id is computed from a certificate, never taken from a peer's word: a site derives it
from the TLS peer certificate, an uplink and the publisher's key service from the certificate a
membership entry carries (and refuse an entry whose id does not match it), a subscriber from its
own certificate. :func:`person` recovers the common name to show to people.
"""

from __future__ import annotations

import re

__all__ = ["FINGERPRINT_DIGITS", "member_id", "person", "split_member_id"]

FINGERPRINT_DIGITS = 32  # hex digits of the SHA-256 fingerprint kept in a member id (128 bits)

_SUFFIX = re.compile(rf"@([0-9a-f]{{{FINGERPRINT_DIGITS}}})\Z")


def member_id(name: str, fingerprint: str) -> str:
    """The member id of the certificate with common name ``name`` and ``fingerprint``.

    Args:
        name: the certificate's common name (may itself contain ``@``).
        fingerprint: its SHA-256 fingerprint, lower-case hex (64 digits).

    Raises:
        ValueError: ``fingerprint`` is not 64 lower-case hex digits.
    """
    if not re.fullmatch(r"[0-9a-f]{64}", fingerprint):
        raise ValueError("a fingerprint is 64 lower-case hex digits (SHA-256)")
    return f"{name}@{fingerprint[:FINGERPRINT_DIGITS]}"


def split_member_id(value: str) -> tuple[str, str]:
    """``(common name, fingerprint prefix)`` of a member id.

    Raises:
        ValueError: ``value`` does not end in ``@`` and the fingerprint prefix.
    """
    match = _SUFFIX.search(value)
    if match is None:
        raise ValueError(f"not a member id (name@{FINGERPRINT_DIGITS} hex digits): {value!r}")
    return value[: match.start()], match.group(1)


def person(value: str) -> str:
    """The common name in a member id, for people; any other text is returned unchanged."""
    match = _SUFFIX.search(value)
    return value if match is None else value[: match.start()]
