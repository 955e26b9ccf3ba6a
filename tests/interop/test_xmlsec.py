"""Interop: the standard ``xmlsec1`` tool decrypts every fragment ``xdn encode`` writes.

For each ``EncryptedData`` of the export, written alone to a file, ``xmlsec1 --decrypt
--aeskey:NAME KEYDIR/NAME`` must yield exactly the fragment's original element, in canonical
form, with its nested fragments replaced by references. The expected form is computed here from
the original document, independently of the codec. ``xmlsec1`` (Debian package ``xmlsec1``;
``make xmlsec1`` installs it) is required: without it the test fails, it does not skip.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
from lxml import etree

from cli import main as cli
from deploy import docgen
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.xmlsafe import parse_bytes, parse_file

pytestmark = pytest.mark.interop

XENC = "http://www.w3.org/2001/04/xmlenc#"
DS = "http://www.w3.org/2000/09/xmldsig#"
XDN = "https://xdn.example.org/ns#"
ONTOLOGY = REPO_ROOT / "ontology" / "production.owl"


def xmlsec1() -> str:
    found = shutil.which("xmlsec1")
    if found is None:
        pytest.fail(
            "xmlsec1 is not installed: the interop test needs Debian's xmlsec1 "
            "(run `make xmlsec1`, or `apt-get install xmlsec1`)"
        )
    return found


def expected_plaintexts(document: Path, mapping_path: Path, document_id: str) -> list[bytes]:
    """Each mapped node's canonical form, nested mapped nodes replaced by references."""
    mapping = load_mapping(mapping_path, load_ontology([ONTOLOGY]))
    root = parse_file(document).getroot()
    mapped = [node.element for node in map_document(root, mapping)]
    position = {element: index for index, element in enumerate(mapped)}
    expected = []
    for element in mapped:
        twin = copy.deepcopy(element)
        pairs = list(zip(element.iter(), twin.iter(), strict=True))
        for original, copied in reversed(pairs):
            if original is element or original not in position:
                continue
            nearest = next(a for a in original.iterancestors() if a in position)
            if nearest is not element:
                continue
            ref = etree.Element(f"{{{XDN}}}ref", nsmap={"xdn": XDN})
            ref.set("fragment", f"{document_id}#{position[original]}")
            ref.tail = copied.tail
            copied.getparent().replace(copied, ref)
        expected.append(etree.tostring(twin, method="c14n", exclusive=True, with_comments=False))
    return expected


def encode(document: Path, mapping: Path, work: Path) -> None:
    out, keys = work / "out.xml", work / "keys"
    argv = ["encode", "--ontology", str(ONTOLOGY), "--mapping", str(mapping), "--doc",
            str(document), "--out", str(out), "--keys-out", str(keys)]  # fmt: skip
    assert cli.main(argv) == 0


def decrypt_all(tool: str, work: Path) -> dict[int, bytes]:
    """Run xmlsec1 on every EncryptedData; return position → canonical decrypted element."""
    root = parse_file(work / "out.xml").getroot()
    found: dict[int, bytes] = {}
    for index, data in enumerate(root.iter(f"{{{XENC}}}EncryptedData")):
        name = data.findtext(f"{{{DS}}}KeyInfo/{{{DS}}}KeyName")
        header = data.find(f".//{{{XDN}}}fragment")
        assert name and header is not None
        single = work / f"fragment-{index}.xml"
        single.write_bytes(etree.tostring(data, xml_declaration=True, encoding="UTF-8"))
        key = work / "keys" / name
        done = subprocess.run(
            [tool, "--decrypt", f"--aeskey:{name}", str(key), str(single)],
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        element = parse_bytes(done.stdout).getroot()
        canonical = etree.tostring(element, method="c14n", exclusive=True, with_comments=False)
        found[int(header.get("position", "-1"))] = canonical
    return found


@pytest.mark.parametrize("schema", ["production-dept", "qa-company"])
def test_xmlsec1_decrypts_every_fragment_to_the_original(
    schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = xmlsec1()
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("xmlsec1 ")
    mapping = REPO_ROOT / "ontology" / "mappings" / f"{schema}.toml"
    document = tmp_path / f"{schema}-doc.xml"
    with document.open("wb") as out:
        docgen.generate(schema, 12_000, out, seed=3)
    encode(document, mapping, tmp_path)
    expected = expected_plaintexts(document, mapping, document.stem)
    decrypted = decrypt_all(tool, tmp_path)
    assert sorted(decrypted) == list(range(len(expected)))
    for position, plain in enumerate(expected):
        assert decrypted[position] == plain, f"fragment {position}"
