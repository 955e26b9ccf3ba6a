"""The policies one disseminator enforces: publisher → its current, validated policy.

A :class:`PolicySet` is immutable; every update returns a new set or raises, so a reload either
applies completely or not at all: :meth:`PolicySet.updated` validates the whole batch (one
policy per publisher, versions that grow, same ontology, not expired) before building anything.
"""

from __future__ import annotations

import types
from collections import abc
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from xdn.errors import PolicyError, UsageError
from xdn.ontology import Ontology
from xdn.policy._consistency import revalidate
from xdn.policy._evaluate import auth_list
from xdn.policy._model import Authorization, Policy

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["PolicySet"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PolicySet:
    """The policies a disseminator enforces: publisher → its current policy."""

    ontology: Ontology
    policies: abc.Mapping[str, Policy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for publisher, policy in self.policies.items():
            if policy.publisher != publisher:
                raise UsageError(f"policy of {policy.publisher!r} filed under {publisher!r}")
            if policy.ontology != self.ontology.iri:
                raise UsageError(f"policy {policy.source} is for another ontology")
        object.__setattr__(self, "policies", types.MappingProxyType(dict(self.policies)))

    @classmethod
    def of(cls, ontology: Ontology, policies: abc.Iterable[Policy]) -> PolicySet:
        """Build a set; two policies for one publisher are an error."""
        by_publisher: dict[str, Policy] = {}
        for policy in policies:
            if policy.publisher in by_publisher:
                raise PolicyError(f"{policy.source}: second policy for {policy.publisher!r}")
            by_publisher[policy.publisher] = policy
        return cls(ontology=ontology, policies=by_publisher)

    def _unchanged(self, policy: Policy) -> bool:
        """The same document as the one in force (a reload of an unchanged file)."""
        current = self.policies.get(policy.publisher)
        return (
            current is not None
            and bool(policy.digest)
            and (policy.version, policy.digest) == (current.version, current.digest)
        )

    def _check_newer(self, policy: Policy, at: datetime | None) -> None:
        current = self.policies.get(policy.publisher)
        if current is not None and policy.version <= current.version:
            raise PolicyError(
                f"{policy.source}: version {policy.version} of {policy.publisher!r}"
                f" does not supersede version {current.version}"
            )
        if policy.ontology != self.ontology.iri:
            raise PolicyError(f"{policy.source}: written for ontology {policy.ontology}")
        if at is not None and policy.expired(at):
            assert policy.valid_until is not None
            raise PolicyError(
                f"{policy.source}: policy expired at {policy.valid_until.isoformat()}"
            )

    def with_policy(self, policy: Policy, *, at: datetime | None = None) -> PolicySet:
        """A new set where ``policy`` replaces its publisher's; versions must increase.

        Raises:
            PolicyError: ``policy.version`` is not above the version in force (a replayed or
                rolled-back policy), or it is expired at ``at``.
        """
        return self.updated([policy], at=at)

    def updated(
        self,
        policies: abc.Iterable[Policy],
        *,
        remove: abc.Iterable[str] = (),
        at: datetime | None = None,
    ) -> PolicySet:
        """A new set with ``policies`` replacing their publishers' and ``remove`` dropped.

        All or nothing: the whole batch is validated before the new set is built. A policy
        identical to the one in force (same version and digest: an unchanged file read again)
        is skipped, so reloading every file is harmless.

        Raises:
            PolicyError: two policies for one publisher in the batch, a version that does not
                grow, another ontology, or an expired policy.
        """
        batch = [p for p in policies if not self._unchanged(p)]
        seen: set[str] = set()
        for policy in batch:
            if policy.publisher in seen:
                raise PolicyError(f"{policy.source}: second policy for {policy.publisher!r}")
            seen.add(policy.publisher)
            self._check_newer(policy, at)
        merged = {p: pol for p, pol in self.policies.items() if p not in set(remove)}
        merged.update((policy.publisher, policy) for policy in batch)
        return PolicySet(ontology=self.ontology, policies=merged)

    def with_ontology(self, ontology: Ontology) -> PolicySet:
        """The same policies re-validated against a new version of the ontology.

        Raises:
            PolicyError: a policy names a concept the new ontology lacks, or its rules no
                longer hold together (see :func:`~xdn.policy.check_rules`).
        """
        checked = [revalidate(policy, ontology) for policy in self.policies.values()]
        return PolicySet.of(ontology, checked)

    def authorizations(
        self,
        credential: Credential,
        at: datetime,
        *,
        disseminated: abc.Set[tuple[str, str]] = frozenset(),
        instances: abc.Mapping[str, abc.Mapping[str, int]] | None = None,
    ) -> dict[str, Authorization]:
        """:func:`auth_list` under every publisher's policy.

        ``instances`` is publisher → concept → document instances already received.
        """
        counts = instances or {}
        return {
            p: auth_list(
                credential,
                pol,
                self.ontology,
                at=at,
                disseminated=disseminated,
                instances=counts.get(p),
            )
            for p, pol in sorted(self.policies.items())
        }

    def auth_lists(
        self,
        credential: Credential,
        at: datetime,
        *,
        disseminated: abc.Set[tuple[str, str]] = frozenset(),
        instances: abc.Mapping[str, abc.Mapping[str, int]] | None = None,
    ) -> dict[str, frozenset[str]]:
        """Publisher → concepts ``credential`` may receive from that publisher."""
        found = self.authorizations(credential, at, disseminated=disseminated, instances=instances)
        return {publisher: a.concepts for publisher, a in found.items()}
