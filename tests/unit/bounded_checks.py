"""A check shared by the tests of bounded history: the site's routed window
(:class:`disseminator.store.Window`) and the subscriber's retention
(:class:`subscriber.retention.Retention`) each refuse a setting that would keep nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest


def assert_keeps_something(
    make: Callable[..., object], *, periods: Iterable[str], counts: Iterable[str]
) -> None:
    """``make`` refuses each of ``periods`` at 0 (it must be positive) and each of ``counts``
    at 0 (at least one must be kept), with a message that says so."""
    for name in periods:
        with pytest.raises(ValueError, match="positive"):
            make(**{name: 0})
    for name in counts:
        with pytest.raises(ValueError, match="at least one"):
            make(**{name: 0})
