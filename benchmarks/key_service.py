"""The real key service of a benchmark network's first publisher, in the benchmark's process."""

from __future__ import annotations

from deploy.network import DEFAULT_PUBLISHERS, LocalNetwork
from publisher.client import Publisher, PublisherSetup
from xdn import certs
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping
from xdn.ontology import Ontology
from xdn.policy import load_signed_policy

PUBLISHER = DEFAULT_PUBLISHERS[0]


def key_service(net: LocalNetwork, ontology: Ontology, address: str) -> Publisher:
    """``PUBLISHER``'s key service (its signed policy as the network prepared it), publishing
    to the site at ``address``, its state in the network's work directory. Each publication
    is a new version, whatever its content (benchmarks publish the same documents again)."""
    tls = TlsFiles.from_dir(net.certs, PUBLISHER.name)
    policy = load_signed_policy(
        net.workdir / "policies" / PUBLISHER.policy.name, ontology,
        certs.public_key_of(tls.cert_pem), publisher=PUBLISHER.name,
    )
    state = net.workdir / "publisher"
    return Publisher(PublisherSetup(
        name=PUBLISHER.name, tls=tls, ontology=ontology,
        mapping=load_mapping(PUBLISHER.mapping, ontology), policy=policy,
        state_dir=state, provenance_log=state / "provenance.nq", connect=address,
        republish=True,
    ))
