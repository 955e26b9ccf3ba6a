"""What an acknowledgement covers is synced to disk first (issue #18, "durability you can state").

A power loss keeps only what was synced. These tests check the syncs are made, and in the
right order: the site's connection whose commits precede an acknowledgement runs with
``synchronous=FULL`` (unless configured ``normal``), so do the edges' stores (the subscriber's
keyring), and a subscriber's view file is synced before its rename and its folder after, all
before :meth:`Inbox.write_view` returns (the delivery is committed and acknowledged after).
They do not simulate a power loss (tests/integration/test_power_loss.py does, for the SQLite
stores); tests/integration/test_ack_durability.py kills the process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from disseminator.config import load_site_config
from disseminator.store import Store
from subscriber import store as subscriber_store
from subscriber.store import Inbox, Keyring
from xdn.errors import ConfigError

_FULL, _NORMAL = 2, 1  # PRAGMA synchronous


def test_a_site_commits_what_it_acknowledges_with_full_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    try:
        assert store._db.execute("PRAGMA synchronous").fetchone() == (_FULL,)
        assert store._db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        store.close()


def test_durability_normal_is_the_old_setting(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite", durable=False)
    try:
        assert store._db.execute("PRAGMA synchronous").fetchone() == (_NORMAL,)
    finally:
        store.close()


def test_the_subscriber_keyring_commits_with_full_sync(tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "keyring.sqlite")
    try:
        assert keyring._db.execute("PRAGMA synchronous").fetchone() == (_FULL,)
    finally:
        keyring.close()


def _fd_path(fd: int) -> Path:
    return Path(os.readlink(f"/proc/self/fd/{fd}"))


@pytest.mark.parametrize("as_file", [False, True], ids=["bytes", "spooled-file"])
def test_a_view_is_synced_before_its_rename_and_its_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_file: bool
) -> None:
    events: list[tuple[str, Path]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", _fd_path(fd)))
        real_fsync(fd)

    def replace(source: Path, target: Path) -> None:
        events.append(("replace", Path(target)))
        real_replace(source, target)

    monkeypatch.setattr(subscriber_store.os, "fsync", fsync)
    monkeypatch.setattr(subscriber_store.os, "replace", replace)
    inbox = Inbox(tmp_path / "out")
    view: bytes | Path = b"<view/>"
    if as_file:
        view = tmp_path / "spooled.view"
        view.write_bytes(b"<view/>")
    path = inbox.write_view(publisher="p", document_id="d", version=3, view_xml=view)
    assert path.read_bytes() == b"<view/>"
    folder = path.parent
    tmp = path.with_suffix(".tmp")
    synced_bytes = next(i for i, e in enumerate(events) if e[0] == "fsync"
                        and e[1] in (tmp, tmp_path / "spooled.view"))  # fmt: skip
    renamed = events.index(("replace", path))
    synced_folder = max(i for i, e in enumerate(events) if e == ("fsync", folder))
    assert synced_bytes < renamed < synced_folder
    assert ("fsync", folder.parent) in events  # the new publisher folder's entry


def test_site_durability_setting(tmp_path: Path) -> None:
    base = """
[site]
name = "d2"
listen = "127.0.0.1:0"
block = "WorkOrder"
{extra}
[tls]
ca = "ca.pem"
cert = "d2.pem"
key = "d2.key"

[ontology]
files = ["onto.owl"]
"""
    path = tmp_path / "d2.toml"
    path.write_text(base.format(extra=""))
    assert load_site_config(path).durability == "full"
    path.write_text(base.format(extra='durability = "normal"'))
    assert load_site_config(path).durability == "normal"
    path.write_text(base.format(extra='durability = "off"'))
    with pytest.raises(ConfigError, match="durability"):
        load_site_config(path)
