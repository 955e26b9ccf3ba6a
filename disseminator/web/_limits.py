"""The endpoint's per-client limits, as pure state: a request rate and concurrent connections.

Theory of operation
-------------------
Both are bookkeeping with no I/O and no clock of their own (the caller passes the time), so
they are tested without sockets; :mod:`disseminator.web._app` and
:mod:`disseminator.web._server` apply them.

* :class:`TokenBuckets` — a token bucket per client certificate (its SHA-256 fingerprint):
  ``burst`` tokens at most, refilled at ``rate`` a second; a request takes one, and a client
  with none left is told how long until it has one (``429`` with ``Retry-After``). Memory is
  bounded: at most ``max_clients`` buckets are kept, the least recently used forgotten first
  (a forgotten bucket is a full one, which is what a client that has been quiet has anyway);
  only certificates of the network's CA, in force, get this far.
* :class:`ConnectionGate` — how many connections are open, in total and per client address;
  :meth:`ConnectionGate.refusal` says whether one more may be (else which cap it is over),
  and counts it if so, at accept,
  before its TLS handshake costs anything; :meth:`ConnectionGate.release` when it ends.
  Memory: one counter per address with a connection open, so at most ``total``.
"""

from __future__ import annotations

import math
from collections import OrderedDict

__all__ = ["ConnectionGate", "TokenBuckets"]


class TokenBuckets:
    """A token bucket per client: ``burst`` requests at once, ``rate`` a second after that."""

    def __init__(self, *, rate: float, burst: int, max_clients: int = 10_000) -> None:
        if rate <= 0 or burst < 1 or max_clients < 1:
            raise ValueError(f"a rate limit needs a positive rate ({rate!r}), a burst of one "
                             f"request or more ({burst!r}) and room for a client ({max_clients})")
        self.rate, self.burst, self.max_clients = rate, burst, max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, client: str, now: float) -> float:
        """Take a token of ``client``'s at time ``now`` (seconds, monotonic): ``0.0`` if it had
        one, else the seconds until it has (nothing taken)."""
        tokens, at = self._buckets.pop(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens, now)  # the most recently used last
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait

    @staticmethod
    def retry_after(wait: float) -> str:
        """A ``Retry-After`` value (whole seconds, at least 1) for a wait of ``wait`` s."""
        return str(max(1, math.ceil(wait)))

    def __len__(self) -> int:
        return len(self._buckets)


class ConnectionGate:
    """Open connections counted in total and per client address, each under a cap."""

    def __init__(self, *, total: int, per_address: int) -> None:
        if total < 1 or per_address < 1:
            raise ValueError(f"connection caps must be positive, not {total}, {per_address}")
        self.total, self.per_address = total, per_address
        self.open = 0
        self.refused = 0  # connections refused so far (closed at accept)
        self.refused_by: dict[str, int] = {}  # ... by the cap that refused them
        self._by_address: dict[str, int] = {}

    def admit(self, address: str) -> bool:
        """Whether a new connection from ``address`` may open (if so it is counted)."""
        return self.refusal(address) is None

    def refusal(self, address: str) -> str | None:
        """Admit a new connection from ``address`` (``None``, and it is counted), or name the
        cap it is over: ``"total"`` (``connections``) or ``"per_address"``."""
        held = self._by_address.get(address, 0)
        reason = ("total" if self.open >= self.total
                  else "per_address" if held >= self.per_address else None)
        if reason is not None:
            self.refused += 1
            self.refused_by[reason] = self.refused_by.get(reason, 0) + 1
            return reason
        self.open += 1
        self._by_address[address] = held + 1
        return None

    def release(self, address: str) -> None:
        """A connection from ``address`` admitted before has ended."""
        held = self._by_address.get(address, 0)
        if held < 1:
            raise ValueError(f"no connection from {address!r} is open")
        self.open -= 1
        if held == 1:
            del self._by_address[address]
        else:
            self._by_address[address] = held - 1

    def held(self, address: str) -> int:
        """How many connections from ``address`` are open."""
        return self._by_address.get(address, 0)
