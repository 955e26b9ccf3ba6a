"""The whole story on one machine: ``xdn demo``.

1. a development PKI, signed policies and three site configs under the work directory;
2. three disseminators on loopback (d1 serves the whole production process; d2 the WorkOrder
   block; d3 the ResourceDetails block), as separate processes over mutual TLS;
3. two subscribers: alice (Cred1) at d2, bob (Cred2) at d3 — bob's grants reach beyond d3's
   block, so d3 sends him to its uplink d1 (paper §III.B);
4. both organisations publish their sample document and a generated one;
5. each subscriber must have received exactly the fragments its credential is granted (computed
   here independently from the mappings and policies) and nothing refused;
6. carol (Cred1) joins d2 late and asks for the retained documents (state at subscribe time):
   the key service grants her exactly those documents' keys, and she must end up with what
   alice has;
7. linked data over HTTPS: alice dereferences the message URI d2 minted for her and verifies
   the chain under the CA alone; production-dept posts a notification to its root site's LDN
   inbox (d1) and lists it; carol posts to d2's inbox the receipts she signed for the documents
   she held until their keys came (no ack carried them); d1's inbox must then list a receipt
   of every document version each subscriber accepted — who received what, by which path —
   each verified under the CA (:mod:`deploy.demo_linked_data`);
8. the Spark audit verifies every provenance signature chain, judges every delivery by concept
   and every subscriber's completeness under the signed policies, and writes its report.

Exit status 0 only if every check passes; every process is stopped on the way out.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from deploy.demo_linked_data import linked_data_step
from deploy.docgen import generate
from deploy.expectations import Deliveries, expected_deliveries, read_received
from deploy.network import (
    DEFAULT_SUBSCRIBERS,
    ONTOLOGY,
    SAMPLE_DOCUMENTS,
    LocalNetwork,
    SubscriberSpec,
    wait_until,
)
from xdn.ontology import load_ontology

__all__ = ["DemoResult", "Expectation", "run_demo"]

LATE = SubscriberSpec(name="carol", site="d2", attributes={"OU": "Cred1"})

@dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    """What one subscriber should and did receive."""

    subscriber: str
    expected: Deliveries
    received: Deliveries
    refused: int

    @property
    def ok(self) -> bool:
        return self.expected == self.received and self.refused == 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoResult:
    checks: tuple[Expectation, ...]
    audit_ok: bool
    report: Path
    linked_data_ok: bool = True

    @property
    def ok(self) -> bool:
        return self.audit_ok and self.linked_data_ok and all(c.ok for c in self.checks)


def _documents(workdir: Path, generated_bytes: int) -> dict[str, list[Path]]:
    docs_dir = workdir / "documents"
    docs_dir.mkdir(parents=True, exist_ok=True)
    published: dict[str, list[Path]] = {}
    for seed, (publisher, sample) in enumerate(SAMPLE_DOCUMENTS.items(), start=1):
        generated = docs_dir / f"{publisher}-generated.xml"
        with open(generated, "wb") as out:
            generate(publisher, generated_bytes, out, seed=seed)
        published[publisher] = [sample, generated]
    return published


def _late_joiner(net: LocalNetwork, say: Callable[[str], None]) -> None:
    """carol subscribes after the publications and asks for the retained documents."""
    say(f"[6/8] {LATE.name} (Cred1) joins {LATE.site} late and asks for the retained documents")
    net.start_subscriber(LATE.name, extra=["--retained"])
    info = net.wait_subscribed(LATE.name)
    say(f"      {LATE.name} registered at {info['served_by']}: {info['grants']}")
    grants = info["grants"]
    assert isinstance(grants, dict)
    for publisher in grants:
        output = net.publish(publisher, [])  # no document: enrol her, grant retained keys
        say(f"      {publisher}: {output.strip()}")


def run_demo(
    workdir: Path,
    *,
    say: Callable[[str], None] = print,
    generated_bytes: int = 200_000,
    audit: bool = True,
    master: str = "local[2]",
) -> DemoResult:
    """Run the story in ``workdir`` (wiped first); return what was checked."""
    workdir = workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    net = LocalNetwork(workdir, subscribers=(*DEFAULT_SUBSCRIBERS, LATE))
    first = [s.name for s in DEFAULT_SUBSCRIBERS]
    say("[1/8] development PKI, signed policies, site configs")
    net.prepare()
    published = _documents(workdir, generated_bytes)
    with net:
        say("[2/8] starting disseminators d1 (root), d2 (WorkOrder), d3 (ResourceDetails)")
        net.start_sites()
        say("      " + ", ".join(f"{s}={net.address(s)}" for s in net.sites))
        say("[3/8] subscribers: alice (Cred1) at d2, bob (Cred2) at d3")
        for name in first:
            net.start_subscriber(name)
        for name in first:
            info = net.wait_subscribed(name)
            say(f"      {name} registered at {info['served_by']}: {info['grants']}")
        say("[4/8] publishing")
        for publisher, documents in published.items():
            output = net.publish(
                publisher, documents, wait_for=net.granted_subscribers(publisher)
            )
            for line in output.strip().splitlines():
                say(f"      {publisher}: {line}")
        ontology = load_ontology([ONTOLOGY])
        expected = {
            name: expected_deliveries(net, ontology, name, published) for name in net.subscribers
        }
        say("[5/8] waiting for deliveries and checking them against the policies")
        for name in first:
            inbox, want = net.inbox(name), len(expected[name])
            wait_until(lambda: len(read_received(inbox)[0]) >= want, 30.0)  # noqa: B023
        _late_joiner(net, say)
        say("      one more document from each publisher: once it is in, nothing else is due")
        for publisher, documents in published.items():
            documents.append(net.publish_marker(publisher))
        expected = {
            name: expected_deliveries(net, ontology, name, published) for name in net.subscribers
        }
        linked_data_ok = linked_data_step(net, say)
    checks = []
    for name in net.subscribers:
        received, refused = read_received(net.inbox(name))
        checks.append(
            Expectation(
                subscriber=name, expected=expected[name], received=received, refused=refused
            )
        )
    report = workdir / "audit" / "report.html"
    audit_ok = True
    if audit:
        say("[8/8] Spark audit of every provenance log")
        from audit.job import run_audit

        summary = run_audit(
            sorted(str(p) for p in net.logs.glob("*.nq")),
            ca_pem=(net.certs / "ca.pem").read_bytes(),
            out_dir=workdir / "audit",
            master=master,
            ontology_paths=[ONTOLOGY],
            policy_paths=sorted((net.workdir / "policies").glob("*.toml")),
        )
        audit_ok = summary.ok
        say(
            f"      {summary.signatures_verified} signatures verified, "
            f"{summary.signatures_failed} failed; {summary.chains_ok} chains intact, "
            f"{summary.chains_broken} broken; {summary.failure_count} failure(s) in all "
            "(entitlement by concept and completeness judged under the signed policies)"
        )
    return DemoResult(
        checks=tuple(checks), audit_ok=audit_ok, report=report, linked_data_ok=linked_data_ok
    )
