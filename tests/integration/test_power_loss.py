"""A power loss right after an acknowledgement loses nothing acknowledged (issue #18).

Simulated, for the site's SQLite store and a subscriber's keyring: a child process routes
documents through a real :class:`~disseminator.store.Store` one commit at a time, accepts each
in a real :class:`~subscriber.store.Keyring` (as a subscriber applying it would), then writes
``ACK n`` to its stdout — the point where a site sends its acknowledgement. It runs under
``strace``, which records every write to a file (``pwrite64``, ``write``, ``ftruncate``, with
the bytes), every ``fsync`` / ``fdatasync``, and the ``ACK`` lines, in order. A power loss just
after ``ACK n`` is then modelled from the trace: each file holds exactly the writes that an
``fsync`` of that file made durable before that point; every write not yet synced is lost
(the page cache is gone). The store is opened from those files, as a restarted site would,
and must hold everything acknowledged up to ``n``: the uplink's resume counter and the
deliveries, and the subscriber's applied cursor.

With ``synchronous=FULL`` (``durable=True``, the default) this holds at every ``ACK``. With
``synchronous=NORMAL`` (``durable=False``, the old setting) it does not — the second test shows
acknowledged commits lost — so the simulation can tell the two apart.

What the model leaves out: a new file's directory entry is taken as durable once the file had
a synced write (SQLite syncs the folder after creating its WAL); an unlink becomes durable when
the folder is next synced (so the rollback journal of the store's creation, deleted before the
WAL's folder sync, is gone); a write is lost or kept whole, never torn (SQLite's WAL checksums
cover torn frames). The subscriber's view files are covered by tests/unit/test_durable_writes.py
(sync order), not by this simulation; nor are gRPC or the daemons (the child does what they do
around an acknowledgement, with the same classes).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from disseminator.store import Store
from subscriber.store import Keyring

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)


@pytest.fixture(autouse=True)
def _strace() -> None:
    if shutil.which("strace") is None:  # (make test installs it; a skip would hide the test)
        pytest.fail("strace is not installed: the power-loss simulation traces the writes with "
                    "it (make test installs it; or apt-get install strace)")

DOCUMENTS = 25

_CHILD = """
import os, sys
from pathlib import Path
from disseminator.store import Append, Store
from subscriber.store import Keyring
keyring = Keyring(Path(sys.argv[1]) / "keyring.sqlite")  # a subscriber's: always FULL
store = Store(Path(sys.argv[1]) / "site.sqlite", durable=sys.argv[2] == "full")
for n in range(1, int(sys.argv[3]) + 1):
    store.commit_routing(
        document=("p", f"doc-{n}", 1),
        appends=[Append(kind="subscriber", name="s", payload=n.to_bytes(4, "big") * 1024)],
        counter=("uplink", n), sequence=n, at_ms=n, refuse_full=True,
    )
    record = {"publisher": "p", "document": f"doc-{n}", "version": 1, "fragments": {}}
    keyring.accept(record, address="site", sequence=n)
    os.write(1, f"ACK {n}\\n".encode())  # the acknowledgement, after the commit
os._exit(0)  # no close: no checkpoint at exit
"""

_CALL = re.compile(r"^(\w+)\((\d+)<([^>]*)>(.*)\) += (-?\d+)")
_UNLINK = re.compile(r'^unlink(?:at)?\((?:[^,]*, )?"((?:\\x[0-9a-f]{2})*)"')
_BYTES = re.compile(r'^, "((?:\\x[0-9a-f]{2})*)"(\.\.\.)?, (\d+)(?:, (\d+))?$')


@dataclass
class _File:
    durable: bytearray = field(default_factory=bytearray)
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)
    position: int = 0  # for write(2): SQLite uses pwrite64, others may not
    unlinked: bool = False  # unlinked: gone once its folder is synced


def _apply(image: bytearray, op: tuple[str, int, bytes]) -> None:
    kind, offset, data = op
    if kind == "truncate":
        del image[offset:]
        image.extend(bytes(max(0, offset - len(image))))
        return
    if len(image) < offset:
        image.extend(bytes(offset - len(image)))
    image[offset:offset + len(data)] = data


def power_loss_images(trace: str, state_dir: Path) -> dict[int, dict[str, bytes]]:
    """For each ``ACK n`` in the trace: what each file under ``state_dir`` holds on disk if
    power is lost right after it (name → bytes)."""
    files: dict[str, _File] = {}
    images: dict[int, dict[str, bytes]] = {}
    root = str(state_dir)
    for line in trace.splitlines():
        if (unlink := _UNLINK.match(line)) is not None and line.endswith("= 0"):
            gone = bytes.fromhex(unlink[1].replace("\\x", "")).decode()
            if gone in files:
                files[gone].unlinked = True
            continue
        call = _CALL.match(line)
        if call is None or int(call[5]) < 0:
            continue
        name, rest = call[1], call[4]
        path = bytes.fromhex(call[3].replace("\\x", "")).decode() if "\\x" in call[3] else call[3]
        if name == "write" and call[2] == "1":
            data = bytes.fromhex(_BYTES.match(rest)[1].replace("\\x", ""))  # type: ignore[index]
            for ack in re.findall(rb"ACK (\d+)\n", data):
                images[int(ack)] = {
                    Path(p).name: bytes(f.durable) for p, f in files.items() if f.durable
                }
            continue
        if not path.startswith(root):
            continue
        file = files.setdefault(path, _File())
        if name in ("pwrite64", "write"):
            parts = _BYTES.match(rest)
            assert parts is not None and not parts[2], f"unparsed or cut short: {line[:200]}"
            data = bytes.fromhex(parts[1].replace("\\x", ""))
            offset = int(parts[4]) if name == "pwrite64" else file.position
            file.pending.append(("write", offset, data[: int(call[5])]))
            if name == "write":
                file.position = offset + int(call[5])
        elif name == "ftruncate":
            file.pending.append(("truncate", int(rest.lstrip(", ")), b""))
        elif name in ("fsync", "fdatasync") and path == root:  # the folder: unlinks are done
            del files[path]
            for gone in [p for p, f in files.items() if f.unlinked]:
                del files[gone]
        elif name in ("fsync", "fdatasync"):
            for op in file.pending:
                _apply(file.durable, op)
            file.pending.clear()
    return images


def _run_traced(tmp_path: Path, mode: str) -> tuple[Path, dict[int, dict[str, bytes]]]:
    state, trace = tmp_path / "state", tmp_path / "trace.txt"
    state.mkdir()
    done = subprocess.run(
        ["strace", "-qq", "-y", "-xx", "-s", "1000000", "-o", str(trace),
         "-e", "trace=pwrite64,write,ftruncate,fsync,fdatasync,unlink,unlinkat",
         sys.executable, "-c", _CHILD, str(state), mode, str(DOCUMENTS)],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == [
        w for n in range(1, DOCUMENTS + 1) for w in ("ACK", str(n))
    ]
    return state, power_loss_images(trace.read_text(), state)


def _restored(tmp_path: Path, n: int, image: dict[str, bytes]) -> tuple[int, int, int]:
    """Open the stores from the files as on disk after a power loss at ``ACK n``: (the site's
    uplink resume counter, its deliveries queued, the subscriber keyring's applied cursor)."""
    folder = tmp_path / f"after-ack-{n}"
    folder.mkdir()
    for name, data in image.items():
        if not name.endswith("-shm"):  # the WAL index is rebuilt from the WAL
            (folder / name).write_bytes(data)
    store, keyring = Store(folder / "site.sqlite"), Keyring(folder / "keyring.sqlite")
    try:
        queued = len(store.pending("subscriber", "s", after=0, limit=1000))
        return store.counter("uplink"), queued, keyring.applied("site")
    finally:
        store.close()
        keyring.close()


def test_full_sync_keeps_every_acknowledged_commit_through_a_power_loss(tmp_path: Path) -> None:
    _, images = _run_traced(tmp_path, "full")
    assert sorted(images) == list(range(1, DOCUMENTS + 1))
    for n, image in images.items():
        counter, queued, applied = _restored(tmp_path, n, image)
        assert counter >= n, f"power loss after ACK {n}: the site resumes from {counter}"
        assert queued >= n, f"power loss after ACK {n}: {queued} deliveries left"
        assert applied >= n, f"power loss after ACK {n}: the subscriber applied {applied}"


def test_normal_sync_loses_acknowledged_commits_in_the_simulation(tmp_path: Path) -> None:
    """The model is not vacuous: the old setting fails it."""
    _, images = _run_traced(tmp_path, "normal")
    lost = [n for n, image in images.items() if _restored(tmp_path, n, image)[0] < n]
    assert lost, "synchronous=NORMAL kept every acknowledged commit: the model shows nothing"
