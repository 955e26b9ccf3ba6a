"""Completeness a subscriber checks for itself: the publisher's signed sequence and its gaps.

A dishonest site can drop a document, or a concept of one, and say nothing. What a subscriber
relies on must be checkable by the subscriber, so the publisher signs what completeness means:

* every manifest carries the document's sequence number and, per concept, the number of the
  publisher's previous document holding it (:class:`xdn.codec.Sequencing`): per concept a
  signed chain a subscriber granted the concept can follow without seeing other documents;
* the publisher's signed :class:`Checkpoint` names each chain's head, so withholding the newest
  documents shows too, and its age bounds how long a subscriber can be kept in the dark;
* the publisher's signed :class:`Entitlement` says what its policy grants a member's
  certificate whatever the sites observe, so a site reporting or delivering less shows;
* :class:`GapTracker` (pure) follows the chains of the concepts a subscriber is granted and
  says which documents are missing: the subscriber asks its site to replay them, and reports
  those it cannot get.
"""

from __future__ import annotations

from xdn.completeness._checkpoint import Checkpoint, SignedCheckpoint, sign_checkpoint
from xdn.completeness._entitlement import (
    Entitlement,
    SignedEntitlement,
    entitlement_of,
    sign_entitlement,
    stateful_concepts,
)
from xdn.completeness._tracker import Gap, GapTracker

__all__ = [
    "Checkpoint",
    "Entitlement",
    "Gap",
    "GapTracker",
    "SignedCheckpoint",
    "SignedEntitlement",
    "entitlement_of",
    "sign_checkpoint",
    "sign_entitlement",
    "stateful_concepts",
]
