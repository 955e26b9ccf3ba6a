"""A dishonest site: the real disseminator daemon with a fault switch (test code only).

Run as ``python dishonest_site.py FAULT[:ARGUMENT] -- disseminator serve --config SITE.toml``:
it patches the site's node and service in this process, then runs ``xdn`` unchanged. The site
keeps its real certificate, speaks the real protocol over mutual TLS, and misbehaves only in
what it relays, which is exactly the power the threat model gives a dishonest site. Faults:

``tamper-rekey``        flips one byte of every group rekey it delivers to a subscriber
``forge-enrolment``     replaces every enrolment to a subscriber with a path for a far-future
                        epoch of random keys, sealed (HPKE) to the subscriber's own certificate key
``forge-documents``     alters the signed manifest root of every document it delivers, and drops
                        every key message (so the subscriber has no key to open them with and
                        must decide whether to hold them)
``drop-document:ID``    drops the first delivery of document ID (later documents still go, and so
                        does a replay the subscriber asks for)
``drop-concept:C``      removes concept C's fragments from what it delivers, and C from the
                        grants it reports (Subscribed, GrantsChanged)
``list-member:PEM``     lists the subscriber certificate in PEM (say, a revoked one) in every
                        membership reply, with every concept of the asking publisher's policy
``keep-members``        keeps listing, in every membership reply, every member it ever listed,
                        with the last lease it had (a departed subscriber is never let go)
``forge-provenance:ID`` alters the publisher's envelope (its timestamp) in the provenance chain of
                        document ID, in whatever it relays (to downlinks and subscribers alike),
                        and signs its own hop over the altered chain
``relay-unverified``    relays documents without checking their provenance chains (it skips
                        Algorithm 2 and the CRL for them), still relaying the CRL it has
``mangle-parts``        sends the first part of every delivery it sends its subscribers in parts
                        twice (a part that says it starts a delivery, amid that delivery)
``forge-receipt:NAME``  for every receipt a subscriber sends it, also passes upstream a forged
                        one: the same document relayed to its subscriber NAME and receipted in
                        NAME's name (NAME's certificate), signed with the site's own key

:class:`LocalNetwork` starts a site this way when its :class:`SiteSpec` has a ``launcher``
(see :func:`launcher`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from xdn.grpc_fork import disable_grpc_fork_handlers

FAULTS = (
    "tamper-rekey", "forge-enrolment", "forge-documents", "drop-document", "drop-concept",
    "list-member", "keep-members", "forge-provenance", "forge-receipt",
    "relay-unverified", "mangle-parts",
)

Transform = Callable[[Any, Any], list[Any]]  # (node, delivery to a subscriber) → what to send


def launcher(fault: str) -> tuple[str, ...]:
    """The command prefix that starts a site with ``fault`` (for ``SiteSpec.launcher``)."""
    name = fault.split(":", 1)[0]
    if name not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    return (sys.executable, str(Path(__file__).resolve()), fault, "--")


def _tamper_rekey(node: Any, delivery: Any) -> list[Any]:
    if delivery.WhichOneof("body") == "rekey":
        data = bytearray(delivery.rekey.message)
        data[len(data) // 2] ^= 0x01
        delivery.rekey.message = bytes(data)
    return [delivery]


def _forge_enrolment(node: Any, delivery: Any) -> list[Any]:
    from xdn import certs, crypto
    from xdn.lkh import MemberPath, seal_path

    if delivery.WhichOneof("body") != "key":
        return [delivery]
    key = delivery.key
    registration = node.table.local.get(key.subscriber)
    if registration is None:
        return [delivery]
    path = MemberPath(
        publisher=key.publisher, concept=key.concept, epoch=key.epoch + 1000,
        member=key.subscriber, keys=((1, crypto.random_bytes(32)),),
    )
    forged = seal_path(path, certs.public_key_of(registration.certificate))
    key.epoch, key.sealed = forged.epoch, forged.to_bytes()
    return [delivery]


def _forge_documents(node: Any, delivery: Any) -> list[Any]:
    if delivery.WhichOneof("body") in ("key", "rekey", "document_keys"):
        return []
    if delivery.WhichOneof("body") == "dissemination":
        manifest = delivery.dissemination.manifest
        manifest.root = bytes(b ^ 0xFF for b in manifest.root)
    return [delivery]


def _drop_document(document_id: str) -> Transform:
    dropped: list[bool] = []  # the first delivery is dropped, whoever it is for

    def transform(node: Any, delivery: Any) -> list[Any]:
        body = delivery.WhichOneof("body")
        if body != "dissemination" or delivery.dissemination.manifest.document_id != document_id:
            return [delivery]
        if dropped:
            return [delivery]
        dropped.append(True)
        return []

    return transform


def _forge_provenance(document_id: str) -> Transform:
    from xdn.provenance import _vocab as v
    from xdn.rdf import Literal, Quad, canonicalise, parse_nquads

    def altered(quad: Quad) -> Quad:
        if quad.g is not None and quad.g.value.endswith("#e1") and quad.p == v.HAS_SENT_TIMESTAMP:
            assert isinstance(quad.o, Literal)
            return Quad(quad.s, quad.p, Literal(str(int(quad.o.value) + 1), v.XSD_LONG), quad.g)
        return quad

    def transform(node: Any, delivery: Any) -> list[Any]:
        body = delivery.WhichOneof("body")
        if body == "dissemination" and delivery.dissemination.manifest.document_id == document_id:
            chain = parse_nquads(delivery.dissemination.provenance)
            delivery.dissemination.provenance = canonicalise(altered(q) for q in chain)
        return [delivery]

    return transform


def _patch_relay_unverified() -> None:
    from disseminator.planning import Planner
    from xdn import provenance

    def verified(self: Planner, manifest: Any, chain: bytes, leaves: Any) -> Any:
        return provenance.Message.from_nquads(chain)

    Planner.verified = verified  # type: ignore[method-assign]


def _without(grants: Any, concept: str) -> None:
    for grant in grants:
        kept = [c for c in grant.concepts if c != concept]
        del grant.concepts[:]
        grant.concepts.extend(kept)


def _drop_concept(concept: str) -> Transform:
    def transform(node: Any, delivery: Any) -> list[Any]:
        body = delivery.WhichOneof("body")
        if body == "dissemination":
            kept = [f for f in delivery.dissemination.fragments if f.concept != concept]
            del delivery.dissemination.fragments[:]
            delivery.dissemination.fragments.extend(kept)
        elif body == "grants_changed":
            _without(delivery.grants_changed.grants, concept)
            _without(delivery.grants_changed.previous, concept)
        return [delivery]

    return transform


def _patch_pump(transform: Transform, *, links: bool = False) -> None:
    from disseminator.node import SiteNode

    honest = SiteNode.pump

    async def pump(
        self: SiteNode, destination: Any, cursor: Any, generation: int
    ) -> AsyncIterator[Any]:
        from disseminator.payloads import Outgoing

        async for out in honest(self, destination, cursor, generation):
            if destination.kind != "subscriber" and not links:
                yield out
                continue
            for sent in transform(self, out.parsed()):
                sequence = sent.sequence
                sent.ClearField("sequence")
                yield Outgoing(sequence, sent.SerializeToString())

    SiteNode.pump = pump  # type: ignore[method-assign]


def _patch_subscribed(concept: str) -> None:
    from disseminator import server

    honest = server.pb.Subscribed

    def subscribed(**fields: Any) -> Any:
        message = honest(**fields)
        _without(message.grants, concept)
        return message

    server.pb.Subscribed = subscribed


def _patch_membership(pem_path: str) -> None:
    from disseminator.server import DisseminatorService
    from xdn import certs
    from xdn.wire.v1 import dissemination_pb2 as pb

    certificate = Path(pem_path).read_bytes()
    member_id = certs.credential_from_pem(certificate).member_id
    honest = DisseminatorService.GetMembership

    async def membership(self: DisseminatorService, request: Any, context: Any) -> Any:
        reply = await honest(self, request, context)
        concepts = sorted(self._node.ontology.concepts)
        reply.members.append(
            pb.Member(
                subscriber=member_id, certificate=certificate,
                grants=[pb.Grant(publisher=request.publisher, concepts=concepts)],
            )
        )
        return reply

    DisseminatorService.GetMembership = membership  # type: ignore[method-assign]


def _patch_keep_members() -> None:
    from disseminator.server import DisseminatorService

    honest = DisseminatorService.GetMembership
    seen: dict[str, Any] = {}  # member id → the last entry listed for it

    async def membership(self: DisseminatorService, request: Any, context: Any) -> Any:
        reply = await honest(self, request, context)
        listed = {m.subscriber for m in reply.members}
        for member in reply.members:
            seen[member.subscriber] = member
        reply.members.extend(m for name, m in sorted(seen.items()) if name not in listed)
        return reply

    DisseminatorService.GetMembership = membership  # type: ignore[method-assign]


def _forged_receipt(node: Any, data: bytes, victim: str) -> bytes | None:
    """``data`` (a subscriber's receipt of this site's hop) re-made as ``victim``'s receipt."""
    from xdn import certs, identity, provenance

    registered = [reg for name, reg in node.table.local.items() if identity.person(name) == victim]
    if not registered:
        return None
    message = provenance.Message.from_nquads(data)
    *_, served, received = message.envelopes()
    dropped = {served.name, served.name + "s", received.name, received.name + "s"}
    inner = provenance.Message(
        quads=frozenset(q for q in message.quads if q.g is None or q.g.value not in dropped)
    )
    signer = node.site.signer
    relayed = provenance.relay(
        inner, signer,
        message_uri=provenance.message_uri(signer.node_uri, inner.document_id, "forged", victim),
        recipient_uri=certs.node_uri(victim), leaves=inner.leaves(), timestamp_ms=node.now_ms(),
    )
    impostor = provenance.Signer(  # the victim's name and certificate, the site's key
        node_uri=certs.node_uri(victim), private_key=signer.private_key,
        certificate=registered[0].certificate,
    )
    forged = provenance.receipt(
        relayed, impostor,
        message_uri=received.message.replace(received.sender, impostor.node_uri, 1),
        timestamp_ms=node.now_ms(),
    )
    return forged.to_nquads()


def _patch_forge_receipt(victim: str) -> None:
    import hashlib

    from disseminator.receipts import SiteReceipts

    honest = SiteReceipts.from_subscriber

    def from_subscriber(self: SiteReceipts, subscriber: str, data: Any) -> bool:
        fresh = honest(self, subscriber, data)
        raw = data if isinstance(data, bytes) else data.to_nquads()  # bytes or a read Receipt
        forged = _forged_receipt(self._node, raw, victim) if fresh else None
        if forged is not None:  # queued as if accepted: the uplink is to check it
            self._node.store.accept_receipt(
                receipt_id=hashlib.sha256(forged).hexdigest(),
                publisher=_publisher_of(forged), data=forged, log_graphs=b"",
                at_ms=self._node.now_ms(),
            )
            self.queued.set()
        return fresh

    SiteReceipts.from_subscriber = from_subscriber  # type: ignore[method-assign]


def _publisher_of(data: bytes) -> str:
    from xdn import provenance

    return provenance.Message.from_nquads(data).content().publisher


def _patch_mangle_parts() -> None:
    from disseminator.payloads import Outgoing

    honest = Outgoing.server_messages

    def server_messages(self: Outgoing, part_bytes: int) -> Iterator[bytes]:
        sent = list(honest(self, part_bytes))
        return iter(sent if len(sent) < 2 else [sent[0], *sent])

    Outgoing.server_messages = server_messages  # type: ignore[method-assign]


def install(fault: str) -> None:
    """Patch this process's site code with ``fault`` (one of :data:`FAULTS`)."""
    name, _, argument = fault.partition(":")
    if name == "tamper-rekey":
        _patch_pump(_tamper_rekey)
    elif name == "forge-enrolment":
        _patch_pump(_forge_enrolment)
    elif name == "forge-documents":
        _patch_pump(_forge_documents)
    elif name == "drop-document":
        _patch_pump(_drop_document(argument))
    elif name == "drop-concept":
        _patch_pump(_drop_concept(argument))
        _patch_subscribed(argument)
    elif name == "list-member":
        _patch_membership(argument)
    elif name == "keep-members":
        _patch_keep_members()
    elif name == "forge-provenance":
        _patch_pump(_forge_provenance(argument), links=True)
    elif name == "relay-unverified":
        _patch_relay_unverified()
    elif name == "forge-receipt":
        _patch_forge_receipt(argument)
    elif name == "mangle-parts":
        _patch_mangle_parts()
    else:
        raise SystemExit(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        raise SystemExit("usage: dishonest_site.py FAULT[:ARGUMENT] -- XDN-ARGUMENTS...")
    disable_grpc_fork_handlers()
    install(argv[0])
    from cli.main import main as xdn_main

    print(f"dishonest site: fault {argv[0]} installed", flush=True)
    return xdn_main(list(argv[2:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
