"""A downlink's member set on its Link stream: a whole set once, then numbered deltas.

Theory of operation (issue #15). A downlink tells its uplink who is registered behind it (its
own subscribers and those behind its downlinks) so that the uplink routes to it what they may
receive. The uplink trusts none of it: it checks each member's certificate (CA, CRL), signed
lease and grants, which costs about a millisecond of CPU a member. Sending the whole set at
every change would make one join behind a downlink of 10,000 members cost 10,000 checks, so:

* The downlink numbers the versions of the set it states: a *view* (random, one per uplink
  connection object, so one process's numbering is never mistaken for another's) and a
  *version* that grows with every update. On every Link stream it first sends the whole set
  (``base`` 0), then only *deltas*: the members added or changed since version ``base``
  (certificate, lease renewal, grants, path refresh requests) and the names gone.
  :class:`InterestSender` keeps what was last stated and finds what changed by comparing each
  member's token (its registration and refresh requests: the same object, or an equal one),
  without building or sending the others. Changes signalled while an update waits to be sent
  are coalesced: the delta is computed when the stream is ready to send it.
* The uplink (:class:`LinkInterest`, one per stream) puts an update in force with its last
  chunk. A delta applies only on top of the version it names of the view in force on that
  stream; anything else is a gap (:class:`InterestGap`): the uplink ends the stream and the
  downlink, linking again, sends its whole set: the resync. Within one stream gRPC loses and
  reorders nothing and every stream starts with the whole set, so a gap means a lost update
  (a stream that broke) or a faulty downlink, never a set silently out of step; a restart of
  either side is a new stream. Only a delta's members are checked; the uplink's table, store
  and membership journal change by those members only
  (:meth:`disseminator.node.SiteNode.change_link_members`).

Both ends check the limits (:mod:`disseminator.limits`): an update travels in chunks (``more``
on all but the last) of at most ``interest_members`` entries (members and gone names) and half
of ``stream_message_bytes``; the set behind a link holds at most ``link_members``. The uplink
refuses a certificate or a name listed twice (within an update as each chunk arrives, before
anything is checked; against the set in force when a delta completes), a delta naming a member
as both changed and gone, and one removing a name that is not in the set.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from disseminator.limits import Limits, chunk_sizes
from disseminator.routing import Registration
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["InterestChange", "InterestGap", "InterestSender", "LinkInterest", "interest_chunks"]

T = TypeVar("T", bound=Hashable)

_NONE = object()


def interest_chunks(
    members: Sequence[pb.Member],
    limits: Limits,
    *,
    gone: Sequence[str] = (),
    view: int = 0,
    version: int = 0,
    base: int = 0,
) -> list[pb.LinkMessage]:
    """One update as InterestUpdate messages within ``limits``, all but the last ``more``.

    Each chunk carries the update's numbering; ``gone`` names follow the members.
    """
    entries: list[pb.Member | str] = [*members, *gone]
    sizes = [e.ByteSize() if isinstance(e, pb.Member) else len(e.encode()) + 2 for e in entries]
    runs = chunk_sizes(
        sizes, max_count=limits.interest_members, max_bytes=limits.stream_message_bytes // 2
    )
    messages, start = [], 0
    for index, count in enumerate(runs):
        chunk = entries[start:start + count]
        start += count
        update = pb.InterestUpdate(
            members=[e for e in chunk if isinstance(e, pb.Member)],
            gone=[e for e in chunk if isinstance(e, str)],
            more=index < len(runs) - 1, view=view, version=version, base=base,
        )
        messages.append(pb.LinkMessage(interest=update))
    return messages


class InterestSender(Generic[T]):
    """The downlink's end: the set last stated upstream, and the updates that follow it.

    Members are given as ``name → token``: equal tokens give equal wire forms (``wire``).
    """

    def __init__(
        self, limits: Limits, wire: Callable[[T], pb.Member], *, view: int | None = None
    ) -> None:
        self.view = view if view is not None else secrets.randbits(63) or 1  # (0: unnumbered)
        self.version = 0
        self._limits = limits
        self._wire = wire
        self._sent: dict[str, T] = {}

    def whole(self, current: Mapping[str, T]) -> list[pb.LinkMessage]:
        """The whole set ``current`` under a new version: what a stream starts with."""
        self.version += 1
        self._sent = dict(current)
        members = [self._wire(current[name]) for name in sorted(current)]
        return interest_chunks(members, self._limits, view=self.view, version=self.version)

    def delta(self, current: Mapping[str, T]) -> list[pb.LinkMessage]:
        """What changed from the set last stated to ``current`` (nothing: no message)."""
        sent = self._sent
        changed = sorted(
            name for name, token in current.items()
            if (old := sent.get(name, _NONE)) is not token and old != token
        )
        gone = sorted(name for name in sent if name not in current)
        if not changed and not gone:
            return []
        base, self.version = self.version, self.version + 1
        for name in gone:
            del sent[name]
        for name in changed:
            sent[name] = current[name]
        return interest_chunks(
            [self._wire(current[name]) for name in changed], self._limits, gone=gone,
            view=self.view, version=self.version, base=base,
        )


class InterestGap(ProtocolError):
    """A delta that does not follow the version in force (a lost update, or a faulty
    downlink): the stream ends, and the downlink sends its whole set on the next one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InterestChange:
    """An update put in force: what the uplink's node applies to the downlink's members."""

    whole: bool  # the whole set (replace), or a delta (change)
    members: tuple[pb.Member, ...]  # as stated: every member, or those added or changed
    verified: tuple[Registration, ...]  # those whose certificate, lease and grants held
    gone: frozenset[str] = frozenset()  # (a delta) the names removed

    @property
    def removed(self) -> frozenset[str]:
        """(A delta) the names whose entry goes: those gone and those changed (re-added if
        they were verified again)."""
        return self.gone | {m.subscriber for m in self.members}


@dataclass(slots=True)
class _Update:
    """An update being received, chunk by chunk."""

    view: int
    version: int
    base: int
    members: list[pb.Member] = field(default_factory=list)
    digests: dict[bytes, str] = field(default_factory=dict)  # certificate digest → name
    names: dict[str, bytes] = field(default_factory=dict)  # name → certificate digest
    gone: set[str] = field(default_factory=set)
    verified: list[Registration] = field(default_factory=list)
    verified_names: set[str] = field(default_factory=set)
    new: int = 0  # (a delta) names not in the set in force

    @property
    def whole(self) -> bool:
        return self.base == 0


class LinkInterest:
    """The uplink's end, for one Link stream: the set in force (as stated) and its version."""

    def __init__(self, limits: Limits, *, generation: int = 0) -> None:
        self.generation = generation  # of the stream (a superseded stream applies nothing)
        self.view = 0  # the numbering in force (0: none, or an unnumbered whole set)
        self.version = 0
        self._limits = limits
        self._names: dict[str, bytes] = {}  # the set in force: name → certificate digest
        self._owners: dict[bytes, str] = {}  # certificate digest → name
        self._open: _Update | None = None

    @property
    def names(self) -> frozenset[str]:
        """The members of the set in force, as the downlink stated them (checked or not)."""
        return frozenset(self._names)

    def take(self, update: pb.InterestUpdate) -> list[pb.Member]:
        """Take one chunk: check its numbering, the limits and duplicates (before any member
        is checked); return its members, to be checked.

        Raises:
            InterestGap: a delta that does not follow the version in force.
            LimitExceeded: the chunk, or the set it makes, lists too many members.
            ProtocolError: a name or certificate listed twice, an impossible numbering.
        """
        if self._open is None:
            self._open = self._opening(update)
        elif (update.view, update.version, update.base) != (
            self._open.view, self._open.version, self._open.base
        ):
            raise ProtocolError("the chunks of one InterestUpdate carry different versions")
        current = self._open
        if current.whole and update.gone:
            raise ProtocolError("a whole-set InterestUpdate names members gone")
        entries = len(update.members) + len(update.gone)
        self._limits.check_members(entries, pending=0)  # (the chunk, before looking at it)
        for member in update.members:
            self._add(current, member)
        for name in update.gone:
            if name in current.gone or name in current.names:
                raise ProtocolError(f"an InterestUpdate lists {name!r} twice")
            if name not in self._names:
                raise ProtocolError(f"an InterestUpdate removes {name!r}, not in the set")
            current.gone.add(name)
        size = len(current.names) if current.whole else (
            len(self._names) + current.new - len(current.gone)
        )
        self._limits.check_members(entries, pending=size - entries)  # (the set it makes)
        return list(update.members)

    def _opening(self, update: pb.InterestUpdate) -> _Update:
        if update.base == 0:
            return _Update(view=update.view, version=update.version, base=0)
        if update.view == 0 or update.version <= update.base:
            raise ProtocolError("an InterestUpdate delta needs a view and a version past base")
        if (update.view, update.base) != (self.view, self.version) or self.view == 0:
            raise InterestGap(
                f"an InterestUpdate changes version {update.base} of view {update.view:x}, "
                f"but version {self.version} of view {self.view:x} is in force here: "
                "link again and send the whole set"
            )
        return _Update(view=update.view, version=update.version, base=update.base)

    def _add(self, current: _Update, member: pb.Member) -> None:
        digest = hashlib.sha256(member.certificate).digest()
        if digest in current.digests:
            raise ProtocolError(
                f"an InterestUpdate lists one certificate twice (as {member.subscriber!r} "
                "and under another or the same name)"
            )
        name = member.subscriber
        if name in current.names or name in current.gone:
            raise ProtocolError(f"an InterestUpdate lists {name!r} twice")
        current.digests[digest] = name
        current.names[name] = digest
        if not current.whole and name not in self._names:
            current.new += 1
        current.members.append(member)

    def add_verified(self, registrations: Iterable[Registration]) -> None:
        """Take the checked members of a slice (named by their certificates)."""
        if self._open is None:
            raise ProtocolError("checked members without an InterestUpdate")
        current = self._open
        for reg in registrations:
            if reg.subscriber in current.verified_names:
                raise ProtocolError(
                    f"an InterestUpdate lists two certificates of {reg.subscriber!r}"
                )
            current.verified_names.add(reg.subscriber)
            current.verified.append(reg)

    def finish(self) -> InterestChange:
        """Put the update whose last chunk was taken in force; return what changes.

        Raises:
            ProtocolError: (a delta) a certificate it lists is another member's in the set.
        """
        current, self._open = self._open, None
        if current is None:
            raise ProtocolError("no InterestUpdate to finish")
        if current.whole:
            self._names, self._owners = current.names, current.digests
        else:
            self._apply_delta(current)
        self.view, self.version = current.view, current.version
        return InterestChange(
            whole=current.whole, members=tuple(current.members),
            verified=tuple(current.verified), gone=frozenset(current.gone),
        )

    def _apply_delta(self, current: _Update) -> None:
        for digest, name in current.digests.items():
            owner = self._owners.get(digest)
            if owner is not None and owner != name and owner not in current.gone and (
                owner not in current.names
            ):
                raise ProtocolError(
                    f"an InterestUpdate lists one certificate twice (as {name!r}, and as "
                    f"{owner!r} in the set in force)"
                )
        for name in (*current.gone, *current.names):
            old = self._names.pop(name, None)
            if old is not None and self._owners.get(old) == name:
                del self._owners[old]
        for name, digest in current.names.items():
            self._names[name] = digest
            self._owners[digest] = name
