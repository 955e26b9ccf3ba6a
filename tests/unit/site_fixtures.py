"""A real :class:`SiteNode` for unit tests: its own CA and certificate, a SQLite store, the
production policy and ontology, and the clock the test gives it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from deploy.network import ONTOLOGY
from deploy.pki import Party, ensure_ca, issue_party
from disseminator.node import SiteIdentity, SiteNode
from disseminator.store import Store
from xdn import certs, crypto, provenance
from xdn.grpc_tls import TlsFiles
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import PolicyEngine, PolicySet, parse_policy

POLICY = (REPO_ROOT / "policies" / "production-dept.toml").read_text()


def site_node(directory: Path, name: str, block: str, clock: Callable[[], datetime]) -> SiteNode:
    """Site ``name`` serving ``block``, a root (no uplink), its state in ``directory``."""
    now = clock()
    ensure_ca(directory, now=now)
    issue_party(directory, Party(
        name=name, role="site", hosts=("localhost",), attributes={certs.BLOCK_FIELD: block},
    ), now=now)
    ontology = load_ontology([ONTOLOGY])
    tls = TlsFiles.from_dir(directory, name)
    signer = provenance.Signer(
        node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(tls.key_pem),
        certificate=tls.cert_pem,
    )
    return SiteNode(
        site=SiteIdentity(name=name, block=block, uplink=None, tls=tls, signer=signer),
        ontology=ontology,
        engine=PolicyEngine(PolicySet.of(ontology, [parse_policy(POLICY.encode(), ontology)])),
        store=Store(directory / "site.sqlite"),
        log_sink=provenance.ProvenanceLog(
            directory / f"{name}.nq", node_uri=signer.node_uri, cert_pem=tls.cert_pem
        ),
        clock=clock,
    )
