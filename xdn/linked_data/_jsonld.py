"""JSON-LD notifications without the network: remote contexts come from a bundled allow-list.

Theory of operation
-------------------
JSON-LD lets a document name its ``@context`` by IRI; a processor would fetch it. An inbox must
not: a fetch is a request the sender makes *us* send (to anywhere, as often as it posts), and
its answer would change what a stored notification means. pyoxigraph 0.5's JSON-LD parser
already refuses a remote context when no document loader is set (it raises ``SyntaxError: No
LoadDocumentCallback has been set``) and its Python binding offers no loader, so we keep it
(fast, strict, the same library that writes our JSON-LD) and do the loading ourselves, before
it parses: :func:`inline_contexts` reads the JSON (bounded depth), finds every ``@context`` value
— top level, nested node objects, scoped contexts in term definitions, arrays of contexts, and
``@import`` in a context object — and replaces each IRI that is in :data:`BUNDLED_CONTEXTS` by
the bundled context object; any other IRI is refused naming it. (pyld with a restricted
document loader would do the same job in pure Python, several times slower, and would be one
more JSON-LD implementation in the project.)

Bundled contexts are data files in ``contexts/`` written by us: ActivityStreams 2.0
(``https://www.w3.org/ns/activitystreams``, also under ``http:``), holding the terms LDN
notifications use, each expanding as in the published context. The contents of ``@value``
(JSON literals) are left alone.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any, Final

from xdn.linked_data._errors import InvalidNotification

__all__ = ["BUNDLED_CONTEXTS", "MAX_DEPTH", "bundled_context", "inline_contexts"]

#: Context IRI → the bundled file holding it.
BUNDLED_CONTEXTS: Final = {
    "https://www.w3.org/ns/activitystreams": "activitystreams.jsonld",
    "http://www.w3.org/ns/activitystreams": "activitystreams.jsonld",
}
MAX_DEPTH: Final = 64  # JSON nesting a notification may use


@functools.cache
def _load(filename: str) -> str:
    return (resources.files("xdn.linked_data") / "contexts" / filename).read_text("utf-8")


def bundled_context(iri: str) -> Any:
    """A fresh copy of the bundled context object for ``iri`` (its ``@context`` value).

    Raises:
        InvalidNotification: ``iri`` is not in :data:`BUNDLED_CONTEXTS`, naming it.
    """
    filename = BUNDLED_CONTEXTS.get(iri)
    if filename is None:
        raise InvalidNotification(
            f"remote JSON-LD context <{iri}> is not one this inbox knows (it fetches none); "
            f"known: {', '.join(sorted(BUNDLED_CONTEXTS))}; or give the context inline"
        )
    return json.loads(_load(filename))["@context"]


def _context_value(value: Any) -> Any:
    """A ``@context`` value with every IRI replaced by its bundled context."""
    if isinstance(value, str):
        return bundled_context(value)
    if isinstance(value, list):
        return [_context_value(v) for v in value]
    if isinstance(value, dict) and isinstance(value.get("@import"), str):
        imported = bundled_context(value["@import"])
        rest = {k: v for k, v in value.items() if k != "@import"}
        return {**imported, **rest} if isinstance(imported, dict) else [imported, rest]
    return value


def _check_depth(document: Any) -> None:
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidNotification(f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _rewrite(document: Any) -> None:
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            if "@context" in value:
                value["@context"] = _context_value(value["@context"])
            stack.extend(v for k, v in value.items() if k != "@value")


def inline_contexts(text: str) -> str:
    """The JSON-LD document ``text`` with its remote contexts replaced by bundled ones.

    Raises:
        InvalidNotification: not JSON, nested deeper than :data:`MAX_DEPTH`, or naming a
            context that is not bundled.
    """
    try:
        document = json.loads(text)
    except RecursionError:
        raise InvalidNotification(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidNotification(f"not JSON: {exc}") from None
    _check_depth(document)
    if not isinstance(document, dict | list):
        raise InvalidNotification("a JSON-LD notification must be a JSON object or array")
    _rewrite(document)
    return json.dumps(document)
