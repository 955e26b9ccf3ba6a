"""Provenance logs for the audit benchmark, written with our own API and the real PKI, cached.

Theory of operation
-------------------
The corpus is what a large dissemination network logs when its sites sign in batches: per
document, the publisher originates it (:func:`xdn.provenance.originate`) to a root site; the
root site relays it to :attr:`CorpusSpec.fanout` edge sites at once
(:func:`xdn.provenance.relay_fanout`: one batch signature per up to 1,024 envelopes, the other
hops written from a template, as a site does); the first edge site relays it on to
:attr:`CorpusSpec.subscribers` subscribers, each of which signs a receipt
(:func:`xdn.provenance.receipt`). Every signature is real and verifies: nothing is copied with
altered ids. A document adds ``1 + fanout + 2 * subscribers`` envelopes; signing costs a handful
of ECDSA signatures per document, so writing is dominated by templating and compression.

Logs are gzip-compressed N-Quads (``provenance.nq.gz``; the root site's rotated every
:attr:`CorpusSpec.rotate_envelopes` envelopes, ``provenance.nq.N.gz``, each starting with the
node's description as a rotated log does), so 10 million envelopes take a few GB, not tens.
They are cached under ``build/bench/audit-logs/<key>/`` (the key names the parameters); a
directory with a ``complete`` marker is reused as it is. Writing them is input preparation:
nothing here is measured.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from xdn import certs, crypto
from xdn.provenance import (
    ContentFacts,
    Hop,
    LeafRanges,
    Signer,
    node_description,
    originate,
    receipt,
    relay,
    relay_fanout,
)

__all__ = ["Corpus", "CorpusSpec", "corpus"]

#: The time the corpus's certificates are issued at; envelopes are stamped from it on.
ISSUED = datetime(2026, 1, 5, tzinfo=UTC)
_T0 = int(ISSUED.timestamp() * 1000) + 60_000
_LEAVES = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class CorpusSpec:
    """What to generate: about ``envelopes`` envelopes (whole documents)."""

    envelopes: int
    fanout: int = 1024
    subscribers: int = 2
    #: The root site's log rotates after this many envelopes (0: an eighth of the corpus,
    #: 2,000 to 200,000), so that every core has files to read (a gzip file is one task).
    rotate_envelopes: int = 0

    @property
    def per_document(self) -> int:
        return 1 + self.fanout + 2 * self.subscribers

    @property
    def rotation(self) -> int:
        return self.rotate_envelopes or min(200_000, max(2_000, self.envelopes // 8))

    @property
    def documents(self) -> int:
        return max(1, round(self.envelopes / self.per_document))

    def key(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True) + "|v1"
        return f"{self.envelopes}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Corpus:
    """Generated logs: where they are, the CA that certifies every node, how many envelopes."""

    logs: Path
    ca_pem: bytes
    envelopes: int
    documents: int
    bytes_stored: int


@dataclass(frozen=True, slots=True)
class _Party:
    name: str  # its log directory
    signer: Signer
    cert_pem: bytes

    @property
    def uri(self) -> str:
        return self.signer.node_uri

    def mid(self, document: str, hop: str) -> str:
        return f"{self.uri}msg/{document}/{hop}"


def _party(ca: tuple[bytes, bytes], name: str, role: str) -> _Party:
    block = {certs.BLOCK_FIELD: "WorkOrder"} if role == "site" else None
    cert, key = certs.issue(*ca, name=name, role=role, attributes=block, now=ISSUED)
    signer = Signer(
        node_uri=certs.node_uri(name),
        private_key=crypto.load_private_key_pem(key),
        certificate=cert,
    )
    return _Party(name=name.removeprefix("bench-"), signer=signer, cert_pem=cert)


class _Logs:
    """One gzip log per node (the root's rotated), each starting with the node's description."""

    def __init__(self, root: Path, rotate_envelopes: int) -> None:
        self._root, self._rotate = root, rotate_envelopes
        self._open: dict[str, tuple[gzip.GzipFile, int, int]] = {}  # name → file, part, envelopes

    def _file(self, party: _Party, part: int) -> gzip.GzipFile:
        suffix = ".nq.gz" if part == 0 else f".nq.{part}.gz"
        path = self._root / party.name / f"provenance{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        out = gzip.open(path, "wb", compresslevel=1)  # noqa: SIM115 (kept open, closed by close())
        out.write(node_description(party.uri, party.cert_pem))
        return out

    def describe_only(self, party: _Party) -> None:
        """A log holding only the node's description (a node that logged nothing else)."""
        self._file(party, 0).close()

    def write(self, party: _Party, data: bytes, envelopes: int) -> None:
        out, part, count = self._open.get(party.name) or (self._file(party, 0), 0, 0)
        if count and count + envelopes > self._rotate:
            out.close()
            part, count = part + 1, 0
            out = self._file(party, part)
        out.write(data)
        self._open[party.name] = (out, part, count + envelopes)

    def close(self) -> None:
        for out, _, _ in self._open.values():
            out.close()


def _write(spec: CorpusSpec, target: Path) -> tuple[bytes, int]:
    ca = certs.create_ca("bench-audit-ca", now=ISSUED - timedelta(days=1))
    pub = _party(ca, "bench-pub", "publisher")
    root = _party(ca, "bench-root", "site")
    edges = [_party(ca, f"bench-edge-{i}", "site") for i in range(spec.fanout)]
    subs = [_party(ca, f"bench-sub-{i}", "subscriber") for i in range(spec.subscribers)]
    logs = _Logs(target, spec.rotation)
    everything = LeafRanges(((0, _LEAVES),))
    envelopes = 0
    try:
        for edge in edges[1:]:  # edge sites that only receive: their logs hold their description
            logs.describe_only(edge)
        for d in range(spec.documents):
            doc, t = f"doc-{d}", _T0 + d * 100
            content = ContentFacts(
                document_id=doc,
                publisher="bench-pub",
                manifest_root=hashlib.sha256(doc.encode()).digest(),
                leaf_count=_LEAVES,
            )
            m = originate(
                pub.signer,
                message_uri=pub.mid(doc, "p"),
                recipient_uri=root.uri,
                content=content,
                timestamp_ms=t,
            )
            logs.write(pub, m.latest_graphs_nquads(), 1)
            hops = [
                Hop(message_uri=root.mid(doc, f"r{i}"), recipient_uri=e.uri, leaves=everything)
                for i, e in enumerate(edges)
            ]
            fanned = relay_fanout(m, root.signer, hops, timestamp_ms=t + 5)
            logs.write(root, b"".join(fanned.graphs), len(fanned.graphs))
            to_edge = fanned.batch_heads[0]  # the whole message of the hop to edges[0]
            for j, sub in enumerate(subs):
                onward = relay(
                    to_edge,
                    edges[0].signer,
                    message_uri=edges[0].mid(doc, f"s{j}"),
                    recipient_uri=sub.uri,
                    leaves=everything,
                    timestamp_ms=t + 10,
                )
                logs.write(edges[0], onward.latest_graphs_nquads(), 1)
                got = receipt(
                    onward, sub.signer, message_uri=sub.mid(doc, "r"), timestamp_ms=t + 15
                )
                logs.write(sub, got.latest_graphs_nquads(), 1)
            envelopes += 1 + len(fanned.graphs) + 2 * len(subs)
    finally:
        logs.close()
    return ca[0], envelopes


def corpus(spec: CorpusSpec, cache: Path = Path("build/bench/audit-logs")) -> Corpus:
    """The logs of ``spec``, generated once and cached under ``cache`` (by parameters)."""
    target = cache / spec.key()
    done = target / "complete"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        ca_pem, envelopes = _write(spec, target / "logs")
        (target / "ca.pem").write_bytes(ca_pem)
        done.write_text(json.dumps({"envelopes": envelopes}))
    stored = sum(p.stat().st_size for p in (target / "logs").rglob("*") if p.is_file())
    return Corpus(
        logs=target / "logs",
        ca_pem=(target / "ca.pem").read_bytes(),
        envelopes=json.loads(done.read_text())["envelopes"],
        documents=spec.documents,
        bytes_stored=stored,
    )
