"""Ontology-based authorization policies: documents, validation, signing and the engine.

Theory of operation
-------------------
A policy is a TOML document an administrator edits and the publisher signs (``policies/``)::

    [policy]
    publisher = "qa-company"          # CN of the publisher certificate
    version = 1                       # must grow with every signed revision
    ontology = "http://xdn.example.org/ontology/production"

    [[rule]]
    id = "R2"
    effect = "grant"                  # or "deny"
    concept = "QualityInspection"
    inherit = true                    # R1 of the paper: the whole maximum conceptual block
    requires = "ResourceDetails"      # R2 of the paper: only if ResourceDetails is granted too
    when = { subject = { OU = "Cred2" } }

Optional rule keys: ``description``; ``after = { concept = "C", publisher = "P" }`` (temporal,
paper §V: the rule applies only once C of publisher P has been disseminated, ``publisher``
defaulting to this policy's); ``max_instances = N`` (separation of duty, paper §V: at most N
document instances of the granted concepts; reported in :attr:`Authorization.limits` for the
disseminator to count). ``when`` holds ``subject`` / ``issuer`` tables (field = value or list
of accepted values) and ``role``; every condition given must hold.

:func:`auth_list` is a pure function of (credential, policy, ontology, time, disseminated
concepts). It computes the least fixed point of the grant rules whose conditions match, with
implications evaluated against what is already granted, and removes every concept a matching
deny rule covers: deny always wins, also over implications that depended on a denied concept.
A credential outside its validity period gets nothing. Every decision is recorded as a
:class:`Grant` so ``xdn policy explain`` can say which rule gave or took which concept through
which containment path.

A policy file travels with a detached ``<file>.sig``: base64 of an ECDSA P-384 signature over
the exact file bytes. :func:`verify_policy_file` returns the verified bytes so that callers
parse exactly what was verified.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import tomllib
import types
from collections import abc
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import networkx as nx

from xdn import crypto
from xdn.errors import PolicyError, SignatureError, UsageError
from xdn.ontology import Ontology

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = [
    "After",
    "Authorization",
    "Condition",
    "Effect",
    "Grant",
    "Policy",
    "PolicySet",
    "Rule",
    "auth_list",
    "load_policy",
    "load_signed_policy",
    "parse_policy",
    "sign_policy",
    "signature_path",
    "verify_policy_file",
]

Effect = Literal["grant", "deny"]

NAME_FIELDS = frozenset(
    {"CN", "O", "OU", "C", "ST", "L", "title", "businessCategory", "emailAddress"}
)
_OID = re.compile(r"\d+(\.\d+)+")
_POLICY_KEYS = frozenset({"publisher", "version", "ontology", "description"})
_RULE_KEYS = frozenset(
    {
        "id",
        "effect",
        "concept",
        "inherit",
        "requires",
        "when",
        "after",
        "max_instances",
        "description",
    }
)
_REQUIRED_RULE_KEYS = ("id", "effect", "concept", "when")
_WHEN_KEYS = frozenset({"subject", "issuer", "role"})
ROLES = frozenset({"site", "publisher", "subscriber"})

Fields = tuple[tuple[str, frozenset[str]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """Conditions on a credential; all given ones must hold (exact, case-sensitive match)."""

    subject: Fields = ()
    issuer: Fields = ()
    roles: frozenset[str] = frozenset()

    def matches(self, credential: Credential) -> bool:
        """Whether ``credential`` satisfies every condition."""
        if self.roles and credential.role not in self.roles:
            return False
        return all(credential.subject.get(k) in v for k, v in self.subject) and all(
            credential.issuer.get(k) in v for k, v in self.issuer
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class After:
    """Temporal precondition: ``concept`` of ``publisher`` has been disseminated."""

    publisher: str
    concept: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One policy rule (see the module docstring for the keys)."""

    id: str
    effect: Effect
    concept: str
    inherit: bool = False
    requires: tuple[str, ...] = ()
    when: Condition = field(default_factory=Condition)
    after: tuple[After, ...] = ()
    max_instances: int | None = None
    description: str = ""

    def covers(self, ontology: Ontology) -> frozenset[str]:
        """Concepts this rule grants or denies: the block with ``inherit``, else the concept."""
        return ontology.block(self.concept) if self.inherit else frozenset({self.concept})


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A validated policy document of one publisher."""

    publisher: str
    version: int
    ontology: str
    rules: tuple[Rule, ...]
    source: str = "<policy>"
    description: str = ""
    digest: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """One decision: ``rule`` granted (or denied) ``concept``.

    Attributes:
        via: containment path from the rule's concept down to ``concept``.
        because: concepts an implication (``requires``) depended on.
    """

    rule: str
    effect: Effect
    concept: str
    via: tuple[str, ...]
    because: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Authorization:
    """The closure ``auth_list(u)`` for one credential under one publisher's policy.

    Attributes:
        concepts: the concepts granted (after denies).
        explain: every decision: denies first, then grants in the order they were derived.
        denied: concepts removed by deny rules.
        limits: separation-of-duty bounds (concept, max document instances), sorted.
        notes: why a rule did not apply (validity, unmet implication or temporal condition).
    """

    publisher: str
    concepts: frozenset[str]
    explain: tuple[Grant, ...] = ()
    denied: frozenset[str] = frozenset()
    limits: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- loading


def _rule_line(text: str, rule_id: object) -> str:
    pattern = re.compile(rf"""^\s*id\s*=\s*["']{re.escape(str(rule_id))}["']""", re.M)
    found = pattern.search(text)
    return f":{text.count(chr(10), 0, found.start()) + 1}" if found else ""


class _Ctx:
    """Error formatting for one file: ``file[:line]: rule ID: message``."""

    def __init__(self, source: str, text: str) -> None:
        self.source, self.text = source, text

    def fail(self, message: str, rule: object = None) -> PolicyError:
        if rule is None:
            return PolicyError(f"{self.source}: {message}")
        return PolicyError(f"{self.source}{_rule_line(self.text, rule)}: rule {rule}: {message}")


def _strings(value: Any, what: str, ctx: _Ctx, rule: object) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise ctx.fail(f"{what} must be a non-empty string or list of strings", rule)
    return tuple(items)


def _fields(value: Any, what: str, ctx: _Ctx, rule: object) -> Fields:
    if not isinstance(value, dict) or not value:
        raise ctx.fail(f"when.{what} must be a table of field = value", rule)
    out = []
    for key, accepted in sorted(value.items()):
        if key not in NAME_FIELDS and not _OID.fullmatch(key):
            known = ", ".join(sorted(NAME_FIELDS))
            raise ctx.fail(f"unknown {what} field {key!r} (use {known} or a dotted OID)", rule)
        out.append((key, frozenset(_strings(accepted, f"when.{what}.{key}", ctx, rule))))
    return tuple(out)


def _condition(value: Any, ctx: _Ctx, rule: object) -> Condition:
    if not isinstance(value, dict) or not value:
        raise ctx.fail("'when' must be a non-empty table (subject, issuer, role)", rule)
    unknown = sorted(set(value) - _WHEN_KEYS)
    if unknown:
        raise ctx.fail(f"unknown key(s) in 'when': {', '.join(unknown)}", rule)
    return Condition(
        subject=_fields(value["subject"], "subject", ctx, rule) if "subject" in value else (),
        issuer=_fields(value["issuer"], "issuer", ctx, rule) if "issuer" in value else (),
        roles=_roles(value["role"], ctx, rule) if "role" in value else frozenset(),
    )


def _roles(value: Any, ctx: _Ctx, rule: object) -> frozenset[str]:
    roles = frozenset(_strings(value, "when.role", ctx, rule))
    if not roles <= ROLES:
        raise ctx.fail(f"when.role must be among {', '.join(sorted(ROLES))}", rule)
    return roles


def _concept(ref: Any, ontology: Ontology, ctx: _Ctx, rule: object) -> str:
    name = ontology.resolve(ref) if isinstance(ref, str) else None
    if name is None:
        raise ctx.fail(f"unknown concept {ref!r} (not in ontology {ontology.iri})", rule)
    return name


def _after(
    value: Any, publisher: str, ontology: Ontology, ctx: _Ctx, rid: object
) -> tuple[After, ...]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if (
            not isinstance(item, dict)
            or "concept" not in item
            or set(item) - {"concept", "publisher"}
        ):
            raise ctx.fail("'after' must be a table { concept = ..., publisher = ... }", rid)
        who = item.get("publisher", publisher)
        if not isinstance(who, str) or not who:
            raise ctx.fail("after.publisher must be a non-empty string", rid)
        out.append(After(publisher=who, concept=_concept(item["concept"], ontology, ctx, rid)))
    return tuple(out)


def _rule(raw: Any, index: int, publisher: str, ontology: Ontology, ctx: _Ctx) -> Rule:
    if not isinstance(raw, dict):
        raise ctx.fail(f"[[rule]] #{index + 1} is not a table")
    rid = raw.get("id", f"#{index + 1}")
    if not isinstance(rid, str) or not rid:
        raise ctx.fail(f"[[rule]] #{index + 1}: 'id' must be a non-empty string")
    unknown = sorted(set(raw) - _RULE_KEYS)
    if unknown:
        raise ctx.fail(f"unknown key(s): {', '.join(unknown)}", rid)
    missing = [k for k in _REQUIRED_RULE_KEYS if k not in raw]
    if missing:
        raise ctx.fail(f"missing field(s): {', '.join(missing)}", rid)
    effect = raw["effect"]
    if effect not in ("grant", "deny"):
        raise ctx.fail(f"effect must be 'grant' or 'deny', not {effect!r}", rid)
    inherit, limit = raw.get("inherit", False), raw.get("max_instances")
    if not isinstance(inherit, bool):
        raise ctx.fail("'inherit' must be true or false", rid)
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ctx.fail("'max_instances' must be a positive integer", rid)
    if effect == "deny" and any(k in raw for k in ("requires", "after", "max_instances")):
        raise ctx.fail("deny rules take no requires / after / max_instances", rid)
    requires = _strings(raw["requires"], "'requires'", ctx, rid) if "requires" in raw else ()
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise ctx.fail("'description' must be a string", rid)
    return Rule(
        id=rid,
        effect=effect,
        concept=_concept(raw["concept"], ontology, ctx, rid),
        inherit=inherit,
        requires=tuple(_concept(r, ontology, ctx, rid) for r in requires),
        when=_condition(raw["when"], ctx, rid),
        after=_after(raw["after"], publisher, ontology, ctx, rid) if "after" in raw else (),
        max_instances=limit,
        description=description,
    )


def _check_implications(rules: tuple[Rule, ...], ontology: Ontology, ctx: _Ctx) -> None:
    """Refuse implications that can never hold or that depend on each other in a cycle."""
    grants = [r for r in rules if r.effect == "grant"]
    deps: nx.DiGraph = nx.DiGraph()
    for rule in grants:
        deps.add_node(rule.id)
        for needed in rule.requires:
            providers = [g.id for g in grants if needed in g.covers(ontology)]
            if not providers:
                raise ctx.fail(
                    f"requires {needed}, which no grant rule of this policy grants", rule.id
                )
            deps.add_edges_from((rule.id, p) for p in providers)
    try:
        cycle = nx.find_cycle(deps)
    except nx.NetworkXNoCycle:
        return
    path = " → ".join([a for a, _ in cycle] + [cycle[0][0]])
    raise ctx.fail(f"implication cycle: {path}", cycle[0][0])


def _table(doc: dict[str, Any], ctx: _Ctx) -> dict[str, Any]:
    head = doc.get("policy")
    if not isinstance(head, dict):
        raise ctx.fail("missing [policy] table")
    unknown = sorted(set(head) - _POLICY_KEYS)
    if unknown:
        raise ctx.fail(f"unknown key(s) in [policy]: {', '.join(unknown)}")
    for key in ("publisher", "version", "ontology"):
        if key not in head:
            raise ctx.fail(f"[policy] is missing '{key}'")
    for key in ("publisher", "ontology", "description"):
        if key in head and (not isinstance(head[key], str) or not head[key]):
            raise ctx.fail(f"[policy] '{key}' must be a non-empty string")
    if type(head["version"]) is not int or head["version"] < 1:
        raise ctx.fail("[policy] 'version' must be a positive integer")
    return head


def parse_policy(data: bytes, ontology: Ontology, *, source: str = "<policy>") -> Policy:
    """Validate a policy document held in memory; see :func:`load_policy`."""
    try:
        text = data.decode("utf-8")
        doc = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"at line (\d+)", str(exc))
        where = f"{source}:{line.group(1)}" if line else source
        raise PolicyError(f"{where}: malformed TOML: {exc}") from None
    ctx = _Ctx(source, text)
    unknown = sorted(set(doc) - {"policy", "rule"})
    if unknown:
        raise ctx.fail(f"unknown top-level key(s): {', '.join(unknown)}")
    head = _table(doc, ctx)
    if head["ontology"].rstrip("#") != ontology.iri:
        raise ctx.fail(f"written for ontology {head['ontology']}, not {ontology.iri}")
    raw_rules = doc.get("rule", [])
    if not isinstance(raw_rules, list):
        raise ctx.fail("'rule' must be an array of tables ([[rule]])")
    rules = tuple(_rule(r, i, head["publisher"], ontology, ctx) for i, r in enumerate(raw_rules))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ctx.fail("duplicate rule id", rule.id)
        seen.add(rule.id)
    _check_implications(rules, ontology, ctx)
    return Policy(
        publisher=head["publisher"],
        version=head["version"],
        ontology=ontology.iri,
        rules=rules,
        source=source,
        description=str(head.get("description", "")),
        digest=hashlib.sha256(data).hexdigest(),
    )


def load_policy(path: Path, ontology: Ontology) -> Policy:
    """Load and validate a policy file (its signature is not checked; see below).

    Raises:
        PolicyError: unreadable file, malformed TOML (with line), unknown key or concept,
            missing field, duplicate rule id, dead or cyclic implication — naming the file and
            the rule.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}") from None
    return parse_policy(data, ontology, source=str(path))


# ----------------------------------------------------------------------------- signing


def signature_path(path: Path) -> Path:
    """Where the detached signature of policy ``path`` lives: ``<path>.sig``."""
    return Path(path).with_name(Path(path).name + ".sig")


def sign_policy(policy_bytes: bytes, private_key: crypto.PrivateKey) -> bytes:
    """The content of the ``.sig`` file for ``policy_bytes``: base64 signature and newline."""
    return base64.b64encode(crypto.sign(private_key, policy_bytes)) + b"\n"


def verify_policy_file(path: Path, publisher_public_key: crypto.PublicKey) -> bytes:
    """Check ``<path>.sig`` over the exact bytes of ``path``; return those bytes.

    Raises:
        PolicyError: the file or its signature is missing, malformed or does not verify.
    """
    sig_path = signature_path(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}") from None
    try:
        encoded = sig_path.read_bytes()
    except FileNotFoundError:
        raise PolicyError(f"{path}: unsigned policy (no {sig_path.name})") from None
    except OSError as exc:
        raise PolicyError(f"{sig_path}: cannot read signature: {exc.strerror}") from None
    try:
        signature = base64.b64decode(b"".join(encoded.split()), validate=True)
        crypto.verify(publisher_public_key, signature, data)
    except (binascii.Error, SignatureError):
        raise PolicyError(f"{path}: signature {sig_path.name} does not verify") from None
    return data


def load_signed_policy(
    path: Path,
    ontology: Ontology,
    publisher_public_key: crypto.PublicKey,
    *,
    publisher: str | None = None,
) -> Policy:
    """Verify, then parse exactly the verified bytes; optionally check the publisher name."""
    policy = parse_policy(
        verify_policy_file(path, publisher_public_key), ontology, source=str(path)
    )
    if publisher is not None and policy.publisher != publisher:
        raise PolicyError(f"{path}: policy of {policy.publisher!r}, signed by {publisher!r}")
    return policy


# ----------------------------------------------------------------------------- engine


def _decisions(
    rule: Rule, concepts: abc.Iterable[str], ontology: Ontology, because: tuple[str, ...] = ()
) -> list[Grant]:
    return [
        Grant(
            rule=rule.id,
            effect=rule.effect,
            concept=c,
            via=ontology.path(rule.concept, c),
            because=because,
        )
        for c in sorted(concepts)
    ]


def auth_list(
    credential: Credential,
    policy: Policy,
    ontology: Ontology,
    *,
    at: datetime,
    disseminated: abc.Set[tuple[str, str]] = frozenset(),
) -> Authorization:
    """The concepts ``credential`` may receive from ``policy.publisher`` at time ``at``.

    Args:
        credential: the subscriber's credential.
        policy: the publisher's validated policy.
        ontology: the ontology the policy was validated against.
        at: evaluation time (timezone-aware).
        disseminated: (publisher, concept) pairs already disseminated, for ``after`` rules.

    Raises:
        UsageError: naive ``at`` or an ontology other than the policy's.
    """
    if at.tzinfo is None:
        raise UsageError("auth_list needs a timezone-aware time")
    if policy.ontology != ontology.iri:
        raise UsageError(f"policy {policy.source} is for {policy.ontology}, not {ontology.iri}")
    if not credential.not_before <= at <= credential.not_after:
        note = f"credential {credential.name!r} is not valid at {at.isoformat()}"
        return Authorization(publisher=policy.publisher, concepts=frozenset(), notes=(note,))
    explain: list[Grant] = []
    notes: list[str] = []
    active: list[Rule] = []
    for rule in policy.rules:
        if not rule.when.matches(credential):
            continue
        missing = [a for a in rule.after if (a.publisher, a.concept) not in disseminated]
        if missing:
            notes.append(
                f"{rule.id} waits until {missing[0].concept} of "
                f"{missing[0].publisher} has been disseminated"
            )
            continue
        active.append(rule)
    denied: set[str] = set()
    for rule in (r for r in active if r.effect == "deny"):
        denied |= rule.covers(ontology)
        explain += _decisions(rule, rule.covers(ontology), ontology)
    granted: set[str] = set()
    pending = [r for r in active if r.effect == "grant"]
    changed = True
    while changed:
        changed = False
        for rule in list(pending):
            if all(c in granted for c in rule.requires):
                pending.remove(rule)
                gained = rule.covers(ontology) - denied
                explain += _decisions(rule, gained, ontology, rule.requires)
                granted |= gained
                changed = True
    for rule in pending:
        lacking = ", ".join(c for c in rule.requires if c not in granted)
        notes.append(f"{rule.id} does not apply: {lacking} not granted")
    limits: dict[str, int] = {}
    for rule in active:
        if rule.effect == "grant" and rule.max_instances is not None and rule not in pending:
            for concept in rule.covers(ontology) & granted:
                limits[concept] = min(limits.get(concept, rule.max_instances), rule.max_instances)
    return Authorization(
        publisher=policy.publisher,
        concepts=frozenset(granted),
        explain=tuple(explain),
        denied=frozenset(denied),
        limits=tuple(sorted(limits.items())),
        notes=tuple(notes),
    )


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

    def with_policy(self, policy: Policy) -> PolicySet:
        """A new set where ``policy`` replaces its publisher's; versions must increase.

        Raises:
            PolicyError: ``policy.version`` is not above the version in force (a replayed or
                rolled-back policy).
        """
        current = self.policies.get(policy.publisher)
        if current is not None and policy.version <= current.version:
            raise PolicyError(
                f"{policy.source}: version {policy.version} of {policy.publisher!r}"
                f" does not supersede version {current.version}"
            )
        return PolicySet(
            ontology=self.ontology, policies={**self.policies, policy.publisher: policy}
        )

    def authorizations(
        self,
        credential: Credential,
        at: datetime,
        *,
        disseminated: abc.Set[tuple[str, str]] = frozenset(),
    ) -> dict[str, Authorization]:
        """:func:`auth_list` under every publisher's policy."""
        return {
            p: auth_list(credential, pol, self.ontology, at=at, disseminated=disseminated)
            for p, pol in sorted(self.policies.items())
        }

    def auth_lists(
        self,
        credential: Credential,
        at: datetime,
        *,
        disseminated: abc.Set[tuple[str, str]] = frozenset(),
    ) -> dict[str, frozenset[str]]:
        """Publisher → concepts ``credential`` may receive from that publisher."""
        found = self.authorizations(credential, at, disseminated=disseminated)
        return {publisher: a.concepts for publisher, a in found.items()}
