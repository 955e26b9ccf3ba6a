"""Building a policy-change notice: the publisher's signed word of what a new policy version
changed for one subscriber (the content graph and the whole notice: :mod:`._policy_graph`)."""

from __future__ import annotations

from xdn.provenance import _vocab as v
from xdn.provenance._facts import PolicyChangeFacts, Signer
from xdn.provenance._message import Message, _check_args
from xdn.provenance._notice import one_hop
from xdn.provenance._policy_graph import policy_change_quads
from xdn.provenance._shape import policy_uri_prefix

__all__ = ["policy_notice"]


def policy_notice(
    signer: Signer, *, message_uri: str, change: PolicyChangeFacts, timestamp_ms: int
) -> Message:
    """Sign a policy-change notice saying ``change`` (``signer``: the publisher).

    Args:
        signer: the publisher (its key service).
        message_uri: below the publisher's policy space
            (:func:`~xdn.provenance.policy_notice_uri`).
        change: what the new version changed for the subscriber.
        timestamp_ms: when it is signed (milliseconds since the epoch).

    Raises:
        TypeError, ValueError: bad argument types or values.
        UsageError: ``message_uri`` is not below the signer's policy space.
    """
    if not isinstance(change, PolicyChangeFacts):
        raise TypeError("change must be PolicyChangeFacts")
    _check_args(signer, message_uri, None, timestamp_ms,
                prefix=policy_uri_prefix(signer.node_uri))
    return one_hop(signer, message_uri, policy_change_quads(message_uri, change),
                   kind=v.POLICY_NOTICE, timestamp_ms=timestamp_ms)
