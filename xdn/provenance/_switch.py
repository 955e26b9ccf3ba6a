"""The provenance off switch, for the latency benchmark only.

``benchmarks/bench_provenance.py`` compares the latency of a network with provenance against the
same network without it. Every party reads the switch here, and nowhere else:

* on (the default, and any value but ``off``): a message without provenance is refused;
* off (``XDN_BENCH_PROVENANCE=off`` in the environment of every process): the publisher sends
  empty provenance and logs nothing, a site relays empty provenance and signs nothing, a
  subscriber signs no receipt.

This is the one place the core reads the environment (a benchmark switch, not configuration):
no deployment sets it, and with it unset nothing changes.
"""

from __future__ import annotations

import os

__all__ = ["SWITCH", "enabled"]

SWITCH = "XDN_BENCH_PROVENANCE"


def enabled() -> bool:
    """Whether provenance is on: always, unless ``XDN_BENCH_PROVENANCE=off`` (benchmark only)."""
    return os.environ.get(SWITCH, "").strip().lower() != "off"
