"""Signatures of one message are checked on two threads; a forked process (a Spark worker)
starts its own threads rather than waiting forever on its parent's."""

from __future__ import annotations

import multiprocessing

from xdn import crypto
from xdn.provenance import (
    ContentFacts,
    LeafRanges,
    Message,
    Signer,
    message_uri,
    originate,
    relay,
    verify_message,
)


def _chain() -> tuple[Message, dict[str, crypto.PublicKey]]:
    signers = {
        n: Signer(node_uri=f"https://{n}.xdn.example/", private_key=crypto.generate_private_key())
        for n in ("pub", "d1", "d2")
    }
    m = originate(
        signers["pub"],
        message_uri=message_uri(signers["pub"].node_uri, "doc", "v1"),
        recipient_uri=signers["d1"].node_uri,
        content=ContentFacts(
            document_id="doc", publisher="pub", manifest_root=b"\x01" * 32, leaf_count=4
        ),
        timestamp_ms=1,
    )
    m = relay(
        m, signers["d1"], message_uri=message_uri(signers["d1"].node_uri, "doc", "v1", "x"),
        recipient_uri=signers["d2"].node_uri, leaves=LeafRanges(((0, 4),)), timestamp_ms=2,
    )
    return m, {s.node_uri: s.private_key.public_key() for s in signers.values()}


def _verify_in_child(data: bytes, keys_pem: dict[str, bytes], out: multiprocessing.Queue) -> None:
    keys = {uri: crypto.load_public_key_pem(pem) for uri, pem in keys_pem.items()}
    verify_message(Message.from_nquads(data), keys)
    out.put("verified")


def test_a_forked_child_verifies_after_its_parent_did() -> None:
    message, keys = _chain()
    verify_message(message, keys)  # the parent's verification threads exist now
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = context.Queue()
    keys_pem = {uri: crypto.public_key_to_pem(key) for uri, key in keys.items()}
    child = context.Process(target=_verify_in_child, args=(message.to_nquads(), keys_pem, out))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0, "the child hung or failed verifying"
    assert out.get(timeout=5) == "verified"
