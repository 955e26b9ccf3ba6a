"""Publishers' policy-change notices at a site: checked on their way down, kept in the inbox.

Theory of operation. A publisher's key service sends a member whose grants a new policy
version changed its signed policy-change notice with the member's new entitlement
(``Entitlement.notice``, :mod:`xdn.policy_notices`). Every site on the path routes that
entitlement to the one subscriber (:meth:`disseminator.planning.Planner.addressed`), and before
it does it checks the notice (:meth:`SitePolicyNotices.check`):

* it verifies (:func:`xdn.policy_notices.read_policy_notice`: bounded, well-formed, a policy
  notice, Algorithm 2 under the certificate it carries against the CA and the CRL in force, the
  signer a publisher of the name it gives);
* it is about exactly that entitlement (:func:`xdn.policy_notices.check_accompanies`: the
  same publisher and publisher certificate, subscriber certificate and policy version; what it
  says was gained granted, what was lost not).

A notice that fails is refused without failing the entitlement: the entitlement goes on
without it, the refusal is counted (``xdn_policy_notices_refused{reason}``) and logged. One
that holds goes on with the entitlement and — when the site serves an LDN inbox — is stored as
a notification of the inbox (:meth:`SitePolicyNotices.notification`), in the transaction that
queues the entitlement (:meth:`disseminator.store.Store.commit_routing`): its statements the
notice's canonical N-Quads, its id one per subscriber certificate, publisher and policy version
(so an entitlement routed again adds none), sent by the publisher, readable by the subscriber,
the publisher, the sites on its path this site knows (the one it came from, this one, the
downlink it goes to), the site and auditors. Like receipts these are not counted against
``[web] inbox_notifications`` and go with the routed retention.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import Counter

from disseminator.notifications import StoredNotification
from xdn import certs, identity
from xdn.errors import PeerError
from xdn.linked_data import N_QUADS
from xdn.policy_notices import PolicyNotice, check_accompanies, read_policy_notice
from xdn.provenance import ChainVerifier
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["Checked", "SitePolicyNotices"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """An entitlement to route, and the verified notice it carries (``None``: none, or one
    refused: then ``entitlement`` is a copy without it)."""

    entitlement: pb.Entitlement
    notice: PolicyNotice | None = None


class SitePolicyNotices:
    """The checks of one site on the policy-change notices it routes.

    Args:
        site: this site's name.
        chains: the site's chain verifier (CA, and the CRL in force).
        refused: counts a refusal by reason (the error type).
    """

    def __init__(self, site: str, chains: ChainVerifier, refused: Counter) -> None:
        self._site = site
        self._chains = chains
        self._refused = refused

    def check(self, entitlement: pb.Entitlement, *, at: datetime) -> Checked:
        """``entitlement`` with its notice checked (see the module's docstring)."""
        if not entitlement.notice:
            return Checked(entitlement=entitlement)
        try:
            notice = read_policy_notice(entitlement.notice, self._chains, at=at)
            check_accompanies(
                notice, publisher=entitlement.publisher,
                publisher_certificate=entitlement.publisher_certificate,
                subscriber=identity.person(entitlement.subscriber),
                certificate=entitlement.certificate,
                policy_version=entitlement.policy_version, concepts=entitlement.concepts,
                conditional=entitlement.conditional,
            )
        except (PeerError, ValueError) as exc:
            self._refused.labels(reason=type(exc).__name__).inc()
            log.warning(
                "refused the policy-change notice of %s v%d for %s (the entitlement goes on "
                "without it): %s", entitlement.publisher, entitlement.policy_version,
                entitlement.subscriber, exc,
            )
            bare = pb.Entitlement()
            bare.CopyFrom(entitlement)
            bare.ClearField("notice")
            return Checked(entitlement=bare)
        return Checked(entitlement=entitlement, notice=notice)

    def notification(
        self, notice: PolicyNotice, *, path: frozenset[str], at_ms: int
    ) -> StoredNotification:
        """The inbox notification of a verified ``notice`` (``path``: the node URIs of the
        sites on its way this site knows)."""
        c = notice.change
        return StoredNotification(
            id=notice.notification_id, received_ms=at_ms, sender=notice.publisher.name,
            sender_fingerprint=notice.publisher.fingerprint, media_type=N_QUADS,
            nquads=notice.to_nquads(), policy=True,
            readers=frozenset({c.subscriber, certs.node_uri(c.publisher),
                               certs.node_uri(self._site), *path}),
        )
