"""``xdn encode`` / ``xdn decode``: the interop CLI round trip, keys on disk, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from cli import codec as codec_cli
from cli import main as cli
from xdn import crypto
from xdn.paths import REPO_ROOT

ONTOLOGY = REPO_ROOT / "ontology" / "production.owl"
MAPPING = REPO_ROOT / "ontology" / "mappings" / "production-dept.toml"
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
XENC = "http://www.w3.org/2001/04/xmlenc#"
DS = "http://www.w3.org/2000/09/xmldsig#"


def encode(tmp_path: Path, *extra: str) -> tuple[Path, Path]:
    out, keys = tmp_path / "out.xml", tmp_path / "keys"
    argv = ["encode", "--ontology", str(ONTOLOGY), "--mapping", str(MAPPING), "--doc",
            str(SAMPLE), "--out", str(out), "--keys-out", str(keys), *extra]  # fmt: skip
    assert cli.main(argv) == 0
    return out, keys


def decode(export: Path, keys: Path, view: Path, *extra: str) -> int:
    return cli.main(
        ["decode", "--in", str(export), "--keys", str(keys), "--out", str(view), *extra]
    )


def test_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, keys = encode(tmp_path)
    assert "fragments of" in capsys.readouterr().out
    root = etree.parse(str(out)).getroot()
    names = {el.text for el in root.iter(f"{{{DS}}}KeyName")}
    assert names == {p.name for p in keys.iterdir()}
    assert all(len((keys / n).read_bytes()) == 32 for n in names if n)
    assert all(n and n.startswith("production-dept.") and n.endswith(".e1.production-dept-order")
               for n in names)  # fmt: skip
    assert (tmp_path / "out.publisher.pem").exists()
    view = tmp_path / "view.xml"
    assert decode(out, keys, view) == 0
    assert "0 withheld" in capsys.readouterr().out
    text = view.read_bytes()
    assert b"xdn:view" in text and b"WO-240312-001" in text and b"xdn:withheld" not in text


def test_decode_with_some_keys_withholds_the_rest(tmp_path: Path) -> None:
    out, keys = encode(tmp_path)
    for key in keys.iterdir():
        if ".ProductionStep." not in key.name and ".WorkOrder." not in key.name:
            key.unlink()
    view = tmp_path / "view.xml"
    assert decode(out, keys, view) == 0
    assert b"xdn:withheld" in view.read_bytes()


def test_tampered_export_is_refused_and_no_view_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, keys = encode(tmp_path)
    data = out.read_bytes()
    at = data.index(b"<xenc:CipherValue>") + 40
    out.write_bytes(data[:at] + (b"A" if data[at : at + 1] != b"A" else b"B") + data[at + 1 :])
    view = tmp_path / "view.xml"
    assert decode(out, keys, view) == 2
    assert "refused: fragment could not be decrypted or verified" in capsys.readouterr().err
    assert not view.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".view.xml")]


def test_given_signing_key_and_publisher(tmp_path: Path) -> None:
    key = crypto.generate_private_key()
    pem = tmp_path / "signer.pem"
    pem.write_bytes(crypto.private_key_to_pem(key))
    out, keys = encode(tmp_path, "--signing-key", str(pem), "--publisher", "acme",
                       "--document-id", "doc-7", "--version", "4")  # fmt: skip
    assert (
        crypto.public_key_to_pem(key.public_key()) == (tmp_path / "out.publisher.pem").read_bytes()
    )
    assert all(p.name.startswith("acme.") and p.name.endswith(".e1.doc-7") for p in keys.iterdir())
    other = tmp_path / "other.pem"
    other.write_bytes(crypto.public_key_to_pem(crypto.generate_private_key().public_key()))
    assert decode(out, keys, tmp_path / "view.xml", "--publisher-key", str(other)) == 2


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = encode(tmp_path)
    assert decode(out, tmp_path / "missing", tmp_path / "view.xml") == 1
    assert "not a directory of keys" in capsys.readouterr().err
    assert decode(out, tmp_path, tmp_path / "v.xml", "--max-text-mb", "0") == 1


def test_progress_bar_on_big_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec_cli, "_PROGRESS_FROM", 0)
    out, keys = encode(tmp_path)
    assert decode(out, keys, tmp_path / "view.xml") == 0
