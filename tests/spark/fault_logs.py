"""Provenance logs with one fault planted per document, and clean controls, for the audit's
fault-class tests (written with our own API and the real PKI, like :mod:`audit_logs`).

Every document is its own delivery pub → d1 → subscriber (→ receipt), so a fault planted in one
document shows only in graphs of that document. The controls hold no fault: a site whose
certificate was renewed (new key) keeps appending to the same log, a site whose certificate was
renewed and whose log was rotated, a subscriber whose certificate expired after it signed, a
hop stamped a little (within the clock-skew tolerance) before the hop it wraps, and a delivery
to a subscriber before the publisher's policy stopped granting it anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from audit_logs import NOW, T0, Node, _content

from xdn import certs, crypto
from xdn.paths import REPO_ROOT
from xdn.policy import sign_policy, signature_path
from xdn.provenance import (
    ContentFacts,
    LeafRanges,
    Message,
    PolicyChangeFacts,
    ProvenanceLog,
    RefusalFacts,
    Signer,
    failure_notice,
    notice_uri,
    originate,
    policy_notice,
    policy_notice_uri,
    receipt,
    relay,
)

DAY_MS = 86_400_000


def _issue(
    ca: tuple[bytes, bytes], name: str, role: str, *, days: int = 365, after_days: int = 0,
    unit: str = "",
) -> Node:
    block = {certs.BLOCK_FIELD: "WorkOrder"} if role == "site" else ({"OU": unit} if unit else None)
    cert, key = certs.issue(
        *ca, name=name, role=role, attributes=block, now=NOW + timedelta(days=after_days),
        days=days,
    )
    signer = Signer(
        node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(key),
        certificate=cert,
    )
    return Node(signer=signer, cert_pem=cert)


@dataclass(slots=True)
class Logs:
    """Writes each node's hops to its log (``NAME/provenance.nq`` unless told otherwise)."""

    root: Path
    written: list[tuple[Path, Node, Message, int]] = field(default_factory=list)

    def add(
        self, node: Node, message: Message, *, file: str = "", times: int = 1, folder: str = ""
    ) -> Message:
        name = folder or node.uri.removeprefix("https://").split(".")[0]
        self.written.append((self.root / name / (file or "provenance.nq"), node, message, times))
        return message

    def write(self) -> None:
        for path, node, message, times in self.written:
            with ProvenanceLog(path, node_uri=node.uri, cert_pem=node.cert_pem) as log:
                for _ in range(times):
                    log.append(message)


#: pub's signed policy (version 1): Cred1 holders get every work-order concept, contractors
#: the production part without machine settings.
POLICY = """
[policy]
publisher = "pub"
version = 1
ontology = "http://xdn.example.org/ontology/production"

[[rule]]
id = "R1"
effect = "grant"
concept = "WorkOrder"
inherit = true
when = { subject = { OU = "Cred1" }, role = "subscriber" }

[[rule]]
id = "C1"
effect = "grant"
concept = "Production"
inherit = true
when = { subject = { OU = "Contractors" }, role = "subscriber" }

[[rule]]
id = "C2"
effect = "deny"
concept = "MachineSetting"
inherit = true
when = { subject = { OU = "Contractors" } }
"""
#: The concept runs of the documents judged by concept: w1 (Cred1) may and must receive all
#: three; c1 (Contractors) may and must receive Production (leaves 0-2) only.
RUNS = (("Production", 0, 2), ("MachineSetting", 2, 3), ("Measurement", 3, 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class Planted:
    logs: Path
    ca_pem: bytes
    crl_pem: bytes
    nodes: dict[str, Node]
    policy: Path  # pub's policy, signed (``.sig`` beside it)
    ontology: Path
    #: document → the failures planted in it: sorted (class, graph)
    expected: dict[str, list[tuple[str, str]]]
    controls: tuple[str, ...]  # documents that must raise nothing


def _deliver(
    logs: Logs,
    n: dict[str, Node],
    doc: str,
    at: int,
    *,
    to: str = "s1",
    site: Node | None = None,
    log_relay: bool = True,
    log_receipt: bool = True,
    relay_file: str = "",
    relay_at: int | None = None,
    publisher: str = "pub",
) -> tuple[Message, Message, Message]:
    """pub → site (d1) → subscriber ``to`` → receipt, at ``T0 + at`` (+10, +20 ms)."""
    site = site or n["d1"]
    pub = n[publisher]
    content = _content(doc, 2)  # names publisher "pub", whoever signs it
    m = logs.add(
        pub,
        originate(
            pub.signer, message_uri=pub.mid(doc, "1"), recipient_uri=site.uri, content=content,
            timestamp_ms=T0 + at,
        ),
    )
    hop = relay(
        m, site.signer, message_uri=site.mid(doc, "a"), recipient_uri=n[to].uri,
        leaves=LeafRanges.parse("0-2"),
        timestamp_ms=T0 + (at + 10 if relay_at is None else relay_at),
    )
    if log_relay:
        logs.add(site, hop, file=relay_file)
    got = receipt(hop, n[to].signer, message_uri=n[to].mid(doc, "r"), timestamp_ms=T0 + at + 20)
    if log_receipt:
        logs.add(n[to], got)
    return m, hop, got


def _by_concept(
    logs: Logs,
    n: dict[str, Node],
    doc: str,
    at: int,
    sent: dict[str, str],
    *,
    refused_by: str = "",
) -> Message:
    """pub publishes ``doc`` (version 1, :data:`RUNS`) at ``T0 + at``; d1 relays it to each
    subscriber of ``sent`` with those leaves, each signs a receipt — but ``refused_by``, which
    signs a failure notice instead. Returns the publication."""
    pub, d1 = n["pub"], n["d1"]
    content = ContentFacts(
        document_id=doc, publisher="pub", manifest_root=b"\x07" * 32, leaf_count=4,
        version=1, concepts=RUNS,
    )
    m = logs.add(
        pub,
        originate(pub.signer, message_uri=pub.mid(doc, "v1"), recipient_uri=d1.uri,
                  content=content, timestamp_ms=T0 + at),
    )
    for i, (to, leaves) in enumerate(sorted(sent.items())):
        hop = logs.add(
            d1,
            relay(m, d1.signer, message_uri=d1.mid(doc, to), recipient_uri=n[to].uri,
                  leaves=LeafRanges.parse(leaves), timestamp_ms=T0 + at + 10 + i),
        )
        if to == refused_by:
            facts = RefusalFacts(kind="document", reason="a range proof does not verify",
                                 publisher="pub", document_id=doc, version=1,
                                 received_from=d1.uri)
            logs.add(n[to], failure_notice(n[to].signer, message_uri=notice_uri(n[to].uri, doc),
                                          refusal=facts, timestamp_ms=T0 + at + 30))
        else:
            logs.add(n[to], receipt(hop, n[to].signer, message_uri=n[to].mid(doc, "r"),
                                    timestamp_ms=T0 + at + 30 + i))
    return m


def make_planted(root: Path) -> Planted:
    """The logs (see the module docstring) and what each planted document must show."""
    ca = certs.create_ca("xdn test CA", now=NOW)
    n = {name: _issue(ca, name, "site") for name in ("d1", "d2")}
    n |= {name: _issue(ca, name, "publisher") for name in ("pub", "pub2")}
    n |= {name: _issue(ca, name, "subscriber") for name in ("s1", "s3", "s4", "m", "mallory")}
    n["s2"] = _issue(ca, "s2", "subscriber", days=30)  # expired long before the audit runs
    n["w1"] = _issue(ca, "w1", "subscriber", unit="Cred1")
    n["c1"] = _issue(ca, "c1", "subscriber", unit="Contractors")
    d1_renewed = _issue(ca, "d1", "site", after_days=10)  # new key, same log
    d2_renewed = _issue(ca, "d2", "site", after_days=20)  # new key, rotated log
    logs = Logs(root / "logs")
    expected: dict[str, list[tuple[str, str]]] = {}

    # controls: nothing wrong
    _deliver(logs, n, "ok-plain", 1_000, to="s2")
    _deliver(logs, n, "ok-renewed", 10 * DAY_MS + 1_000, site=d1_renewed)
    _deliver(logs, n, "ok-rotated-old", 2_000, site=n["d2"], relay_file="provenance.nq.1")
    _deliver(logs, n, "ok-rotated-new", 20 * DAY_MS + 1_000, site=d2_renewed)
    _deliver(logs, n, "ok-skewed", 3_000, relay_at=3_000 - 500)  # within the tolerance

    # receipts: a delivery whose receipt was deleted; a receipt whose delivery was
    _, hop, _ = _deliver(logs, n, "no-receipt", 4_000, log_receipt=False)
    expected["no-receipt"] = [("receipt", hop.uri + "#e2")]
    _, _, got = _deliver(logs, n, "no-delivery", 4_100, log_relay=False)
    expected["no-delivery"] = [("receipt", got.uri + "#e3")]

    # duplicates: a hop's lines appended twice; a delivery re-sent and re-signed
    _, hop, _ = _deliver(logs, n, "twice", 5_000, log_relay=False)
    logs.add(n["d1"], hop, times=2)
    expected["twice"] = [("duplicate", hop.uri + "#e2"), ("duplicate", hop.uri + "#e2s")]
    m, _, _ = _deliver(logs, n, "resent", 5_100)
    again = logs.add(
        n["d1"],
        relay(
            m, n["d1"].signer, message_uri=n["d1"].mid("resent", "a2"), recipient_uri=n["s1"].uri,
            leaves=LeafRanges.parse("0-2"), timestamp_ms=T0 + 5_500,
        ),
    )
    logs.add(
        n["s1"],
        receipt(again, n["s1"].signer, message_uri=n["s1"].mid("resent", "r2"),
                timestamp_ms=T0 + 5_520),
    )
    expected["resent"] = [("duplicate", again.uri + "#e2")]

    # revocation: s3's certificate revoked at T0 + 6 s, a delivery (and its receipt) after
    _, hop, got = _deliver(logs, n, "revoked", 6_500, to="s3")
    expected["revoked"] = [("revocation", hop.uri + "#e2"), ("revocation", got.uri + "#e3")]
    serial = certs.credential_from_pem(n["s3"].cert_pem).serial
    crl = certs.create_crl(
        *ca, [(serial, NOW + timedelta(seconds=6))], now=NOW + timedelta(hours=1),
        next_update=NOW + timedelta(days=7), number=1,
    )

    # time order: d1's relay stamped 10 s before the publication it wraps
    _, hop, _ = _deliver(logs, n, "backwards", 7_000, relay_at=7_000 - 10_000)
    expected["backwards"] = [("time-order", hop.uri + "#e2")]

    # roles: a subscriber (m) relaying; a publisher (pub2) signing content naming pub
    _, to_m, _ = _deliver(logs, n, "subscriber-relays", 8_000, to="m")
    bad = logs.add(
        n["m"],
        relay(
            to_m, n["m"].signer, message_uri=n["m"].mid("subscriber-relays", "b"),
            recipient_uri=n["s1"].uri, leaves=LeafRanges.parse("0-2"), timestamp_ms=T0 + 8_030,
        ),
    )
    logs.add(
        n["s1"],
        receipt(bad, n["s1"].signer, message_uri=n["s1"].mid("subscriber-relays", "r2"),
                timestamp_ms=T0 + 8_040),
    )
    expected["subscriber-relays"] = [("role", bad.uri + "#e3")]
    m9, _, _ = _deliver(logs, n, "other-publisher", 9_000, publisher="pub2")
    expected["other-publisher"] = [("role", m9.uri + "#e1")]

    # entitlement: pub's policy version 2 grants s4 nothing from T0 + 10 s; a delivery to s4
    # before (a control) and one two minutes after (beyond the grace)
    _deliver(logs, n, "ok-before-loss", 9_500, to="s4")
    fingerprint = certs.credential_from_pem(n["s4"].cert_pem).fingerprint
    loss = PolicyChangeFacts(
        publisher="pub", subscriber=n["s4"].uri, certificate=fingerprint, previous_version=1,
        version=2, gained=frozenset(), lost=frozenset({"urn:c:WorkOrder"}),
        changed_at_ms=T0 + 10_000, everything=True,
    )
    logs.add(
        n["pub"],
        policy_notice(
            n["pub"].signer, message_uri=policy_notice_uri(n["pub"].uri, 2, fingerprint),
            change=loss, timestamp_ms=T0 + 10_000,
        ),
    )
    _, hop, _ = _deliver(logs, n, "unentitled", 130_000, to="s4")
    expected["unentitled"] = [("entitlement", hop.uri + "#e2")]

    # a look-alike node description: mallory's log describes d2's URI with mallory's own
    # (CA-issued) certificate, and signs a relay as d2 with mallory's key
    mallory = n["mallory"]
    as_d2 = Node(
        signer=Signer(
            node_uri=n["d2"].uri, private_key=mallory.signer.private_key,
            certificate=mallory.cert_pem,
        ),
        cert_pem=mallory.cert_pem,
    )
    m11 = logs.add(
        n["pub"],
        originate(
            n["pub"].signer, message_uri=n["pub"].mid("look-alike", "1"), recipient_uri=n["d1"].uri,
            content=_content("look-alike", 2), timestamp_ms=T0 + 11_000,
        ),
    )
    to_d2 = logs.add(
        n["d1"],
        relay(
            m11, n["d1"].signer, message_uri=n["d1"].mid("look-alike", "a"),
            recipient_uri=n["d2"].uri, leaves=LeafRanges.parse("0-2"), timestamp_ms=T0 + 11_010,
        ),
    )
    fake = logs.add(
        as_d2,
        relay(
            to_d2, as_d2.signer, message_uri=n["d2"].mid("look-alike", "b"),
            recipient_uri=n["s1"].uri, leaves=LeafRanges.parse("0-2"), timestamp_ms=T0 + 11_020,
        ),
        folder="mallory",
    )
    logs.add(
        n["s1"],
        receipt(fake, n["s1"].signer, message_uri=n["s1"].mid("look-alike", "r"),
                timestamp_ms=T0 + 11_030),
    )
    expected["look-alike"] = [("forged-signer", fake.uri + "#e3")]

    # entitlement by concept and completeness, under pub's policy: c1 is registered (takes
    # part in hops) from 12 s to 16 s; w1 throughout
    _by_concept(logs, n, "ok-concepts", 12_000, {"w1": "0-4", "c1": "0-2"})
    over = n["d1"].mid("over-granted", "c1") + "#e2"
    _by_concept(logs, n, "over-granted", 13_000, {"w1": "0-4", "c1": "0-3"})
    expected["over-granted"] = [("entitlement", over)]
    m = _by_concept(logs, n, "incomplete", 14_000, {"w1": "0-4"})  # c1 never gets it
    expected["incomplete"] = [("completeness", m.uri + "#e1")]
    m = _by_concept(logs, n, "partial", 15_000, {"w1": "0-2", "c1": "0-2"})
    expected["partial"] = [("completeness", m.uri + "#e1")]
    _by_concept(logs, n, "ok-refused", 16_000, {"w1": "0-4", "c1": "0-2"}, refused_by="c1")
    _by_concept(logs, n, "ok-unregistered", 17_000, {"w1": "0-4"})  # c1 gone by then

    logs.write()
    policy = root / "pub.toml"
    policy.write_text(POLICY, encoding="utf-8")
    signature_path(policy).write_bytes(
        sign_policy(policy.read_bytes(), n["pub"].signer.private_key)
    )
    return Planted(
        logs=logs.root, ca_pem=ca[0], crl_pem=crl, nodes=n, expected=expected,
        policy=policy, ontology=REPO_ROOT / "ontology" / "production.owl",
        controls=(
            "ok-plain", "ok-renewed", "ok-rotated-old", "ok-rotated-new", "ok-skewed",
            "ok-before-loss", "ok-concepts", "ok-refused", "ok-unregistered",
        ),
    )
