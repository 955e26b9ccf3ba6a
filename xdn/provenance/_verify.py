"""Verification of a message dataset: signer checks (condition 9) and the paper's Algorithm 2."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from xdn import crypto
from xdn.errors import ProvenanceError, SignatureError
from xdn.provenance._message import Message, shape_of, signing_input
from xdn.provenance._shape import Shape

__all__ = ["verify_message"]


def _check_signers(shape: Shape) -> None:
    """Condition 9: each graph is signed by the node its envelope names as sender, and each
    hop is added by the node the previous envelope was addressed to."""
    first = shape.envelopes[0]
    for name in shape.content_graphs:
        signer = shape.signatures[name].signer
        if signer != first.sender:
            raise SignatureError(
                f"condition 9: graph <{name}> is signed by <{signer}>, "
                f"not by its publisher <{first.sender}>"
            )
    previous = None
    for env in shape.envelopes:
        signer = shape.signatures[env.name].signer
        if signer != env.sender:
            raise SignatureError(
                f"condition 9: graph <{env.name}> is signed by <{signer}> "
                f"but names <{env.sender}> as its sender"
            )
        if previous is not None and previous.recipient != env.sender:
            raise ProvenanceError(
                f"condition 9: graph <{env.name}> was added by <{env.sender}> but "
                f"<{previous.name}> is addressed to <{previous.recipient}>"
            )
        previous = env


def verify_message(message: Message, public_keys: Mapping[str, crypto.PublicKey]) -> None:
    """Verify every signature of ``message`` against its signer's key (Algorithm 2).

    ``message`` is well-formed by construction; this adds the signer checks and the
    cryptography: each signature graph must verify the canonical form of the graph it signs
    under the public key of the node it names, and every graph must be covered.

    Args:
        message: the dataset to verify.
        public_keys: node URI → public key (from the nodes' verified certificates).

    Raises:
        SignatureError: a signature does not verify, its signer is unknown or not the sender.
        ProvenanceError: the hops do not follow the addressing of the envelopes.
    """
    if not isinstance(message, Message):
        raise TypeError("message must be a Message")
    shape = shape_of(message)
    _check_signers(shape)
    verified: set[str] = set()
    for signed, sig in sorted(shape.signatures.items()):
        key = public_keys.get(sig.signer)
        if key is None:
            raise SignatureError(f"graph <{sig.name}>: signer <{sig.signer}> is not a known node")
        try:
            raw = base64.b64decode(sig.value, validate=True)
        except ValueError:  # binascii.Error, or non-ASCII text
            raise SignatureError(f"graph <{sig.name}>: signature value is not base64") from None
        try:
            crypto.verify(key, raw, signing_input(shape.graphs[signed]))
        except SignatureError:
            raise SignatureError(
                f"signature graph <{sig.name}> does not verify graph <{signed}> "
                f"under the key of <{sig.signer}>"
            ) from None
        verified |= {signed, sig.name}
    if verified != set(shape.graphs):  # Algorithm 2, line 9: |V| = |D|
        missing = sorted(set(shape.graphs) - verified)
        raise ProvenanceError(f"graph <{missing[0]}> is not covered by any signature")
