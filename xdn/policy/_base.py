"""The state of a :class:`~xdn.policy.PolicyEngine` and its read-only queries.

:class:`EngineBase` holds the policies, the compiled books (one per publisher), the registry of
live subscribers and the dissemination state, and answers questions about them: cached
``auth_list``, the reference explanation, a subscriber's grants. The operations that change
the state are in :mod:`xdn.policy._engine`.
"""

from __future__ import annotations

from collections import abc
from datetime import datetime
from typing import TYPE_CHECKING

from xdn.errors import UsageError
from xdn.ontology import Ontology
from xdn.policy._books import Book
from xdn.policy._compiled import CompiledPolicy, Decision, Interner, OntologyBits, ProfileKey
from xdn.policy._evaluate import auth_list, gate
from xdn.policy._model import Authorization, Policy
from xdn.policy._policyset import PolicySet
from xdn.policy._registry import Registry

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["Decide", "EngineBase"]

Decide = abc.Callable[[Book, ProfileKey], Decision]


class EngineBase:
    """The engine's state and its read-only queries (see :class:`PolicyEngine`)."""

    def __init__(
        self,
        policies: PolicySet,
        *,
        disseminated: abc.Set[tuple[str, str]] = frozenset(),
        at: datetime | None = None,
    ) -> None:
        if at is not None and at.tzinfo is None:
            raise UsageError("the engine needs timezone-aware times")
        self._set = policies
        self._bits = OntologyBits(policies.ontology)
        self._intern = Interner()
        self._sat = frozenset(disseminated)
        self._now = at
        self._books = {
            p: Book(CompiledPolicy(pol, self._bits, self._intern), dead=self._expired(pol))
            for p, pol in policies.policies.items()
        }
        self._live = Registry()
        self._evaluations = 0

    def _expired(self, policy: Policy) -> bool:
        """Whether ``policy`` is past its ``valid_until`` at the engine's instant."""
        return self._now is not None and policy.expired(self._now)

    def _instant(self, at: datetime | None) -> datetime | None:
        """The instant an operation at ``at`` works at: the engine's time never goes back."""
        if at is not None and at.tzinfo is None:
            raise UsageError("the engine needs timezone-aware times")
        if at is None or (self._now is not None and at < self._now):
            return self._now
        return at

    # ---- queries -------------------------------------------------------------------------
    @property
    def policies(self) -> PolicySet:
        """The policies in force."""
        return self._set

    @property
    def ontology(self) -> Ontology:
        """The ontology in force."""
        return self._set.ontology

    @property
    def disseminated(self) -> frozenset[tuple[str, str]]:
        """(publisher, concept) pairs disseminated so far."""
        return self._sat

    @property
    def now(self) -> datetime | None:
        """The latest instant the engine has been told of; its live state is for that instant.

        ``grants``, ``decision`` and every ChangeSet describe the state at this instant: a
        policy past its ``valid_until`` then, or a credential expired then, grants nothing.
        ``None`` until an operation with a time has been run (and no ``at`` was given).
        """
        return self._now

    @property
    def evaluations(self) -> int:
        """Decisions computed since construction (cache misses)."""
        return self._evaluations

    @property
    def subscribers(self) -> frozenset[str]:
        """The live subscribers."""
        return frozenset(self._live.members)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, subscriber: object) -> bool:
        return subscriber in self._live

    def _book(self, publisher: str | None) -> Book:
        if publisher is None:
            if len(self._books) != 1:
                raise UsageError("name the publisher: the engine holds several policies")
            return next(iter(self._books.values()))
        try:
            return self._books[publisher]
        except KeyError:
            raise UsageError(f"no policy of publisher {publisher!r} in force") from None

    def _decider(self, sat: abc.Set[tuple[str, str]]) -> Decide:
        def decide(book: Book, key: ProfileKey) -> Decision:
            found = book.results.get(key)
            if found is None:
                found = book.compiled.evaluate(key[0], sat, dict(key[1]))
                book.results[key] = found
                self._evaluations += 1
            return found

        return decide

    def auth_list(
        self,
        credential: Credential,
        at: datetime,
        *,
        publisher: str | None = None,
        instances: abc.Mapping[str, int] | None = None,
    ) -> Authorization:
        """Cached :func:`~xdn.policy.auth_list`, without explanation (see :meth:`explain`).

        Args:
            credential: any credential (it need not be subscribed).
            at: evaluation time (timezone-aware).
            publisher: whose policy; may be omitted when only one is in force.
            instances: concept → document instances its holder has received.
        """
        book = self._book(publisher)
        refusal = gate(credential, book.compiled.policy, self.ontology, at)
        if refusal is not None:
            return Authorization(publisher=book.publisher, concepts=frozenset(), notes=(refusal,))
        key = (book.compiled.match(credential), book.compiled.instance_key(instances))
        return self._decider(self._sat)(book, key).authorization()

    def auth_lists(self, credential: Credential, at: datetime) -> dict[str, frozenset[str]]:
        """Publisher → concepts ``credential`` may receive (cached)."""
        return {
            p: self.auth_list(credential, at, publisher=p).concepts for p in sorted(self._books)
        }

    def explain(
        self,
        credential: Credential,
        at: datetime,
        *,
        publisher: str | None = None,
        instances: abc.Mapping[str, int] | None = None,
    ) -> Authorization:
        """The reference :func:`~xdn.policy.auth_list`, with its full explanation."""
        policy = self._book(publisher).compiled.policy
        return auth_list(
            credential, policy, self.ontology, at=at, disseminated=self._sat, instances=instances
        )

    def decision(self, subscriber: str, publisher: str) -> Authorization:
        """A live subscriber's current decision under one publisher (with its limits)."""
        self._live.get(subscriber)
        book = self._book(publisher)
        if book.dead:
            return Authorization(publisher=publisher, concepts=frozenset())
        return book.results[book.key_of[subscriber]].authorization()

    def grants(self, subscriber: str) -> dict[str, frozenset[str]]:
        """Publisher → concepts a live subscriber currently holds."""
        self._live.get(subscriber)
        return {
            p: b.results[b.key_of[subscriber]].concepts if not b.dead else frozenset()
            for p, b in sorted(self._books.items())
        }

    def instances(self, subscriber: str, publisher: str) -> dict[str, int]:
        """Document instances per concept a live subscriber has received from ``publisher``."""
        return dict(self._live.get(subscriber).instances.get(publisher, {}))

    def _joined(self, fresh: abc.Set[int]) -> dict[frozenset[int], set[str]]:
        """Live subscribers satisfying condition sets among ``fresh``, grouped by which."""
        found = {cid: self._live.matching(self._intern.conditions[cid]) for cid in sorted(fresh)}
        found = {cid: members for cid, members in found.items() if members}
        if len(found) <= 1:
            return {frozenset({cid}): members for cid, members in found.items()}
        each: dict[str, list[int]] = {}
        for cid, members in found.items():
            for subscriber in members:
                each.setdefault(subscriber, []).append(cid)
        groups: dict[frozenset[int], set[str]] = {}
        for subscriber, cids in each.items():
            groups.setdefault(frozenset(cids), set()).add(subscriber)
        return groups
