"""Syntax checks for the lexical parts of RDF terms: RFC 3987 IRIs and BCP 47 language tags.

Theory of operation
-------------------
N-Quads' ``IRIREF`` production only keeps out spaces, controls and ``<>"{}|^`\\``; RDF itself
requires an IRI term to be an *absolute IRI* (RFC 3987) and a language tag to be *well-formed*
BCP 47 (RFC 5646 §2.1). Tools that check this (pyoxigraph among them) refuse
``<http://e/%zz>`` or ``<http://[::1/>``, so a signer that wrote one would produce provenance
nobody else can read. :func:`iri_problem` and :func:`language_tag_problem` say *why* a string is
not one, or return ``None`` when it is; :mod:`xdn.rdf` raises on the answer.

An IRI is split as RFC 3986 appendix B does (scheme, authority, path, query, fragment; the split
always succeeds once there is a scheme), then each part is matched against the characters its
RFC 3987 production allows: ``iunreserved`` (ASCII letters, digits, ``-._~`` and ``ucschar``),
``sub-delims``, ``pct-encoded`` (``%`` and exactly two hex digits), plus ``:@/?`` where the part
allows them and ``iprivate`` in the query only. The authority is read by hand: at most one
``@``; a host that starts with ``[`` is an IP-literal which must close with ``]`` and hold an
IPv6 address (no zone id) or an ``IPvFuture``; the port is digits. The first offending character
is reported with its position. Results are cached: the same vocabulary IRIs recur constantly.

A language tag is matched against the RFC 5646 ABNF (``langtag``, ``privateuse`` or an
irregular ``grandfathered`` tag), case-insensitively; only syntax is checked, not the registry.
"""

from __future__ import annotations

import functools
import ipaddress
import re

__all__ = ["diagnose_iri", "iri_problem", "language_tag_problem"]

_PLANES = "".join(f"{chr(p << 16)}-{chr((p << 16) | 0xFFFD)}" for p in range(1, 14))
_UCSCHAR = f"\xa0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef{_PLANES}\U000e1000-\U000efffd"
_IPRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_UNRESERVED_ASCII = r"A-Za-z0-9\-._~"
_UNRESERVED = _UNRESERVED_ASCII + _UCSCHAR
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"


def _run_of(chars: str) -> re.Pattern[str]:
    """A pattern matching the longest prefix made of ``chars`` and percent-escapes."""
    return re.compile(rf"(?:[{chars}]++|{_PCT})*+")


_IPCHAR = _UNRESERVED + _SUB_DELIMS + ":@"
_PARTS = {
    "user info": _run_of(_UNRESERVED + _SUB_DELIMS + ":"),
    "host": _run_of(_UNRESERVED + _SUB_DELIMS),
    "path": _run_of(_IPCHAR + "/"),
    "query": _run_of(_IPCHAR + "/?" + _IPRIVATE),
    "fragment": _run_of(_IPCHAR + "/?"),
}
_PRIVATE = re.compile(f"[{_IPRIVATE}]")
# The common case in one step: a reg-name host (or no authority). Accepts a subset of what
# _diagnose accepts (a property test pins this); everything else goes the slow, explaining way.
_COMMON_IRI = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*:"
    rf"(?://(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]++|{_PCT})*+@)?"
    rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]++|{_PCT})*+(?::[0-9]*+)?(?=[/?#]|\Z)|(?!//))"
    rf"(?:[{_IPCHAR}/]++|{_PCT})*+"
    rf"(?:\?(?:[{_IPCHAR}/?{_IPRIVATE}]++|{_PCT})*+)?"
    rf"(?:#(?:[{_IPCHAR}/?]++|{_PCT})*+)?"
)
_SPLIT = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?://(?P<authority>[^/?#]*))?"
    r"(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?",
    re.DOTALL,
)
_IPV_FUTURE = re.compile(rf"[vV][0-9A-Fa-f]+\.[{_UNRESERVED_ASCII}{_SUB_DELIMS}:]+")
_PORT = re.compile(r"[0-9]*")


def _bad_character(part: str, text: str, index: int, position: int) -> str:
    char = text[index]
    if char == "%":
        return (
            f"has a malformed percent-escape {text[index : index + 3]!r} in the {part} "
            "(a '%' needs two hex digits)"
        )
    if char in "[]":
        return f"has {char!r} in the {part}: brackets may only enclose an IP-literal host"
    if char == "#":
        return "has more than one '#'"
    if _PRIVATE.match(char):
        return f"has the private-use character U+{ord(char):04X} outside the query"
    if char == "@" and part == "user info":
        return "has more than one '@' in its authority"
    return (
        f"contains a character IRIs may not contain: U+{ord(char):04X} in the {part} "
        f"(character {position + index + 1})"
    )


def _check_part(part: str, text: str, position: int) -> str | None:
    end = _PARTS[part].match(text)
    assert end is not None  # the pattern accepts the empty string
    if end.end() == len(text):
        return None
    return _bad_character(part, text, end.end(), position)


def _ip_literal_problem(literal: str) -> str | None:
    if _IPV_FUTURE.fullmatch(literal):
        return None
    if "%" not in literal:  # RFC 3987 has no zone ids; ipaddress would accept one
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            pass
        else:
            return None
    return f"has an IP-literal host [{literal}] that is neither IPv6 nor IPvFuture"


def _authority_problem(authority: str, position: int) -> str | None:
    userinfo, at, hostport = authority.rpartition("@")
    if at and (problem := _check_part("user info", userinfo, position)):
        return problem
    position += len(userinfo) + len(at)
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            return "has an IP-literal host that is not closed by ']'"
        if problem := _ip_literal_problem(hostport[1:close]):
            return problem
        host, port = "", hostport[close + 1 :]
        if port and not port.startswith(":"):
            return f"has {port[0]!r} after its IP-literal host where only ':port' may follow"
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
    if problem := _check_part("host", host, position):
        return problem
    if not _PORT.fullmatch(port):
        return f"has a port {port!r} that is not a number"
    return None


@functools.lru_cache(maxsize=8192)
def iri_problem(value: str) -> str | None:
    """Why ``value`` is not an absolute RFC 3987 IRI (``None`` when it is one).

    The answer is a phrase to follow the IRI, e.g. ``"is not absolute (no scheme)"``.
    """
    if _COMMON_IRI.fullmatch(value):
        return None
    return diagnose_iri(value)


def diagnose_iri(value: str) -> str | None:
    """:func:`iri_problem` part by part, without the one-pattern shortcut or the cache."""
    match = _SPLIT.match(value)
    if match is None:
        return "is not absolute (no scheme)"
    authority = match.group("authority")
    where = match.start("authority")
    if authority is not None and (problem := _authority_problem(authority, where)):
        return problem
    for part in ("path", "query", "fragment"):
        text = match.group(part)
        if text is not None and (problem := _check_part(part, text, match.start(part))):
            return problem
    return None


_ALNUM = "[A-Za-z0-9]"
_LANGTAG = (
    r"(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})"  # language (with extlang)
    r"(?:-[A-Za-z]{4})?"  # script
    r"(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"  # region
    rf"(?:-(?:{_ALNUM}{{5,8}}|[0-9]{_ALNUM}{{3}}))*"  # variants
    rf"(?:-[0-9A-WY-Za-wy-z](?:-{_ALNUM}{{2,8}})+)*"  # extensions (any singleton but x)
    rf"(?:-[xX](?:-{_ALNUM}{{1,8}})+)?"  # private use
)
_BCP47 = re.compile(rf"{_LANGTAG}|[xX](?:-{_ALNUM}{{1,8}})+")
_IRREGULAR = frozenset(
    {
        *("en-gb-oed", "sgn-be-fr", "sgn-be-nl", "sgn-ch-de"),
        *(f"i-{name}" for name in ("ami", "bnn", "default", "enochian", "hak", "klingon")),
        *(f"i-{name}" for name in ("lux", "mingo", "navajo", "pwn", "tao", "tay", "tsu")),
    }
)
_SUBTAG = re.compile(f"{_ALNUM}{{1,8}}")


def language_tag_problem(tag: str) -> str | None:
    """Why ``tag`` is not a well-formed BCP 47 language tag (``None`` when it is one)."""
    if _BCP47.fullmatch(tag) or tag.lower() in _IRREGULAR:
        return None
    for subtag in tag.split("-"):
        if not _SUBTAG.fullmatch(subtag):
            return (
                f"has the subtag {subtag!r}: subtags are 1 to 8 ASCII letters or digits, "
                "separated by '-'"
            )
    return (
        "is not well-formed BCP 47 (language[-script][-region][-variant…][-extension…]"
        "[-x-private])"
    )
