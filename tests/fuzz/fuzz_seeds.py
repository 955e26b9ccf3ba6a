"""The fuzz seeds: small valid inputs of every target, signed under the fuzz PKI in force.

Coverage-guided fuzzing starts deep in a parser from a valid input instead of at its first byte
check. The signed seeds (provenance chains, leases, key messages, certificates) are only valid
under the PKI that signed them, which is made at run time (:func:`fuzz_targets.pki_dir`: no
private key is committed), so the driver and the replay test make them afresh
(:func:`all_seeds`); the copies committed in ``corpus/`` (``python tests/fuzz/fuzz_seeds.py``
rewrites them after a change of a wire or file format) were signed under a PKI since discarded,
and exercise the refusals of a foreign CA.
"""

from __future__ import annotations

import base64
import functools
import sys
from datetime import timedelta
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

from fuzz_targets import CORPUS_DIR, ISSUED, NOW, pki, production_mapping  # noqa: E402

from xdn import certs, codec, crypto, provenance  # noqa: E402
from xdn.mapping import map_document  # noqa: E402
from xdn.paths import REPO_ROOT  # noqa: E402
from xdn.xmlsafe import parse_bytes  # noqa: E402

SMALL_ORDER = b"""<?xml version="1.0"?>
<pd:WorkOrders xmlns:pd="urn:example:production-dept">
  <pd:Order id="o1"><pd:Manufacturing><pd:Step n="1"><pd:Setting>40</pd:Setting></pd:Step>
  </pd:Manufacturing><pd:QA>ok</pd:QA></pd:Order>
</pd:WorkOrders>
"""


def signer(name: str) -> provenance.Signer:
    return provenance.Signer(
        node_uri=certs.node_uri(name),
        private_key=crypto.load_private_key_pem(pki(f"{name}.key")),
        certificate=pki(f"{name}.pem"),
    )


def encoded_order() -> codec.EncodedDocument:
    keys = {
        c: codec.ConceptKey(publisher="production-dept", concept=c, epoch=1, group_key=bytes(32))
        for c in {r.concept for r in production_mapping().rules}
    }
    return codec.encode(
        map_document(parse_bytes(SMALL_ORDER), production_mapping()),
        document_id="order-1",
        publisher="production-dept",
        version=1,
        issued_at_ms=int(NOW.timestamp() * 1000),
        keys=keys,
        signer=crypto.load_private_key_pem(pki("production-dept.key")),
    )


def chain(encoded: codec.EncodedDocument) -> tuple[provenance.Message, provenance.Message]:
    """The publisher's message to d1, and d1's hop to d2."""
    publisher, d1 = signer("production-dept"), signer("d1")
    manifest = encoded.signed_manifest.manifest
    first = provenance.originate(
        publisher,
        message_uri=provenance.message_uri(publisher.node_uri, "order-1", "v1"),
        recipient_uri=d1.node_uri,
        content=provenance.ContentFacts(
            document_id="order-1",
            publisher="production-dept",
            manifest_root=manifest.root,
            leaf_count=manifest.leaf_count,
        ),
        timestamp_ms=int(NOW.timestamp() * 1000),
    )
    hop = provenance.relay(
        first,
        d1,
        message_uri=provenance.message_uri(d1.node_uri, "order-1", "v1", "to-d2"),
        recipient_uri=certs.node_uri("d2"),
        leaves=provenance.LeafRanges(((0, manifest.leaf_count),)),
        timestamp_ms=int(NOW.timestamp() * 1000) + 1,
    )
    return first, hop


def upstream_seeds(
    encoded: codec.EncodedDocument, first: provenance.Message, crl: bytes
) -> list[bytes]:
    """Deliveries as an uplink sends them: a document, a rekey, an enrolment, a CRL."""
    from xdn import lkh, wireconv
    from xdn.wire.v1 import dissemination_pb2 as pb

    diss = wireconv.dissemination_to_pb(
        encoded.signed_manifest,
        ((f, encoded.range_proofs[f.concept]) for f in encoded.fragments),
        provenance=first.to_nquads(),
        publisher_certificate=pki("production-dept.pem"),
    )
    signer = lkh.KeySigner(
        publisher="production-dept",
        private_key=crypto.load_private_key_pem(pki("production-dept.key")),
        certificate=pki("production-dept.pem"),
    )
    alice = certs.credential_from_pem(pki("alice.pem")).member_id
    group = lkh.GroupController(publisher="production-dept", concept="WorkOrder")
    change = group.rekey(joins=[alice, "bob@" + "0" * 32])
    enrolment = group.path_refresh(alice, certs.public_key_of(pki("alice.pem")))
    return [
        pb.Delivery(sequence=1, dissemination=diss).SerializeToString(),
        pb.Delivery(
            sequence=2, rekey=wireconv.rekey_to_pb(signer.sign(change.message))
        ).SerializeToString(),
        pb.Delivery(
            sequence=3, key=wireconv.enrolment_to_pb(signer.sign(enrolment))
        ).SerializeToString(),
        pb.Delivery(sequence=4, revocation_list=pb.RevocationList(crl=crl)).SerializeToString(),
    ]


def der(pem: bytes) -> bytes:
    body = b"".join(line for line in pem.splitlines() if not line.startswith(b"-----"))
    return base64.b64decode(body)


@functools.cache
def all_seeds() -> dict[str, dict[str, bytes]]:
    """Every target's seeds by file name, signed under the fuzz PKI in force."""
    found: dict[str, dict[str, bytes]] = {}

    def write(target: str, name: str, data: bytes) -> None:
        found.setdefault(target, {})[name] = data

    samples = REPO_ROOT / "ontology" / "samples"
    for sample in sorted(samples.glob("*.xml")):
        write("xml_document", sample.name, sample.read_bytes())
    write("xml_document", "small.xml", SMALL_ORDER)
    write(
        "xml_document",
        "misc.xml",
        b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- c --><?pi x?><a xmlns="urn:a" b="1">'
        b"<![CDATA[x<y]]>&amp;&#x263A;<c/>tail</a>",
    )
    write(
        "xml_publish",
        "production-dept-order.xml",
        (samples / "production-dept-order.xml").read_bytes(),
    )
    write("xml_publish", "small.xml", SMALL_ORDER)
    encoded = encoded_order()
    write("xml_export", "small.xml", codec.to_encrypted_xml(encoded))
    first, hop = chain(encoded)
    write("provenance", "published.nq", first.to_nquads())
    write("provenance", "relayed.nq", hop.to_nquads())
    write("nquads", "relayed.nq", hop.to_nquads())
    write(
        "nquads",
        "terms.nq",
        b'<http://a/s> <http://a/p> "x\\n\\u00e9\\"" <http://a/g> .\n'
        b'<http://a/s> <http://a/p> "chat"@fr-CA .\n'
        b'<urn:x:s>\t<http://a/p>\t"1"^^<http://www.w3.org/2001/XMLSchema#integer> .\r\n'
        b"# comment\n",
    )
    write(
        "policy_toml",
        "production-dept.toml",
        (REPO_ROOT / "policies" / "production-dept.toml").read_bytes(),
    )
    write(
        "mapping_toml",
        "production-dept.toml",
        (REPO_ROOT / "ontology" / "mappings" / "production-dept.toml").read_bytes(),
    )
    write("site_toml", "d1.toml", (REPO_ROOT / "deploy" / "sites" / "d1.toml").read_bytes())
    write(
        "topology_toml",
        "three-sites.toml",
        (REPO_ROOT / "deploy" / "topologies" / "three-sites.toml").read_bytes(),
    )
    write("certificate", "publisher.der", der(pki("production-dept.pem")))
    write("certificate", "site.pem", pki("d1.pem"))
    ca_key = pki("ca.key")
    crl = certs.create_crl(
        pki("ca.pem"),
        ca_key,
        [(7, ISSUED)],
        now=ISSUED,
        next_update=ISSUED + timedelta(days=3650),
        number=1,
    )
    write("certificate", "crl.der", b"C" + der(crl))
    write("notification", "receipt.nq", b"application/n-quads\n" + first.to_nquads())
    write(
        "notification",
        "turtle.ttl",
        b"text/turtle; charset=utf-8\n@prefix as: <https://www.w3.org/ns/activitystreams#> .\n"
        b'<https://a.example/n> a as:Announce ; as:summary "hello"@en .\n',
    )
    write(
        "notification",
        "jsonld.json",
        b"application/ld+json\n"
        b'{"@context": "https://www.w3.org/ns/activitystreams", "@id": "https://a.example/n",'
        b' "type": "Announce", "summary": "hi"}',
    )
    write(
        "http_headers",
        "headers.txt",
        b'application/trig;q=0.9, application/n-quads, */*;q=0.1\ntext/turtle; charset="utf-8"'
        b'\n<https://s.example/inbox/?after=5>; rel="next"\n5',
    )
    write("member_id", "alice.txt", b"alice@0123456789abcdef0123456789abcdef")
    for index, data in enumerate(upstream_seeds(encoded, first, crl)):
        write("wire_delivery", f"seed-{index}.bin", data)
    import fuzz_grpc

    for name, seeds in fuzz_grpc.seeds(encoded, first, hop).items():
        for index, data in enumerate(seeds):
            write(name, f"seed-{index}.bin", data)
    return found


def main() -> None:
    """Rewrite ``corpus/`` (the committed seeds)."""
    for target, seeds in all_seeds().items():
        folder = CORPUS_DIR / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (folder / name).write_bytes(data)


if __name__ == "__main__":
    main()
