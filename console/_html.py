"""The few HTML building blocks of the console's pages: the frame, tables, lists, forms.

Every piece of text that reaches HTML goes through :func:`esc` (or :func:`attr`); functions that
take ``html`` arguments take markup already built by these helpers.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

__all__ = ["Nav", "attr", "esc", "listing", "page", "table"]

Nav = Sequence[tuple[str, str]]  # (href, label)


def esc(text: object) -> str:
    """``text`` as HTML text (quotes escaped too, so it is safe in attributes)."""
    return html.escape(str(text), quote=True)


def attr(name: str, value: object) -> str:
    """`` name="value"`` with the value escaped."""
    return f' {name}="{esc(value)}"'


def page(title: str, body: str, *, nav: Nav, current: str = "") -> str:
    """A whole page: skip link, navigation (``current`` marked), the title and ``body``."""
    links = "".join(
        f'<li><a href="{esc(href)}"'
        + (' aria-current="page"' if href == current else "")
        + f">{esc(label)}</a></li>"
        for href, label in nav
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} — xdn console</title>"
        '<link rel="icon" href="/static/favicon.svg">'
        '<link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head><body>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header><nav aria-label="console"><ul>{links}</ul></nav></header>'
        f'<main id="main" tabindex="-1"><h1>{esc(title)}</h1>{body}</main></body></html>\n'
    )


def table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], *, caption: str = "", empty: str = "none"
) -> str:
    """A table of markup cells; ``empty`` (text) when there are no rows."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{esc(caption + ": " if caption else "")}{esc(empty)}</p>'
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def listing(items: Iterable[str], *, empty: str = "none") -> str:
    """A bulleted list of markup items, or ``empty`` (text)."""
    body = "".join(f"<li>{item}</li>" for item in items)
    return f"<ul>{body}</ul>" if body else f'<p class="empty">{esc(empty)}</p>'
