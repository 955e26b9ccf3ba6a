"""A downlink's member set, received in chunks on its Link stream.

A downlink sends the members behind it as ``InterestUpdate`` chunks (``more`` set on every one
but the last) so that no single message, and no single verification pass, is too large
(:mod:`disseminator.limits`). The uplink collects the chunks here, refusing a certificate or a
name listed twice as each chunk arrives (before anything is verified), then the members it has
verified, and puts the set in force with the last chunk.
"""

from __future__ import annotations

import hashlib
from typing import Any

from disseminator.routing import Registration
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["InterestChunks"]


class InterestChunks:
    """The chunks of one downlink's member set received so far on one Link stream."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.members: list[pb.Member] = []
        self.verified: list[Registration] = []
        self._certificates: set[bytes] = set()
        self._names: set[str] = set()
        self._verified_names: set[str] = set()

    def add(self, members: Any) -> None:
        """Take a chunk's members (a cheap duplicate check, before any verification)."""
        for member in members:
            digest = hashlib.sha256(member.certificate).digest()
            if digest in self._certificates:
                raise ProtocolError(
                    f"an InterestUpdate lists one certificate twice (as {member.subscriber!r} "
                    "and under another or the same name)"
                )
            if member.subscriber in self._names:
                raise ProtocolError(f"an InterestUpdate lists {member.subscriber!r} twice")
            self._certificates.add(digest)
            self._names.add(member.subscriber)
            self.members.append(member)

    def add_verified(self, registrations: list[Registration]) -> None:
        """Take the verified members of a slice (named by their certificates)."""
        for reg in registrations:
            if reg.subscriber in self._verified_names:
                raise ProtocolError(
                    f"an InterestUpdate lists two certificates of {reg.subscriber!r}"
                )
            self._verified_names.add(reg.subscriber)
            self.verified.append(reg)
