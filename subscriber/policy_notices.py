"""A publisher's policy-change notice, as the subscriber it concerns checks and shows it.

Theory of operation. A publisher's new policy version that changes what it grants us comes as
our new signed entitlement with the publisher's signed policy-change notice beside it
(``Entitlement.notice``, :mod:`xdn.policy_notices`). The subscriber takes nothing on its
site's word: once the entitlement itself is verified (signed by its publisher under the CA,
for our certificate), :func:`read_notice` verifies the notice (Algorithm 2 under the
certificate it carries, checked against the CA and the CRL in force; signed by a publisher of
the name it gives) and checks that it is for us (our node URI and certificate) and consistent
with that entitlement (same publisher certificate and policy version, what it says we gained
granted, what we lost not). The session then prints its one line for a person and keeps the
notice, canonical N-Quads, in ``policy-notices.nq`` of its output directory
(:data:`POLICY_NOTICES`) — not in its provenance log, which holds the subscriber's own hops
only (:class:`xdn.provenance.ProvenanceLog`): the notice is the publisher's hop, and the
publisher's log holds it for the audit — or refuses it as it refuses a bad entitlement
(``entitlement`` kind: printed, recorded, signed as a failure notice).
"""

from __future__ import annotations

from datetime import datetime

from xdn import certs, identity, provenance
from xdn.policy_notices import PolicyNotice, check_accompanies, read_policy_notice
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["POLICY_NOTICES", "read_notice"]

#: The file of the output directory the verified notices are appended to (N-Quads).
POLICY_NOTICES = "policy-notices.nq"


def read_notice(
    entitlement: pb.Entitlement,
    chains: provenance.ChainVerifier,
    *,
    me: certs.Credential,
    at: datetime,
) -> PolicyNotice:
    """The verified notice that came with our verified ``entitlement``.

    Raises:
        PeerError: it does not verify, is not for ``me``, or does not match the entitlement.
    """
    notice = read_policy_notice(entitlement.notice, chains, at=at)
    check_accompanies(
        notice, publisher=entitlement.publisher,
        publisher_certificate=entitlement.publisher_certificate,
        subscriber=identity.person(me.member_id), certificate=me.fingerprint,
        policy_version=entitlement.policy_version, concepts=entitlement.concepts,
        conditional=entitlement.conditional,
    )
    return notice
