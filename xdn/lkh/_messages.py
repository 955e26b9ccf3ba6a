"""What travels: rekey messages (broadcast) and enrolments (one member each), and their crypto.

* A :class:`RekeyMessage` starts epoch ``e`` of a ``(publisher, concept)`` group. It lists the
  node ids the epoch retires and, bottom-up, every new node key wrapped under each of the node's
  children (:class:`WrappedKey`): AES key wrap (RFC 3394) under
  ``HKDF-SHA-384(child key, info = "xdn/lkh/wrap/v1" ‖ publisher ‖ concept ‖ e ‖ node ‖ child)``,
  so a wrapped key cannot be replayed under another group, epoch or position. It carries no
  member names. Anyone may read it; only holders of a child key learn anything.
* A :class:`MemberPath` is one member's secrets: its leaf key and every key from its leaf to the
  root, in that order. It never travels in clear: :func:`seal_path` seals it with HPKE to the
  member's certificate key as an :class:`Enrolment` whose ``info`` binds publisher, concept,
  epoch and member name, and :func:`open_enrolment` opens it.
* The group key of epoch ``e`` is ``HKDF-SHA-384(root key, info = "xdn/lkh/group/v1" ‖
  publisher ‖ concept ‖ e)`` (:func:`group_key_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdn import crypto
from xdn.errors import DecryptError, ProtocolError
from xdn.lkh._bytes import Reader, Writer, check_name, check_u64, label

__all__ = [
    "Enrolment",
    "MemberPath",
    "RekeyMessage",
    "WrappedKey",
    "group_key_of",
    "open_enrolment",
    "seal_path",
    "unwrap",
    "wrap",
]

_REKEY_MAGIC = b"XLR1"
_PATH_MAGIC = b"XLP1"
_ENROL_MAGIC = b"XLE1"
_NO_ROOT = 0  # node ids start at 1


def group_key_of(root_key: bytes, *, publisher: str, concept: str, epoch: int) -> bytes:
    """The group key of ``epoch``, derived from that epoch's root key."""
    return crypto.derive_key(root_key, info=label(b"xdn/lkh/group/v1", publisher, concept, epoch))


def _kek(
    child_key: bytes, publisher: str, concept: str, epoch: int, node: int, child: int
) -> bytes:
    info = label(b"xdn/lkh/wrap/v1", publisher, concept, epoch, node, child)
    return crypto.derive_key(child_key, info=info)


def wrap(
    key: bytes, *, under: bytes, publisher: str, concept: str, epoch: int, node: int, child: int
) -> bytes:
    """Wrap the new ``key`` of ``node`` under the key of its ``child`` (40 bytes)."""
    return crypto.key_wrap(_kek(under, publisher, concept, epoch, node, child), key)


def unwrap(
    wrapped: bytes, *, under: bytes, publisher: str, concept: str, epoch: int, node: int, child: int
) -> bytes:
    """Invert :func:`wrap`; raise :class:`DecryptError` if it does not open."""
    return crypto.key_unwrap(_kek(under, publisher, concept, epoch, node, child), wrapped)


@dataclass(frozen=True, slots=True, kw_only=True)
class WrappedKey:
    """The new key of ``node_id`` wrapped under the current key of its child ``wrapping_node_id``.

    Every wrapped key of a message belongs to a node created in the message's epoch.
    """

    node_id: int
    wrapping_node_id: int
    ciphertext: bytes

    def __post_init__(self) -> None:
        check_u64("node_id", self.node_id)
        check_u64("wrapping_node_id", self.wrapping_node_id)
        if self.node_id == 0 or self.wrapping_node_id == 0:
            raise ValueError("node ids start at 1")
        if not isinstance(self.ciphertext, bytes):
            raise TypeError("ciphertext must be bytes")
        if len(self.ciphertext) != crypto.WRAPPED_KEY_BYTES:
            raise ValueError(f"a wrapped key is {crypto.WRAPPED_KEY_BYTES} bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class RekeyMessage:
    """Epoch ``epoch`` of a group: the retired node ids and the new keys, wrapped bottom-up.

    ``root`` is the id of the epoch's root node (``None`` when the group has no members). A
    member deletes the retired keys it holds, unwraps in order every wrapped key whose
    wrapping node it holds, and derives the group key from the root key.
    """

    publisher: str
    concept: str
    epoch: int
    root: int | None
    retired: tuple[int, ...] = ()
    wraps: tuple[WrappedKey, ...] = ()

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        if check_u64("epoch", self.epoch) < 1:
            raise ValueError("epochs start at 1")
        if self.root is not None and check_u64("root", self.root) == 0:
            raise ValueError("node ids start at 1")
        for node in self.retired:
            check_u64("retired node id", node)
        if not all(isinstance(w, WrappedKey) for w in self.wraps):
            raise TypeError("wraps must be WrappedKey values")

    def to_bytes(self) -> bytes:
        """Canonical encoding (what to sign and what to put on the wire)."""
        out = Writer(_REKEY_MAGIC).text(self.publisher).text(self.concept).u64(self.epoch)
        out.u64(_NO_ROOT if self.root is None else self.root).u64(len(self.retired))
        for node in self.retired:
            out.u64(node)
        out.u64(len(self.wraps))
        for w in self.wraps:
            out.u64(w.node_id).u64(w.wrapping_node_id).blob(w.ciphertext)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> RekeyMessage:
        """Decode :meth:`to_bytes`; raise :class:`ProtocolError` if malformed."""
        inp = Reader(data, _REKEY_MAGIC)
        try:
            publisher, concept, epoch, root = inp.text(), inp.text(), inp.u64(), inp.u64()
            retired = tuple(inp.u64() for _ in range(inp.count(8)))
            wraps = tuple(
                WrappedKey(node_id=inp.u64(), wrapping_node_id=inp.u64(), ciphertext=inp.blob())
                for _ in range(inp.count(20))
            )
            inp.done()
            return cls(
                publisher=publisher,
                concept=concept,
                epoch=epoch,
                root=None if root == _NO_ROOT else root,
                retired=retired,
                wraps=wraps,
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed rekey message: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberPath:
    """One member's keys in epoch ``epoch``: ``(node id, key)`` from its leaf up to the root."""

    publisher: str
    concept: str
    epoch: int
    member: str
    keys: tuple[tuple[int, bytes], ...] = field(repr=False)

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        check_name("member", self.member)
        if check_u64("epoch", self.epoch) < 1:
            raise ValueError("epochs start at 1")
        if not self.keys:
            raise ValueError("a path holds at least the leaf key")
        for node, key in self.keys:
            if check_u64("node id", node) == 0:
                raise ValueError("node ids start at 1")
            if not isinstance(key, bytes) or len(key) != crypto.KEY_BYTES:
                raise ValueError("node keys are 32 bytes")
        if len({node for node, _ in self.keys}) != len(self.keys):
            raise ValueError("a path names each node once")

    @property
    def leaf(self) -> int:
        """The member's leaf node id."""
        return self.keys[0][0]

    @property
    def root(self) -> int:
        """The root node id of the epoch."""
        return self.keys[-1][0]

    def to_bytes(self) -> bytes:
        """Encoding (secret: only ever inside an HPKE seal or the member's own store)."""
        out = Writer(_PATH_MAGIC).text(self.publisher).text(self.concept).u64(self.epoch)
        out.text(self.member).u64(len(self.keys))
        for node, key in self.keys:
            out.u64(node).blob(key)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> MemberPath:
        """Decode :meth:`to_bytes`; raise :class:`ProtocolError` if malformed."""
        inp = Reader(data, _PATH_MAGIC)
        try:
            publisher, concept, epoch, member = inp.text(), inp.text(), inp.u64(), inp.text()
            keys = tuple((inp.u64(), inp.blob()) for _ in range(inp.count(12)))
            inp.done()
            return cls(publisher=publisher, concept=concept, epoch=epoch, member=member, keys=keys)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed member path: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Enrolment:
    """A :class:`MemberPath` sealed with HPKE to ``member``'s certificate key."""

    publisher: str
    concept: str
    epoch: int
    member: str
    sealed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        check_name("member", self.member)
        if check_u64("epoch", self.epoch) < 1:
            raise ValueError("epochs start at 1")
        if not isinstance(self.sealed, bytes):
            raise TypeError("sealed must be bytes")

    def to_bytes(self) -> bytes:
        """Wire encoding."""
        out = Writer(_ENROL_MAGIC).text(self.publisher).text(self.concept).u64(self.epoch)
        return out.text(self.member).blob(self.sealed).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Enrolment:
        """Decode :meth:`to_bytes`; raise :class:`ProtocolError` if malformed."""
        inp = Reader(data, _ENROL_MAGIC)
        try:
            publisher, concept, epoch, member = inp.text(), inp.text(), inp.u64(), inp.text()
            sealed = inp.blob()
            inp.done()
            return cls(
                publisher=publisher, concept=concept, epoch=epoch, member=member, sealed=sealed
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed enrolment: {exc}") from None


def _enrol_info(publisher: str, concept: str, epoch: int, member: str) -> bytes:
    return label(b"xdn/lkh/enrol/v1", publisher, concept, epoch, member)


def seal_path(path: MemberPath, public_key: crypto.PublicKey) -> Enrolment:
    """Seal ``path`` to its member's certificate ``public_key`` (HPKE, RFC 9180)."""
    info = _enrol_info(path.publisher, path.concept, path.epoch, path.member)
    return Enrolment(
        publisher=path.publisher,
        concept=path.concept,
        epoch=path.epoch,
        member=path.member,
        sealed=crypto.hpke_seal(public_key, path.to_bytes(), info=info),
    )


def open_enrolment(enrolment: Enrolment, private_key: crypto.PrivateKey) -> MemberPath:
    """Open an enrolment addressed to us; raise :class:`DecryptError` if it does not open.

    The HPKE ``info`` binds the header, and the opened path must repeat it exactly.
    """
    e = enrolment
    info = _enrol_info(e.publisher, e.concept, e.epoch, e.member)
    plain = crypto.hpke_open(private_key, e.sealed, info=info)
    try:
        path = MemberPath.from_bytes(plain)
    except ProtocolError:
        raise DecryptError() from None
    header = (path.publisher, path.concept, path.epoch, path.member)
    if header != (e.publisher, e.concept, e.epoch, e.member):
        raise DecryptError()
    return path
