"""Streaming keeps memory bounded: peak RSS growth does not follow the document's size.

Each run happens in a fresh interpreter that resets its peak resident set size after its imports
(``/proc/self/clear_refs``) and reads it again (``VmHWM``) after encoding or decoding: RSS counts
lxml's C allocations, which ``tracemalloc`` cannot see. A ~50 MB document must not cost much
more than a ~10 MB one with as many fragments, and either costs a small multiple of the largest
fragment plus a constant. (What does grow with the document is up to about a kilobyte of
bookkeeping per fragment: leaf hashes, positions, offsets into the decoder's spool.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deploy import docgen

pytestmark = pytest.mark.integration

_CHILD = r"""
import gc, io, json, sys
from pathlib import Path
from xdn import crypto
from xdn.codec import ConceptKey, concept_order, decode_file, encode_file
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

mode, source, target = sys.argv[1:4]
ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ontology)
signer = crypto.load_private_key_pem(Path(target + ".key").read_bytes()) if mode == "decode" \
    else crypto.generate_private_key()
group = {c: crypto.sha256(c.encode()) for c in ontology.concepts}
gc.collect()
def vm(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")  # reset the peak (VmHWM) to the current RSS, so imports do not count
before = vm("VmRSS")
largest = 0
if mode == "encode":
    Path(target + ".key").write_bytes(crypto.private_key_to_pem(signer))
    keys = {c: ConceptKey(publisher="p", concept=c, epoch=1, group_key=k) for c, k in group.items()}
    with open(target, "wb") as out:
        report = encode_file(Path(source), out, mapping=mapping, document_id="d", publisher="p",
                             version=1, issued_at_ms=0, keys=keys, signer=signer,
                             concept_order=concept_order(ontology))
    largest = report.largest_fragment
else:
    with open(target + ".view", "wb") as out:
        decode_file(Path(source), out, publisher_key=signer.public_key(),
                    keys={("p", c, 1): k for c, k in group.items()})
after = vm("VmHWM")
print(json.dumps({"growth_kib": after - before, "largest": largest}))
"""


def _run(mode: str, source: Path, target: Path) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(source), str(target)],
        capture_output=True,
        check=True,
        text=True,
        timeout=600,
    )
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _measure(tmp_path: Path, size: int, hint: int) -> tuple[int, int, int]:
    doc = tmp_path / f"doc-{size}.xml"
    with doc.open("wb") as out:
        docgen.generate("production-dept", size, out, seed=7, fragments_hint=hint)
    export = tmp_path / f"doc-{size}.export.xml"
    encoded = _run("encode", doc, export)
    decoded = _run("decode", export, export)
    return encoded["growth_kib"] * 1024, decoded["growth_kib"] * 1024, encoded["largest"]


def test_peak_memory_does_not_grow_with_the_document(tmp_path: Path) -> None:
    small_enc, small_dec, small_largest = _measure(tmp_path, 10_000_000, 2_000)
    big_enc, big_dec, largest = _measure(tmp_path, 50_000_000, 2_000)
    print(f"encode: +{small_enc >> 20} MiB (10 MB), +{big_enc >> 20} MiB (50 MB); "
          f"decode: +{small_dec >> 20} MiB, +{big_dec >> 20} MiB; largest fragment "
          f"{small_largest >> 10} KiB, {largest >> 10} KiB")  # fmt: skip
    constant = 24 * 1024 * 1024  # interpreter, lxml and OpenSSL working sets, allocator slack
    for growth in (big_enc, big_dec):
        assert growth < 10 * largest + constant
        assert growth < 50_000_000 // 4
    assert big_enc < small_enc + 4 * largest + 8 * 1024 * 1024
    assert big_dec < small_dec + 4 * largest + 8 * 1024 * 1024
