"""The policy engine a disseminator runs: cached decisions and incremental re-evaluation.

Theory of operation
-------------------
A :class:`PolicyEngine` holds the ontology, the :class:`~xdn.policy.PolicySet` in force, the
dissemination state (which (publisher, concept) pairs have been disseminated; per subscriber
and publisher, how many document instances of each concept it has received) and the live
subscriptions. It does no I/O and reads no clock: every operation that depends on time takes
``at``. It is not thread-safe; the daemon drives it from its one event loop.

*Profiles and the cache.* Per publisher, a credential's *profile* is the set of that policy's
condition sets it satisfies, plus its instance counts clipped to the policy's
separation-of-duty bounds (:mod:`xdn.policy._compiled`). The decision is a function of the
profile alone, so it is computed once per profile and policy version and shared by every
subscriber with that profile: ``auth_list`` on a known profile is a few dictionary reads.

*Incremental re-evaluation.* A decision depends only on the rules attached to the condition
sets in the profile. When a policy changes, only condition sets of rules that were added,
removed or edited (for an ontology change: whose cover changed; for a dissemination: whose
``after`` became true) can change a decision. Live subscribers are kept grouped by profile: a
group whose profile holds none of those condition sets keeps its decision untouched; a group
that does is re-evaluated once; subscribers that satisfy a condition set new to the policy
(found through the registry's attribute postings) or whose separation-of-duty bounds changed
are re-profiled one by one (:func:`xdn.policy._books.rebuild`). Every operation builds the new
state aside and swaps it in at the end, so a refused update leaves the engine as it was.

Every mutating operation returns a :class:`~xdn.policy.ChangeSet`: who gained and who lost
which concepts.

*Time and expiry.* The engine's live state is for one instant, :attr:`PolicyEngine.now`: the
latest time any operation was given (it never goes back; an earlier ``at`` is taken as
``now``). Every operation that takes a time first moves ``now`` there and processes expiry
(:meth:`PolicyEngine.advance`): credentials expired by then are unsubscribed, and a policy
past its ``valid_until`` stops granting — its book is *dead* and stays dead, through
re-validations on a new ontology and reloads of the same file, until a newer version is
applied. So ``subscribe`` after ``valid_until`` grants nothing even before the daemon's timer
calls ``advance``, and the ChangeSet it returns also holds the losses that expiry caused.
Operations without a time (deliveries, disseminations) work at ``now``. Queries
(``auth_list``, ``explain``) evaluate at the time they are given and change nothing.
"""

from __future__ import annotations

from collections import abc
from datetime import datetime
from typing import TYPE_CHECKING

from xdn.errors import UsageError
from xdn.ontology import Ontology
from xdn.policy._base import Decide, EngineBase
from xdn.policy._books import Book, Rebuilt, Transitions, rebuild
from xdn.policy._changes import Change, ChangeSet, Reason
from xdn.policy._compiled import CompiledPolicy, ConceptSet, OntologyBits, ProfileKey
from xdn.policy._model import Policy
from xdn.policy._policyset import PolicySet

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["PolicyEngine"]

Update = Policy | PolicySet | Ontology | abc.Iterable[Policy]


class PolicyEngine(EngineBase):
    """Cached ``auth_list`` and incremental re-evaluation of live subscriptions.

    Args:
        policies: the policies in force (and their ontology).
        disseminated: (publisher, concept) pairs already disseminated.
        at: the engine's starting instant (see :attr:`now`); policies already expired then
            grant nothing.
    """

    # ---- subscriptions -------------------------------------------------------------------
    def subscribe(self, subscriber: str, credential: Credential, *, at: datetime) -> ChangeSet:
        """Register a live subscription; the ChangeSet says what it gained.

        Expiry up to ``at`` is processed first (see the module doc); its losses, if any, come
        first in the ChangeSet.

        Raises:
            UsageError: already subscribed, or the credential is not valid at ``at``.
        """
        when = self._instant(at)
        assert when is not None
        if subscriber in self._live:
            raise UsageError(f"{subscriber!r} is already subscribed")
        if not credential.valid_at(when):
            raise UsageError(f"credential of {subscriber!r} is not valid at {when.isoformat()}")
        expiry = self.advance(when)
        before = self._evaluations
        decide = self._decider(self._sat)
        self._live.add(subscriber, credential)
        changes: list[Change] = []
        for publisher, book in sorted(self._books.items()):
            key = (book.compiled.match(credential), ())
            decision = decide(book, key)
            book.add(subscriber, key)
            if decision.granted and not book.dead:
                gained = ConceptSet(self._bits, decision.granted)
                changes.append(_change(publisher, subscriber, gained, "subscribe"))
        return expiry + ChangeSet(
            changes=tuple(changes),
            reevaluated=len(self._books),
            evaluations=self._evaluations - before,
        )

    def unsubscribe(self, subscriber: str, *, reason: Reason = "unsubscribe") -> ChangeSet:
        """Forget a live subscription; the ChangeSet says what it lost."""
        self._live.get(subscriber)
        changes: list[Change] = []
        for publisher, book in sorted(self._books.items()):
            if book.granted(subscriber):
                lost = ConceptSet(self._bits, book.granted(subscriber))
                changes.append(_change(publisher, subscriber, lost, reason, gained=False))
            book.remove(subscriber)
        self._live.remove(subscriber)
        return ChangeSet(changes=tuple(changes))

    # ---- policy and ontology changes -----------------------------------------------------
    def apply(self, update: Update, *, at: datetime | None = None) -> ChangeSet:
        """Put a new policy, policy set or ontology in force; all or nothing.

        Args:
            update: one new policy version; several (one per publisher); a whole
                :class:`PolicySet` (publishers missing from it are removed); or a new version
                of the ontology (every policy is re-validated against it).
            at: the instant of the update (default: :attr:`now`); new policies already expired
                then are refused, and expiry up to it is processed first (its losses come
                first in the ChangeSet). A policy already in force that has expired stays
                without effect, whatever is reloaded, until a newer version replaces it.

        Raises:
            PolicyError: a version that does not grow, another ontology, an expired policy,
                or a policy the new ontology invalidates; the engine is left unchanged.
        """
        when = self._instant(at)
        if isinstance(update, Ontology):
            target = self._set.with_ontology(update)
        elif isinstance(update, PolicySet):
            current = self._set.policies
            fresh = [p for k, p in update.policies.items() if current.get(k) is not p]
            target = self._set.updated(fresh, remove=set(current) - set(update.policies), at=when)
            if update.ontology is not self.ontology:
                target = target.with_ontology(update.ontology)
        elif isinstance(update, Policy):
            target = self._set.with_policy(update, at=when)
        else:
            target = self._set.updated(list(update), at=when)
        expiry = self.advance(when) if when is not None else ChangeSet()
        return expiry + self._transition(target)

    def _transition(self, target: PolicySet) -> ChangeSet:
        before = self._evaluations
        new_ontology = target.ontology is not self.ontology
        bits = OntologyBits(target.ontology, self._bits) if new_ontology else self._bits
        decide = self._decider(self._sat)
        books: dict[str, Book] = {}
        changes: list[Change] = []
        reevaluated = 0
        for publisher in sorted(set(self._books) | set(target.policies)):
            old, policy = self._books.get(publisher), target.policies.get(publisher)
            if policy is None:
                assert old is not None
                changes += old.everyone_loses("policy", bits)
                continue
            if old is not None and old.compiled.policy is policy and not new_ontology:
                books[publisher] = old
                continue
            compiled = CompiledPolicy(policy, bits, self._intern)
            if self._expired(policy):  # re-validated on a new ontology, but still expired
                if old is not None:
                    changes += old.everyone_loses("expiry", bits)
                books[publisher] = Book(compiled, dead=True)
                continue
            done = self._rebuild(old, compiled, target.ontology, decide)
            books[publisher] = done.book
            changes += done.changes
            reevaluated += done.reevaluated
        self._set, self._bits, self._books = target, bits, books
        return ChangeSet(
            changes=tuple(changes),
            reevaluated=reevaluated,
            evaluations=self._evaluations - before,
        )

    def _rebuild(
        self, old: Book | None, compiled: CompiledPolicy, ontology: Ontology, decide: Decide
    ) -> Rebuilt:
        reason: Reason = "ontology" if ontology is not self.ontology else "policy"
        publisher = compiled.policy.publisher
        changed: set[int] = set()
        joined: dict[frozenset[int], set[str]] = {}
        recount: set[str] = set()
        if old is None or old.dead:
            recount = set(self._live.members)
        else:
            before, after = set(old.compiled.policy.rules), set(compiled.policy.rules)
            edited = before ^ after
            if ontology is not self.ontology:
                edited |= {
                    r for r in before & after if r.covers(self.ontology) != r.covers(ontology)
                }
            changed = {self._intern(r.when) for r in edited}
            joined = self._joined(compiled.cond_ids - old.compiled.cond_ids)
            recapped = 0
            for cover, _limit in set(old.compiled.limited) ^ set(compiled.limited):
                recapped |= cover
            if recapped:
                recount = self._live.holders(publisher, compiled.bits.names_of(recapped))
        members = self._live.members

        def profile(subscriber: str) -> ProfileKey:
            member = members[subscriber]
            counts = member.instances.get(publisher)
            return (compiled.match(member.credential), compiled.instance_key(counts))

        return rebuild(
            old,
            compiled,
            changed=changed,
            joined=joined,
            recount=recount,
            profile=profile,
            decide=decide,
            reason=reason,
        )

    # ---- dissemination state and time ----------------------------------------------------
    def record_delivery(
        self, subscriber: str, publisher: str, concepts: abc.Iterable[str]
    ) -> ChangeSet:
        """Count one document instance of each of ``concepts`` delivered to ``subscriber``.

        Separation of duty: when a ``max_instances`` budget is spent, the ChangeSet says
        which concepts the subscriber lost.
        """
        counts = self._live.count(subscriber, publisher, concepts)
        book = self._books.get(publisher)
        if book is None or book.dead:
            return ChangeSet()
        old_key = book.key_of[subscriber]
        key = (old_key[0], book.compiled.instance_key(counts))
        if key == old_key:
            return ChangeSet()
        before = self._evaluations
        old = book.granted(subscriber)
        self._decider(self._sat)(book, key)
        book.remove(subscriber)
        book.add(subscriber, key)
        moves = Transitions()
        moves.add(old, book.granted(subscriber), {subscriber})
        return ChangeSet(
            changes=tuple(moves.changes(publisher, "delivery", self._bits)),
            reevaluated=1,
            evaluations=self._evaluations - before,
        )

    def mark_disseminated(self, publisher: str, concepts: abc.Iterable[str]) -> ChangeSet:
        """Record that ``concepts`` of ``publisher`` have been disseminated (temporal rules)."""
        fresh = {(publisher, c) for c in concepts} - self._sat
        if not fresh:
            return ChangeSet()
        sat = self._sat | fresh
        before = self._evaluations
        decide = self._decider(sat)
        books: dict[str, Book] = {}
        result = ChangeSet()
        for name, book in self._books.items():
            rules = book.compiled.policy.rules
            edited = [r for r in rules if any((a.publisher, a.concept) in fresh for a in r.after)]
            if not edited or book.dead:
                books[name] = book
                continue
            done = rebuild(
                book,
                book.compiled,
                changed={self._intern(r.when) for r in edited},
                joined={},
                recount=frozenset(),
                profile=_no_movers,
                decide=decide,
                reason="dissemination",
            )
            books[name] = done.book
            result += ChangeSet(changes=tuple(done.changes), reevaluated=done.reevaluated)
        self._sat, self._books = sat, books
        return result + ChangeSet(evaluations=self._evaluations - before)

    def advance(self, at: datetime) -> ChangeSet:
        """Move :attr:`now` to ``at`` (if later) and process expiry there.

        A subscriber whose credential expired is unsubscribed (losing everything); a policy
        past its ``valid_until`` stops granting (its subscribers lose its concepts) until a
        newer version is applied. Every operation with a time calls this first.
        """
        when = self._instant(at)
        assert when is not None
        self._now = at = when
        result = ChangeSet()
        for subscriber in self._live.expired(at):
            result += self.unsubscribe(subscriber, reason="expiry")
        for publisher, book in sorted(self._books.items()):
            if not book.dead and book.compiled.policy.expired(at):
                lost = book.everyone_loses("expiry", self._bits)
                result += ChangeSet(changes=tuple(lost))
                dead = Book(book.compiled, dead=True)
                dead.results, dead.members, dead.key_of = book.results, book.members, book.key_of
                self._books[publisher] = dead
        return result


def _change(
    publisher: str,
    subscriber: str,
    concepts: ConceptSet,
    reason: Reason,
    *,
    gained: bool = True,
) -> Change:
    nothing: frozenset[str] = frozenset()
    return Change(
        publisher=publisher,
        subscribers=frozenset({subscriber}),
        gained=concepts if gained else nothing,
        lost=nothing if gained else concepts,
        reason=reason,
    )


def _no_movers(subscriber: str) -> ProfileKey:
    raise AssertionError(f"unexpected mover {subscriber}")
