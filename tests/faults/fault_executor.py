"""Carry out a fault schedule on a running network, and time each recovery.

Each fault runs in its own thread: at its start the process is SIGKILLed (or SIGSTOPped, or its
site's link impaired), at its end restarted (continued, restored). After a restart the
:class:`Recoveries` watcher times how long until the restarted part works again:

- a site: a subscriber it serves (directly or through its downlinks) accepts a document issued
  after the restart (the stream flows through the site again);
- a subscriber: it accepts a document again;
- a publisher: it reports a document published; a key service: a run of it completes.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from fault_checks import InboxTail
from fault_hosts import HostedNetwork
from fault_lanes import KEY_SERVICE, PUBLISHER, Lane
from fault_schedule import Fault, FaultKind, Schedule

__all__ = ["Executor", "Recoveries"]


@dataclass(slots=True)
class Tally:
    kills: dict[str, int] = field(default_factory=dict)  # role → count
    restarts: int = 0
    pauses: int = 0
    cuts: int = 0
    exited_on_their_own: list[str] = field(default_factory=list)

    def killed(self, role: str) -> None:
        self.kills[role] = self.kills.get(role, 0) + 1


class Recoveries(threading.Thread):
    """Times each restart until the restarted part works again (see the module doc)."""

    def __init__(
        self,
        tails: Mapping[str, InboxTail],
        lanes: Mapping[str, Lane],
        served: Mapping[str, frozenset[str]],
    ) -> None:
        super().__init__(name="recoveries", daemon=True)
        self.tails, self.lanes, self.served = tails, lanes, served
        self.times: list[float] = []  # seconds from a restart to recovery
        self.recovered: list[tuple[str, float]] = []  # (what, seconds), as they recover
        self.pending: list[tuple[str, float, Callable[[], bool]]] = []
        self._lock = threading.Lock()
        self._done = threading.Event()

    def restarted(self, role: str, name: str) -> None:
        at, at_ms = time.monotonic(), time.time() * 1000
        check: Callable[[], bool]
        if role == "site":
            watched = [self.tails[s] for s in self.served[name]]
            check = lambda: any(t.newest_issued_ms >= at_ms for t in watched)  # noqa: E731
        elif role == "subscriber":
            tail, before = self.tails[name], len(self.tails[name].records)
            check = lambda: len(tail.records) > before  # noqa: E731
        elif role == KEY_SERVICE:
            lane, runs = self.lanes[name], self.lanes[name].key_runs
            check = lambda: lane.key_runs > runs  # noqa: E731
        else:
            lane, reports = self.lanes[name], len(self.lanes[name].reported)
            check = lambda: len(lane.reported) > reports  # noqa: E731
        with self._lock:
            self.pending.append((f"{role}:{name}", at, check))

    def run(self) -> None:
        while not self._done.is_set():
            self.poll()
            time.sleep(0.1)

    def poll(self) -> None:
        for tail in self.tails.values():
            tail.poll()
        now = time.monotonic()
        with self._lock:
            for entry in list(self.pending):
                if entry[2]():
                    self.times.append(now - entry[1])
                    self.recovered.append((entry[0], now - entry[1]))
                    self.pending.remove(entry)

    def stop(self) -> list[str]:
        """Stop watching; return the restarts that never recovered."""
        self._done.set()
        self.join()
        self.poll()
        return [what for what, _, _ in self.pending]


class Executor:
    """Runs ``schedule`` (times relative to :meth:`run`'s call) on ``net``."""

    def __init__(
        self,
        net: HostedNetwork,
        lanes: Mapping[str, Lane],
        recoveries: Recoveries,
        log: Callable[[str], None],
    ) -> None:
        self.net, self.lanes, self.recoveries, self.log = net, lanes, recoveries, log
        self.tally = Tally()

    def run(self, schedule: Schedule) -> None:
        start = time.monotonic()
        threads = []
        for fault in schedule.faults:
            time.sleep(max(0.0, start + fault.start_s - time.monotonic()))
            thread = threading.Thread(target=self._carry_out, args=(fault, start), daemon=True)
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()

    def _carry_out(self, fault: Fault, start: float) -> None:
        role, name = fault.target.role, fault.target.name
        self.log(
            f"{time.monotonic() - start:7.1f}s {fault.kind} {fault.target}"
            + (f" ({fault.link})" if fault.link else "")
        )
        if fault.kind is FaultKind.CUT:
            assert fault.link is not None
            self.net.hosts.impair(name, fault.link)
            self.tally.cuts += 1
        elif fault.kind is FaultKind.PAUSE:
            self._signal(role, name, signal.SIGSTOP)
            self.tally.pauses += 1
        else:
            killed = self._kill(role, name)
        time.sleep(max(0.0, start + fault.end_s - time.monotonic()))
        if fault.kind is FaultKind.CUT:
            self.net.hosts.restore(name)
        elif fault.kind is FaultKind.PAUSE:
            self._signal(role, name, signal.SIGCONT)
        else:
            self._restart(killed, name)

    def _signal(self, role: str, name: str, signum: int) -> None:
        if role == "site":
            self.net.signal_site(name, signum)
        elif role == "subscriber":
            self.net.signal_subscriber(name, signum)
        else:
            self.lanes[name].pause(signum)

    def _kill(self, role: str, name: str) -> str:
        """SIGKILL the process; return the role of what was killed (a publisher's lane may
        have been running its publisher rather than its key service, or the other way)."""
        if role == "site":
            if not self.net.site_running(name):
                self.tally.exited_on_their_own.append(f"site {name}: {self.net.output(name)}")
            self.net.kill_site(name)
        elif role == "subscriber":
            if not self.net.subscriber_running(name):
                self.tally.exited_on_their_own.append(f"{name}: {self.net.output(name)}")
            self.net.signal_subscriber(name, signal.SIGKILL)
            self.net.subscriber_exit(name)
        else:
            lane = self.lanes[name]
            deadline = time.monotonic() + 15
            while lane.running() != role and lane.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)  # a key service runs before each batch; catch it running
            killed = lane.hold()
            self.tally.killed(killed or f"{role} (between runs)")
            return killed or PUBLISHER  # (nothing ran: it recovers when it publishes again)
        self.tally.killed(role)
        return role

    def _restart(self, role: str, name: str) -> None:
        if role == "site":
            self.net.restart_site(name, joined=False)
        elif role == "subscriber":
            self.net.start_subscriber(name)
        else:
            self.lanes[name].release()
        self.tally.restarts += 1
        self.recoveries.restarted(role, name)
        self.log(f"{time.strftime('%H:%M:%S')} restarted {role}:{name}")
