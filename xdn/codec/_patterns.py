"""Deciding, from an element's start tag and its ancestors, which concept maps it.

Theory of operation
-------------------
A streaming encoder sees each element when it opens, with its ancestors open above it, and must
know at once whether the element is a fragment (to number fragments in document order and find
each one's parent). That is decidable for mappings whose every XPath is a *simple path*:

* absolute: it starts with ``/`` or ``//``;
* each step is ``/`` (child) or ``//`` (descendant) followed by a name test ``prefix:local``,
  ``local`` (no namespace, as in XPath 1.0), ``prefix:*`` or ``*``;
* no predicates, no other axes, no functions, no unions.

Both shipped mappings are of this form. Such a path is a regular expression over the element's
*path string*, the Clark names of the root … element joined with ``\\x1f`` (a character no XML
name contains): ``/a/b`` is ``␟a␟b``, ``//a/b`` is ``(␟…)*␟a␟b``. :class:`PathMatcher` tests an
element's path string against the rules whose last step can match its name, caching the answer
per path string (documents repeat a few shapes millions of times). Mappings with any other
XPath are encoded in memory (:func:`compile_paths` returns ``None``); that is the documented
rule of :func:`xdn.codec.encode_file`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xdn.errors import MappingError

__all__ = ["SEP", "PathMatcher", "compile_paths"]

SEP = "\x1f"
_NAME = r"[^\W\d][\w.\-]*"
_STEP = re.compile(rf"(//|/)(\*|{_NAME}:\*|{_NAME}:{_NAME}|{_NAME})")
_ANY = f"[^{SEP}]+"


@dataclass(frozen=True, slots=True)
class _Rule:
    concept: str
    expression: str
    pattern: re.Pattern[str]
    last: str | None  # Clark name the element must have, or None for a wildcard last step


def _compile(expression: str, namespaces: Mapping[str, str]) -> tuple[re.Pattern[str], str | None]:
    text = expression.strip()
    parts: list[str] = []
    last: str | None = None
    position = 0
    while position < len(text):
        step = _STEP.match(text, position)
        if step is None:
            raise ValueError(expression)
        axis, test = step.groups()
        prefix, _, local = test.rpartition(":")
        if prefix and prefix not in namespaces:
            raise ValueError(expression)
        namespace = f"{{{namespaces[prefix]}}}" if prefix else ""
        if local == "*":
            name, last = (re.escape(namespace) + _ANY if prefix else _ANY), None
        else:
            last = namespace + local
            name = re.escape(last)
        parts.append((f"(?:{SEP}{_ANY})*" if axis == "//" else "") + SEP + name)
        position = step.end()
    if not parts:
        raise ValueError(expression)
    return re.compile("".join(parts)), last


class PathMatcher:
    """Which concept (if any) maps an element, from its path string."""

    __slots__ = ("_by_last", "_cache", "_source", "_wild")

    def __init__(self, rules: Iterable[_Rule], *, source: str) -> None:
        self._source = source
        self._by_last: dict[str, list[_Rule]] = {}
        self._wild: list[_Rule] = []
        for rule in rules:
            if rule.last is None:
                self._wild.append(rule)
            else:
                self._by_last.setdefault(rule.last, []).append(rule)
        self._cache: dict[str, str | None] = {}

    def concept(self, path: str, tag: str, line: int | None) -> str | None:
        """The concept mapping the element ``tag`` whose path string is ``path``, if any.

        Raises:
            MappingError: two concepts map the element.
        """
        try:
            return self._cache[path]
        except KeyError:
            pass
        found: str | None = None
        for rule in (*self._by_last.get(tag, ()), *self._wild):
            if rule.pattern.fullmatch(path) and rule.concept != found:
                if found is not None:
                    raise MappingError(
                        f"{self._source}: <{tag}> at line {line} is mapped to both {found} "
                        f"and {rule.concept}"
                    )
                found = rule.concept
        self._cache[path] = found
        return found


def compile_paths(
    rules: Iterable[tuple[str, str]], namespaces: Mapping[str, str], *, source: str
) -> PathMatcher | None:
    """A matcher for (concept, XPath) rules, or ``None`` if one XPath is not a simple path."""
    compiled = []
    for concept, expression in rules:
        try:
            pattern, last = _compile(expression, namespaces)
        except ValueError:
            return None
        compiled.append(_Rule(concept, expression, pattern, last))
    return PathMatcher(compiled, source=source)
