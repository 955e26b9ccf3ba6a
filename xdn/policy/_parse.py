"""Reading policy documents: TOML → validated :class:`Policy`, with errors naming file and line.

Theory of operation
-------------------
:func:`parse_policy` decodes the TOML, checks the ``[policy]`` table and every ``[[rule]]``
(keys, types, concepts known to the ontology, conditions on known name fields), then checks the
rules *together* (:mod:`xdn.policy._consistency`): duplicate ids, implications that can never
hold or that form a cycle, grants that a deny contradicts. Every error is a
:class:`~xdn.errors.PolicyError` whose message starts ``file:line:`` — the line of the
offending key when it can be found, else of the rule's ``[[rule]]`` header. tomllib gives no
positions, so lines are found by scanning the text between table headers.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from xdn.errors import PolicyError
from xdn.names import canonical_field
from xdn.ontology import Ontology
from xdn.policy._consistency import check_rules
from xdn.policy._model import ROLES, After, Condition, Fields, Policy, Rule

__all__ = ["load_policy", "parse_policy"]

_HEADER = re.compile(r"\s*\[")
_RULE_HEADER = re.compile(r"\s*\[\[\s*rule\s*\]\]")
_POLICY_HEADER = re.compile(r"\s*\[\s*policy\s*\]")
_POLICY_KEYS = frozenset({"publisher", "version", "ontology", "description", "valid_until"})
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


class _Ctx:
    """Error formatting for one document: ``file:line: [rule ID: ]message``."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        self.rule_starts = [n for n, t in enumerate(self.lines, 1) if _RULE_HEADER.match(t)]
        self.policy_start = next(
            (n for n, t in enumerate(self.lines, 1) if _POLICY_HEADER.match(t)), None
        )

    def _key_line(self, start: int | None, key: str | None) -> int | None:
        if start is None or key is None:
            return start
        pattern = re.compile(rf"\s*{re.escape(key)}\s*=")
        for number in range(start + 1, len(self.lines) + 1):
            text = self.lines[number - 1]
            if _HEADER.match(text):
                break
            if pattern.match(text):
                return number
        return start

    def rule_line(self, index: int, key: str | None = None) -> int | None:
        start = self.rule_starts[index] if index < len(self.rule_starts) else None
        return self._key_line(start, key)

    def fail(self, message: str, *, line: int | None = None) -> PolicyError:
        where = f"{self.source}:{line}" if line else self.source
        return PolicyError(f"{where}: {message}")

    def head(self, message: str, key: str | None = None) -> PolicyError:
        return self.fail(message, line=self._key_line(self.policy_start, key))


class _RuleReader:
    """Validates one raw ``[[rule]]`` table."""

    def __init__(self, raw: dict[str, Any], index: int, ctx: _Ctx, ontology: Ontology) -> None:
        self.raw, self.index, self.ctx, self.ontology = raw, index, ctx, ontology
        self.rid = str(raw.get("id", f"#{index + 1}"))

    def fail(self, message: str, key: str | None = None) -> PolicyError:
        line = self.ctx.rule_line(self.index, key)
        return self.ctx.fail(f"rule {self.rid}: {message}", line=line)

    def strings(self, value: Any, what: str, key: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if (
            not isinstance(items, list)
            or not items
            or not all(isinstance(v, str) and v for v in items)
        ):
            raise self.fail(f"{what} must be a non-empty string or list of strings", key)
        return tuple(items)

    def concept(self, ref: Any, key: str) -> str:
        name = self.ontology.resolve(ref) if isinstance(ref, str) else None
        if name is None:
            raise self.fail(f"unknown concept {ref!r} (not in ontology {self.ontology.iri})", key)
        return name

    def fields(self, value: Any, scope: str) -> Fields:
        if not isinstance(value, dict) or not value:
            raise self.fail(f"when.{scope} must be a table of field = value", "when")
        out: dict[str, tuple[str, frozenset[str]]] = {}
        for key, accepted in value.items():
            try:
                name = canonical_field(key)
            except ValueError:
                raise self.fail(
                    f"unknown {scope} field {key!r} (use a name attribute such as CN, O, OU, "
                    "C, ST, L, title, serialNumber, or a dotted OID)",
                    "when",
                ) from None
            if name in out:
                raise self.fail(
                    f"when.{scope}: {out[name][0]!r} and {key!r} are the same field ({name}); "
                    "give it once, with a list of accepted values",
                    "when",
                )
            values = frozenset(self.strings(accepted, f"when.{scope}.{key}", "when"))
            out[name] = (key, values)
        return tuple((name, values) for name, (_key, values) in out.items())

    def condition(self) -> Condition:
        value = self.raw["when"]
        if not isinstance(value, dict) or not value:
            raise self.fail("'when' must be a non-empty table (subject, issuer, role)", "when")
        unknown = sorted(set(value) - _WHEN_KEYS)
        if unknown:
            raise self.fail(f"unknown key(s) in 'when': {', '.join(unknown)}", "when")
        roles: frozenset[str] = frozenset()
        if "role" in value:
            roles = frozenset(self.strings(value["role"], "when.role", "when"))
        if not roles <= ROLES:
            raise self.fail(f"when.role must be among {', '.join(sorted(ROLES))}", "when")
        return Condition(
            subject=self.fields(value["subject"], "subject") if "subject" in value else (),
            issuer=self.fields(value["issuer"], "issuer") if "issuer" in value else (),
            roles=roles,
        )

    def after(self, publisher: str) -> tuple[After, ...]:
        value = self.raw["after"]
        out = []
        for item in value if isinstance(value, list) else [value]:
            if (
                not isinstance(item, dict)
                or "concept" not in item
                or set(item) - {"concept", "publisher"}
            ):
                raise self.fail(
                    "'after' must be a table { concept = ..., publisher = ... }", "after"
                )
            who = item.get("publisher", publisher)
            if not isinstance(who, str) or not who:
                raise self.fail("after.publisher must be a non-empty string", "after")
            out.append(After(publisher=who, concept=self.concept(item["concept"], "after")))
        return tuple(out)

    def read(self, publisher: str) -> Rule:
        raw = self.raw
        if "id" in raw and (not isinstance(raw["id"], str) or not raw["id"]):
            raise self.fail("'id' must be a non-empty string", "id")
        unknown = sorted(set(raw) - _RULE_KEYS)
        if unknown:
            raise self.fail(f"unknown key(s): {', '.join(unknown)}", unknown[0])
        missing = [k for k in _REQUIRED_RULE_KEYS if k not in raw]
        if missing:
            raise self.fail(f"missing field(s): {', '.join(missing)}")
        effect = raw["effect"]
        if effect not in ("grant", "deny"):
            raise self.fail(f"effect must be 'grant' or 'deny', not {effect!r}", "effect")
        inherit, limit = raw.get("inherit", False), raw.get("max_instances")
        if not isinstance(inherit, bool):
            raise self.fail("'inherit' must be true or false", "inherit")
        if limit is not None and (type(limit) is not int or limit < 1):
            raise self.fail("'max_instances' must be a positive integer", "max_instances")
        extra = [k for k in ("requires", "after", "max_instances") if k in raw]
        if effect == "deny" and extra:
            raise self.fail("deny rules take no requires / after / max_instances", extra[0])
        description = raw.get("description", "")
        if not isinstance(description, str):
            raise self.fail("'description' must be a string", "description")
        requires: tuple[str, ...] = ()
        if "requires" in raw:
            requires = self.strings(raw["requires"], "'requires'", "requires")
        return Rule(
            id=self.rid,
            effect=effect,
            concept=self.concept(raw["concept"], "concept"),
            inherit=inherit,
            requires=tuple(self.concept(r, "requires") for r in requires),
            when=self.condition(),
            after=self.after(publisher) if "after" in raw else (),
            max_instances=limit,
            description=description,
        )


def _decode(data: bytes, source: str) -> tuple[str, dict[str, Any]]:
    try:
        text = data.decode("utf-8")
        return text, tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"at line (\d+)", str(exc))
        where = f"{source}:{line.group(1)}" if line else source
        raise PolicyError(f"{where}: malformed TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays / tables
        raise PolicyError(
            f"{source}: malformed policy: arrays or inline tables nested too deeply"
        ) from None


def _head(doc: dict[str, Any], ctx: _Ctx, at: datetime | None) -> dict[str, Any]:
    head = doc.get("policy")
    if not isinstance(head, dict):
        raise ctx.fail("missing [policy] table")
    unknown = sorted(set(head) - _POLICY_KEYS)
    if unknown:
        raise ctx.head(f"unknown key(s) in [policy]: {', '.join(unknown)}", unknown[0])
    for key in ("publisher", "version", "ontology"):
        if key not in head:
            raise ctx.head(f"[policy] is missing '{key}'")
    for key in ("publisher", "ontology", "description"):
        if key in head and (not isinstance(head[key], str) or not head[key]):
            raise ctx.head(f"[policy] '{key}' must be a non-empty string", key)
    if type(head["version"]) is not int or head["version"] < 1:
        raise ctx.head("[policy] 'version' must be a positive integer", "version")
    until = head.get("valid_until")
    if until is not None:
        if not isinstance(until, datetime) or until.tzinfo is None:
            raise ctx.head(
                "[policy] 'valid_until' must be a date-time with offset, e.g. 2026-12-31T23:59:59Z",
                "valid_until",
            )
        if at is not None and at > until:
            raise ctx.head(
                f"policy expired at {until.isoformat()} (checked at {at.isoformat()})",
                "valid_until",
            )
    return head


def parse_policy(
    data: bytes, ontology: Ontology, *, source: str = "<policy>", at: datetime | None = None
) -> Policy:
    """Validate a policy document held in memory; see :func:`load_policy`."""
    text, doc = _decode(data, source)
    ctx = _Ctx(source, text)
    unknown = sorted(set(doc) - {"policy", "rule"})
    if unknown:
        raise ctx.fail(f"unknown top-level key(s): {', '.join(unknown)}")
    head = _head(doc, ctx, at)
    if head["ontology"].rstrip("#") != ontology.iri:
        raise ctx.head(f"written for ontology {head['ontology']}, not {ontology.iri}", "ontology")
    raw_rules = doc.get("rule", [])
    if not isinstance(raw_rules, list):
        raise ctx.fail("'rule' must be an array of tables ([[rule]])")
    rules: list[Rule] = []
    lines: dict[str, int] = {}
    for index, raw in enumerate(raw_rules):
        if not isinstance(raw, dict):
            raise ctx.fail(f"[[rule]] #{index + 1} is not a table", line=ctx.rule_line(index))
        rule = _RuleReader(raw, index, ctx, ontology).read(head["publisher"])
        if rule.id in lines:
            raise ctx.fail(
                f"rule {rule.id}: duplicate rule id (first at line {lines[rule.id]})",
                line=ctx.rule_line(index, "id"),
            )
        lines[rule.id] = ctx.rule_line(index) or 0
        rules.append(rule)
    policy = Policy(
        publisher=head["publisher"],
        version=head["version"],
        ontology=ontology.iri,
        rules=tuple(rules),
        source=source,
        description=str(head.get("description", "")),
        digest=hashlib.sha256(data).hexdigest(),
        valid_until=head.get("valid_until"),
        rule_lines=tuple((rid, n) for rid, n in lines.items() if n),
    )
    return check_rules(policy, ontology)


def load_policy(path: Path, ontology: Ontology, *, at: datetime | None = None) -> Policy:
    """Load and validate a policy file (its signature is not checked; see ``_signing``).

    Args:
        path: the TOML policy document.
        ontology: the ontology its concepts must belong to.
        at: when given, a policy whose ``valid_until`` has passed is refused.

    Raises:
        PolicyError: unreadable file, malformed TOML, unknown key or concept, missing field,
            duplicate rule id, dead or cyclic implication, contradictory rules, expired —
            naming the file and the line.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}") from None
    return parse_policy(data, ontology, source=str(path), at=at)
