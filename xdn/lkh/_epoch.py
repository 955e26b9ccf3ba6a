"""From a planned tree shape to an epoch change: fresh keys, wrapped keys, joiners' paths.

:func:`make_change` gives every node the shape creates a fresh key from ``rand``, wraps each
new key under each child that needs it (bottom-up, the order members unwrap in), collects each
joiner's path (all of it new) and derives the new group key. It reads the current tree and
changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from xdn import crypto
from xdn.errors import UsageError
from xdn.lkh._messages import MemberPath, RekeyMessage, WrappedKey, group_key_of, wrap
from xdn.lkh._state import EpochChange, GroupHeader, NodeRow
from xdn.lkh._tree import Node, Shape

__all__ = ["Rand", "fresh_key", "make_change"]

Rand = Callable[[int], bytes]
"""A source of random bytes: ``rand(n)`` returns ``n`` bytes (``os.urandom`` by default)."""


def fresh_key(rand: Rand) -> bytes:
    """A 32-byte key from ``rand`` (raises :class:`UsageError` if it returns anything else)."""
    key = rand(crypto.KEY_BYTES)
    if not isinstance(key, bytes) or len(key) != crypto.KEY_BYTES:
        raise UsageError("rand(n) must return n bytes")
    return key


def make_change(
    base: GroupHeader,
    nodes: Mapping[int, Node],
    shape: Shape,
    *,
    joins: Sequence[str],
    leaves: Sequence[str],
    rand: Rand,
) -> EpochChange:
    """The change that moves the group from header ``base`` to ``shape`` (see module doc)."""
    fresh = {node_id: fresh_key(rand) for node_id, _ in shape.joiners}
    fresh.update((m.node_id, fresh_key(rand)) for m in shape.merges)
    lone = fresh_key(rand) if shape.root is None else None
    header = GroupHeader(
        publisher=base.publisher,
        concept=base.concept,
        epoch=base.epoch + 1,
        root=shape.root,
        next_id=shape.next_id,
        lone_key=lone,
    )

    def key_of(node_id: int) -> bytes:
        return fresh[node_id] if node_id in fresh else nodes[node_id].key

    root_key = lone if shape.root is None else key_of(shape.root)
    assert root_key is not None
    return EpochChange(
        base_epoch=base.epoch,
        header=header,
        added=tuple(NodeRow(node_id=n, key=fresh[n], member=m) for n, m in shape.joiners)
        + tuple(
            NodeRow(node_id=m.node_id, key=fresh[m.node_id], left=m.left, right=m.right)
            for m in shape.merges
        ),
        retired=shape.retired,
        joined=tuple(joins),
        departed=tuple(leaves),
        message=RekeyMessage(
            publisher=header.publisher,
            concept=header.concept,
            epoch=header.epoch,
            root=shape.root,
            retired=shape.retired,
            wraps=_wraps(header, shape, fresh, key_of),
        ),
        paths=_joiner_paths(header, shape, fresh),
        group_key=group_key_of(
            root_key, publisher=header.publisher, concept=header.concept, epoch=header.epoch
        ),
    )


def _wraps(
    header: GroupHeader, shape: Shape, fresh: Mapping[int, bytes], key_of: Callable[[int], bytes]
) -> tuple[WrappedKey, ...]:
    return tuple(
        WrappedKey(
            node_id=node,
            wrapping_node_id=child,
            ciphertext=wrap(
                fresh[node],
                under=key_of(child),
                publisher=header.publisher,
                concept=header.concept,
                epoch=header.epoch,
                node=node,
                child=child,
            ),
        )
        for node, child in shape.wrap_edges()
    )


def _joiner_paths(
    header: GroupHeader, shape: Shape, fresh: Mapping[int, bytes]
) -> tuple[MemberPath, ...]:
    parent = {c: m.node_id for m in shape.merges for c in (m.left, m.right)}
    paths = []
    for leaf, member in shape.joiners:
        chain = [leaf]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        paths.append(
            MemberPath(
                publisher=header.publisher,
                concept=header.concept,
                epoch=header.epoch,
                member=member,
                keys=tuple((n, fresh[n]) for n in chain),
            )
        )
    return tuple(paths)
