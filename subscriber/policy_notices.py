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

A notice is shown once per publisher and policy version (a re-sent entitlement carries the
same notice again). Which were shown survives a restart: :func:`shown` reads them back from
``policy-notices.nq`` when the session starts — the file is the record, so nothing else has to
be kept in step with it. A line that does not parse (a crash in the middle of an append) is
skipped, as is a notice whose lines are incomplete: such a notice is shown again, and kept
whole, when it comes again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from xdn import certs, identity, provenance
from xdn.errors import ProvenanceError
from xdn.policy_notices import PolicyNotice, check_accompanies, read_policy_notice
from xdn.rdf import Quad, parse_nquads, serialise
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["POLICY_NOTICES", "read_notice", "shown"]

log = logging.getLogger(__name__)

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


def shown(path: Path) -> set[tuple[str, int]]:
    """The (publisher, policy version) of every notice kept in ``path`` (none: no file).

    The file is ours (each notice in it was verified before it was appended), so it is read
    back, not verified again; what does not read as a whole notice is skipped with a warning.
    """
    if not path.exists():
        return set()
    by_message: dict[str, list[Quad]] = defaultdict(list)
    skipped = 0
    for line in path.read_bytes().splitlines():
        try:
            for quad in parse_nquads(line):
                by_message[(quad.g.value if quad.g else "").split("#", 1)[0]].append(quad)
        except ProvenanceError:
            skipped += 1
    out = set()
    for quads in by_message.values():
        try:
            change = provenance.Message.from_nquads(serialise(quads)).policy_change
        except (ProvenanceError, ValueError):
            change = None
        if change is None:
            skipped += 1
            continue
        out.add((change.publisher, change.version))
    if skipped:
        log.warning("%s: skipped %d line(s) or notice(s) that do not read back", path, skipped)
    return out
