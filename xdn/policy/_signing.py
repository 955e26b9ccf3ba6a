"""Detached policy signatures: ``<policy>.toml.sig`` holds base64 of an ECDSA signature.

The publisher signs the exact bytes of the policy file (``xdn policy sign``); a disseminator
accepts a policy only through :func:`load_signed_policy`, which verifies first and then parses
exactly the verified bytes, so what is enforced is what was signed.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from pathlib import Path

from xdn import crypto
from xdn.errors import PolicyError, SignatureError
from xdn.ontology import Ontology
from xdn.policy._model import Policy
from xdn.policy._parse import parse_policy

__all__ = ["load_signed_policy", "sign_policy", "signature_path", "verify_policy_file"]


def signature_path(path: Path) -> Path:
    """Where the detached signature of policy ``path`` lives: ``<path>.sig``."""
    return Path(path).with_name(Path(path).name + ".sig")


def sign_policy(policy_bytes: bytes, private_key: crypto.PrivateKey) -> bytes:
    """The content of the ``.sig`` file for ``policy_bytes``: base64 signature and newline."""
    return base64.b64encode(crypto.sign(private_key, policy_bytes)) + b"\n"


def verify_policy_file(path: Path, publisher_public_key: crypto.PublicKey) -> bytes:
    """Check ``<path>.sig`` over the exact bytes of ``path``; return those bytes.

    Raises:
        PolicyError: the file or its signature is missing, malformed or does not verify.
    """
    sig_path = signature_path(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}") from None
    try:
        encoded = sig_path.read_bytes()
    except FileNotFoundError:
        raise PolicyError(f"{path}: unsigned policy (no {sig_path.name})") from None
    except OSError as exc:
        raise PolicyError(f"{sig_path}: cannot read signature: {exc.strerror}") from None
    try:
        signature = base64.b64decode(b"".join(encoded.split()), validate=True)
        crypto.verify(publisher_public_key, signature, data)
    except (binascii.Error, SignatureError):
        raise PolicyError(f"{path}: signature {sig_path.name} does not verify") from None
    return data


def load_signed_policy(
    path: Path,
    ontology: Ontology,
    publisher_public_key: crypto.PublicKey,
    *,
    publisher: str | None = None,
    at: datetime | None = None,
) -> Policy:
    """Verify, then parse exactly the verified bytes.

    Args:
        path: the policy file; its signature is ``<path>.sig``.
        ontology: the ontology to validate against.
        publisher_public_key: the key of the publisher who must have signed it.
        publisher: when given, the policy must be this publisher's.
        at: when given, a policy whose ``valid_until`` has passed is refused.

    Raises:
        PolicyError: unsigned, tampered, invalid, expired or another publisher's policy.
    """
    policy = parse_policy(
        verify_policy_file(path, publisher_public_key), ontology, source=str(path), at=at
    )
    if publisher is not None and policy.publisher != publisher:
        raise PolicyError(f"{path}: policy of {policy.publisher!r}, signed by {publisher!r}")
    return policy
