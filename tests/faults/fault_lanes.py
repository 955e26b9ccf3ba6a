"""A publisher's lane: its documents published in order, whatever kills it.

A lane runs ``xdn publish`` on the documents not yet reported published, a batch at a time,
each batch preceded by a key service run (``xdn publish`` without DOC: the key service brings
the group keys up to date). A killed run is started again, by the lane, once the fault ends,
on the documents it had not reported: publishing is idempotent per content, so a document the
root took but the killed run could not report is answered "already published". The lane keeps
the order the publisher reported, which is the order of its signed sequence.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deploy.network import LocalNetwork

__all__ = ["Document", "Lane"]

_REPORT = re.compile(r"^(published|already published) (\S+) v(\d+)\b")
PUBLISHER, KEY_SERVICE = "publisher", "key-service"


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    document_id: str  # the file's stem
    path: Path


class Lane(threading.Thread):
    """Publishes ``documents`` for ``publisher`` (call :meth:`start`; faults through
    :meth:`hold`, :meth:`release` and :meth:`pause`)."""

    def __init__(
        self,
        net: LocalNetwork,
        publisher: str,
        documents: Sequence[Document],
        *,
        batch: int,
        rate: float,
        stall_s: float = 240.0,
    ) -> None:
        super().__init__(name=f"lane-{publisher}", daemon=True)
        self.net, self.publisher = net, publisher
        self.pending = deque(documents)
        self.batch, self.rate, self.stall_s = batch, rate, stall_s
        self.reported: list[tuple[str, int]] = []  # (document, version), in the publisher's order
        self.already = 0  # documents answered "already published" (a retry suppressed)
        self.key_runs = 0  # key service runs that completed
        self.errors: list[str] = []  # runs that failed without being killed (last lines)
        self.failure: str | None = None
        self._lock = threading.Lock()
        self._held = threading.Event()  # a kill in force: start nothing
        self.finale = threading.Event()  # set when the faults are over: publish the last one
        self._proc: subprocess.Popen[str] | None = None
        self._role = ""
        self._paused: subprocess.Popen[str] | None = None

    # ---- faults (called by the campaign's threads) ----------------------------------------
    def running(self) -> str:
        """The role of the process running now ('' between runs)."""
        with self._lock:
            return self._role if self._proc is not None and self._proc.poll() is None else ""

    def hold(self) -> str:
        """SIGKILL the running process and start no other until :meth:`release`; return the
        role of what was killed ('' if nothing ran)."""
        with self._lock:
            self._held.set()
            proc, role = self._proc, self._role
            if proc is None or proc.poll() is not None:
                return ""
            proc.kill()
        proc.wait()
        return role

    def release(self) -> None:
        self._held.clear()

    def pause(self, signum: int) -> None:
        """SIGSTOP the running process (SIGCONT: continue the one stopped)."""
        with self._lock:
            if signum == signal.SIGSTOP:
                if self._proc is not None and self._proc.poll() is None:
                    self._paused = self._proc
                    self._paused.send_signal(signum)
            elif self._paused is not None:
                if self._paused.poll() is None:
                    self._paused.send_signal(signum)
                self._paused = None

    # ---- the lane -------------------------------------------------------------------------
    def run(self) -> None:
        progress = time.monotonic()
        keys_due = True  # a key service run before each batch (not before a retried one)
        while self.pending:
            if len(self.pending) == 1:
                # The last document waits for the faults to end: something is published after
                # every restart (a restarted part's recovery is seen by what then reaches it).
                self.finale.wait()
                progress = time.monotonic()
            while self._held.is_set():
                time.sleep(0.05)
            before = len(self.reported)
            if keys_due:
                code = self._run(KEY_SERVICE, [])
                self.key_runs += code == 0
                keys_due = code != 0
            if not keys_due:
                size = min(self.batch, max(1, len(self.pending) - 1))  # the last one alone
                batch = [doc.path for doc in list(self.pending)[:size]]
                code = self._run(PUBLISHER, batch)
                keys_due = code == 0
            if len(self.reported) > before or code == 0:
                progress = time.monotonic()
            elif time.monotonic() - progress > self.stall_s:
                self.failure = f"nothing published for {self.stall_s:.0f}s: {self.errors[-3:]}"
                return
            elif not self._held.is_set():
                time.sleep(0.5)  # the root is down or cut off: try again shortly

    def _run(self, role: str, documents: list[Path]) -> int:
        args = self.net.publish_command(self.publisher, documents, rate=self.rate)
        with self._lock:
            if self._held.is_set():
                return -1
            proc = subprocess.Popen(
                args,
                cwd=self.net.workdir,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            self._proc, self._role = proc, role
        tail: deque[str] = deque(maxlen=5)
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                tail.append(line.rstrip())
                if match := _REPORT.match(line):
                    self._reported(match[2], int(match[3]), already=match[1] != "published")
        code = proc.wait()
        with self._lock:
            self._proc = None
        if code != 0 and code != -signal.SIGKILL:
            self.errors.append(" | ".join(tail))
        return code

    def _reported(self, document_id: str, version: int, *, already: bool) -> None:
        expected = self.pending[0].document_id if self.pending else None
        if document_id != expected:
            self.failure = f"reported {document_id} v{version}, expected {expected} next"
        else:
            self.pending.popleft()
        self.reported.append((document_id, version))
        self.already += already
