"""Group keys by logical key hierarchy (LKH): O(log n) rekeying on join and on leave.

One group per (publisher, concept). The publisher's key service holds a
:class:`GroupController` per group: a binary tree whose leaves are the members, each node with
a random 32-byte key and an id that is never reused. A member holds the keys on the path from
its leaf to the root; the group key of epoch ``e`` is derived from the root key with HKDF and a
label naming publisher, concept and ``e``. Every batch of joins and leaves starts one new epoch
and retires (replaces with new nodes) every node on the union of the affected paths, once.

What travels (see ``docs/group-keys.md``):

* a :class:`RekeyMessage` per epoch, broadcast to anyone (members, former members,
  disseminators): retired node ids and every new node key wrapped under each child's key;
* an :class:`Enrolment` per joiner (and per :meth:`GroupController.path_refresh` for a member
  that missed epochs): its :class:`MemberPath` sealed with HPKE to its certificate key;
* with an enrolment, a :class:`DocumentKeyGrant`: the per-document keys of the publisher's
  retained recent documents, so a joiner can read those (and only those) earlier documents.

A member keeps a :class:`MemberKeys` and calls :meth:`MemberKeys.apply_rekey` per message.

Every one of these messages is signed by the key service with the publisher's certificate key
(:class:`KeySigner` gives a :class:`Signed` message) and travels with that certificate; a member
runs :func:`verify_key_message` before it lets a message touch its state, so a disseminator can
drop key messages but cannot forge, alter or relabel one.

Secrecy, as these words are used in xdn (the literature is not consistent: some authors say
"forward secrecy" for what follows is called backward secrecy here, and "forward secrecy" in
key exchange means something else again — that old *session* keys survive a later compromise of
long-term keys, which LKH does not address):

* **Backward secrecy** — a member that joins at epoch ``e`` cannot derive the group key of any
  epoch ``< e``. Every node on a joiner's path is created in the join epoch, so the joiner
  never holds a key that any earlier rekey message was wrapped under.
* **Forward secrecy** — a member that leaves before epoch ``e`` (its leave takes effect at
  some epoch ``≤ e``) cannot derive the group key of any epoch ``≥ e``, even if it keeps every
  key it ever held and reads every later message. Every node it ever held is retired by then,
  and later keys are wrapped only under nodes it never held.

Both hold against coalitions of former members and of members that joined later, as long as
no coalition member belongs to the group in the epoch concerned. Disseminators see every
rekey message and every enrolment but hold no member's private key, so they derive nothing.

Cost: a single leave of a member at depth ``d`` costs ``2(d - 1)`` wrapped keys, a single join
``2d + 1`` (``d`` the shallowest depth), and the controller keeps ``d ≤ ⌈log2 n⌉ + 1``, so a
leave stays within ``2⌈log2 n⌉`` (34 for 100,000 members) against ``n - 1`` for per-member
wrapping.
"""

from __future__ import annotations

from xdn.lkh._controller import GroupController
from xdn.lkh._epoch import Rand
from xdn.lkh._grants import DocumentKeyGrant, open_document_keys, seal_document_keys
from xdn.lkh._member import EpochGapError, MemberKeys
from xdn.lkh._messages import (
    Enrolment,
    MemberPath,
    RekeyMessage,
    WrappedKey,
    group_key_of,
    open_enrolment,
    seal_path,
)
from xdn.lkh._signed import KeySigner, Signed, signed_bytes, verify_key_message
from xdn.lkh._state import EpochChange, GroupHeader, NodeRow
from xdn.lkh._tree import ceil_log2

__all__ = [
    "DocumentKeyGrant",
    "Enrolment",
    "EpochChange",
    "EpochGapError",
    "GroupController",
    "GroupHeader",
    "KeySigner",
    "MemberKeys",
    "MemberPath",
    "NodeRow",
    "Rand",
    "RekeyMessage",
    "Signed",
    "WrappedKey",
    "ceil_log2",
    "group_key_of",
    "open_document_keys",
    "open_enrolment",
    "seal_document_keys",
    "seal_path",
    "signed_bytes",
    "verify_key_message",
]
