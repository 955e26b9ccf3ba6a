"""X.509 name attributes: one canonical field name per attribute type, however it is written.

A certificate's subject or issuer is a list of (attribute type, value) pairs; the type is an
OID, and people write it as a short name (``OU``), a long name (``organizationalUnitName``)
or the dotted OID itself (``2.5.4.11``). Policies and credentials must agree on which field
is meant whatever the spelling, so every spelling is mapped to one *canonical name*:

* the RFC 4514 short name when there is one (``CN``, ``O``, ``OU``, ``C``, ``L``, ``ST``,
  ``STREET``, ``DC``, ``UID``);
* else the attribute's LDAP-style name derived from cryptography's ``NameOID`` constant
  (``title``, ``serialNumber``, ``businessCategory``, ``emailAddress``, ``givenName``, …);
* ``xdnBlock`` for xdn's own attribute (the block a site certificate may serve);
* else the dotted OID (an attribute type nobody here has a name for).

Every type cryptography's ``NameOID`` knows is recognised by its short name, its long name
and its dotted OID; names are looked up case-insensitively (``ou`` is ``OU``). A name that is
neither known nor a valid dotted OID is a :class:`ValueError`.
"""

from __future__ import annotations

import re

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["BLOCK_FIELD", "BLOCK_OID", "KNOWN_FIELDS", "canonical_field", "field_name", "field_oid"]

BLOCK_FIELD = "xdnBlock"
# A UUID-derived OID (ITU-T X.667, arc 2.25; no registration needed): the maximum
# conceptual block a site certificate authorises its holder to serve.
BLOCK_OID = x509.ObjectIdentifier("2.25.284602625711494823787518244044928283463")

_DOTTED = re.compile(r"[0-2](\.(0|[1-9][0-9]*))+")


def _camel(constant: str) -> str:
    """``SERIAL_NUMBER`` → ``serialNumber``."""
    first, *rest = constant.lower().split("_")
    return first + "".join(word.capitalize() for word in rest)


def _tables() -> tuple[dict[str, str], dict[str, str]]:
    """(dotted OID → canonical name, folded spelling → canonical name)."""
    by_oid: dict[str, str] = {BLOCK_OID.dotted_string: BLOCK_FIELD}
    lookup: dict[str, str] = {BLOCK_FIELD.casefold(): BLOCK_FIELD}
    for constant in sorted(vars(NameOID)):
        oid = getattr(NameOID, constant)
        if not isinstance(oid, x509.ObjectIdentifier):
            continue
        long_name = _camel(constant)
        try:
            short = x509.NameAttribute(oid, "XX").rfc4514_attribute_name
        except ValueError:  # a type whose values are not strings: no short name
            short = oid.dotted_string
        canonical = short if not _DOTTED.fullmatch(short) else long_name
        by_oid[oid.dotted_string] = canonical
        for spelling in {canonical, long_name, constant}:
            folded = spelling.casefold()
            if lookup.setdefault(folded, canonical) != canonical:
                raise AssertionError(f"ambiguous attribute name {spelling!r}")
    return by_oid, lookup


_BY_OID, _LOOKUP = _tables()
_OID_OF = {name: dotted for dotted, name in _BY_OID.items()}

KNOWN_FIELDS = frozenset(_BY_OID.values())
"""The canonical names of every attribute type with a name."""


def canonical_field(name: str) -> str:
    """The canonical name of a field written as a short or long name or a dotted OID.

    Raises:
        ValueError: neither a known attribute name nor a dotted OID.
    """
    if not isinstance(name, str):
        raise TypeError(f"a field name is a string, not {type(name).__name__}")
    if _DOTTED.fullmatch(name):
        return _BY_OID.get(name, name)
    found = _LOOKUP.get(name.casefold())
    if found is None:
        raise ValueError(f"unknown name attribute {name!r}")
    return found


def field_name(oid: x509.ObjectIdentifier) -> str:
    """The canonical name of an attribute type."""
    return _BY_OID.get(oid.dotted_string, oid.dotted_string)


def field_oid(name: str) -> x509.ObjectIdentifier:
    """The attribute type of a field (any spelling accepted by :func:`canonical_field`)."""
    canonical = canonical_field(name)
    return x509.ObjectIdentifier(_OID_OF.get(canonical, canonical))
