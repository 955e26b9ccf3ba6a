"""What the console knows and does, without HTTP: policies, drafts, diffs, grants, signing.

Theory of operation
-------------------
A :class:`Workspace` holds the ontology (loaded once: owlready2 is slow) and, per publisher,
where its policy file and its signing key are. Policy files are read again on every question,
so an edit made elsewhere (``xdn policy sign`` in a shell) shows at once. A draft is text from
the browser; it is parsed with the core's :func:`~xdn.policy.parse_policy`, compared with
:func:`~xdn.policy.rule_diff` and :func:`~xdn.policy.impacts`, and evaluated with
:func:`~xdn.policy.auth_list` — the functions ``xdn policy check|diff|explain|sign`` use.

The *signed version* of a publisher's policy is its file when ``<file>.sig`` verifies under
the public half of the publisher's key. Signing writes the draft and its signature beside it
(each through a temporary file and a rename); the private key is read from disk for that moment
only and never leaves this process. A draft that does not supersede the signed version is
refused, since sites would ignore it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from xdn import crypto
from xdn.certs import Credential, credential_from_pem, read_crl
from xdn.errors import PolicyError, UsageError, XdnError
from xdn.ontology import Ontology
from xdn.policy import (
    Authorization,
    Impact,
    Policy,
    PolicySet,
    RuleDiff,
    auth_list,
    impacts,
    load_policy,
    parse_policy,
    representatives,
    rule_diff,
    sign_policy,
    signature_path,
    verify_policy_file,
)

__all__ = [
    "Current",
    "DraftCheck",
    "DraftDiff",
    "PublisherFiles",
    "Workspace",
    "known_subscribers",
]

DRAFT_SOURCE = "draft"
_LINE = re.compile(rf"^{DRAFT_SOURCE}:(\d+):|\(at line (\d+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherFiles:
    """Where a publisher's policy is, and the key that signs it (``None``: cannot sign here)."""

    policy: Path
    key: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Current:
    """A publisher's policy file as it is now, and whether its signature holds."""

    text: str
    policy: Policy
    signed: bool
    signature: str  # for people: "verified", "missing", "does not verify", "not checked (…)"


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftCheck:
    """A draft's verdict: the parsed policy, or the first error (and its line, if known)."""

    policy: Policy | None
    error: str | None = None
    line: int | None = None
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.policy is not None and self.error is None


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftDiff:
    """A valid draft against the current policy: rules changed, who gains and loses what."""

    check: DraftCheck
    current: Current
    rules: RuleDiff
    known: tuple[Impact, ...]  # known subscribers' certificates
    by_condition: tuple[Impact, ...]  # one representative per condition set


def known_subscribers(directory: Path) -> dict[str, Credential]:
    """Every certificate ``*.pem`` in ``directory`` whose role is ``subscriber``, by file stem,
    less those the CA's ``crl.pem`` (with ``ca.pem`` beside it) revokes."""
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    found: dict[str, Credential] = {}
    for path in sorted(directory.glob("*.pem")):
        data = path.read_bytes()
        if b"BEGIN CERTIFICATE" not in data or path.name == "ca.pem":
            continue
        try:
            credential = credential_from_pem(data)
        except XdnError as exc:
            raise UsageError(f"{path}: {exc}") from None
        if credential.role == "subscriber":
            found[path.stem] = credential
    revoked = _revoked(directory)
    return {name: c for name, c in found.items() if c.serial not in revoked}


def _revoked(directory: Path) -> frozenset[int]:
    crl, ca = directory / "crl.pem", directory / "ca.pem"
    if not (crl.exists() and ca.exists()):
        return frozenset()
    try:
        return frozenset(read_crl(crl.read_bytes(), ca.read_bytes()).serials)
    except XdnError as exc:
        raise UsageError(f"{crl}: {exc}") from None


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.console-tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


class Workspace:
    """The policies of some publishers over one ontology, and the subscribers we know of.

    Args:
        ontology: the ontology every policy is written for.
        publishers: each publisher's files, by publisher name.
        subscribers: known subscribers' credentials by name (for "who gets what" and diffs).
        clock: now, as an aware datetime (policies are evaluated at that time).
    """

    def __init__(
        self,
        ontology: Ontology,
        publishers: Mapping[str, PublisherFiles],
        *,
        subscribers: Mapping[str, Credential],
        clock: Callable[[], datetime],
    ) -> None:
        self.ontology = ontology
        self.publishers = dict(sorted(publishers.items()))
        self.subscribers = dict(sorted(subscribers.items()))
        self.clock = clock

    @classmethod
    def of_files(
        cls,
        ontology: Ontology,
        policies: Iterable[Path],
        keys: Mapping[str, Path],
        *,
        subscribers: Mapping[str, Credential],
        clock: Callable[[], datetime],
    ) -> Workspace:
        """Read each policy once to learn its publisher; pair it with that publisher's key."""
        found: dict[str, PublisherFiles] = {}
        for path in policies:
            policy = load_policy(path, ontology)
            if policy.publisher in found:
                raise UsageError(f"{path}: a second policy for {policy.publisher!r}")
            found[policy.publisher] = PublisherFiles(policy=path, key=keys.get(policy.publisher))
        if stray := sorted(set(keys) - set(found)):
            raise UsageError(f"--key for {', '.join(stray)}: no policy of that publisher given")
        return cls(ontology, found, subscribers=subscribers, clock=clock)

    def files(self, publisher: str) -> PublisherFiles:
        """The files of ``publisher``; :class:`KeyError` for one we do not hold."""
        return self.publishers[publisher]

    def current(self, publisher: str) -> Current:
        """The publisher's policy file now, and whether its signature verifies."""
        files = self.files(publisher)
        try:
            data = files.policy.read_bytes()
        except OSError as exc:
            raise UsageError(f"{files.policy}: cannot read: {exc.strerror}") from None
        policy = parse_policy(data, self.ontology, source=str(files.policy))
        signed, signature = self._signature(files, data)
        return Current(text=data.decode("utf-8"), policy=policy, signed=signed, signature=signature)

    def _signature(self, files: PublisherFiles, data: bytes) -> tuple[bool, str]:
        """Whether ``<policy>.sig`` verifies over ``data`` (the bytes just read), and why not."""
        if not signature_path(files.policy).exists():
            return False, "missing"
        if files.key is None:
            return False, "not checked (no key given for it)"
        try:
            verified = verify_policy_file(files.policy, self._key(files.key).public_key())
        except PolicyError:
            return False, "does not verify"
        return (True, "verified") if verified == data else (False, "changed while read")

    @staticmethod
    def _key(path: Path) -> crypto.PrivateKey:
        try:
            return crypto.load_private_key_pem(path.read_bytes())
        except OSError as exc:
            raise UsageError(f"{path}: cannot read the key: {exc.strerror}") from None

    def _others(self, publisher: str) -> list[Policy]:
        """The current policies of the other publishers (an unreadable one is left out: its
        own page says what is wrong with it)."""
        found = []
        for other in self.publishers:
            if other != publisher:
                try:
                    found.append(self.current(other).policy)
                except XdnError:
                    continue
        return found

    def check(self, publisher: str, draft: str) -> DraftCheck:
        """Validate ``draft`` as the next policy of ``publisher``."""
        try:
            policy = parse_policy(
                draft.encode("utf-8"), self.ontology, source=DRAFT_SOURCE, at=self.clock()
            )
            if policy.publisher != publisher:
                raise PolicyError(f"a policy of {policy.publisher!r}, not of {publisher!r}")
            PolicySet.of(self.ontology, [*self._others(publisher), policy])
        except PolicyError as exc:
            match = _LINE.search(str(exc))
            line = int(match[1] or match[2]) if match else None
            return DraftCheck(policy=None, error=str(exc), line=line)
        warnings = list(policy.warnings)
        current = self.current(publisher)
        if current.signed and policy.version <= current.policy.version:
            warnings.append(
                f"version {policy.version} does not supersede the signed version "
                f"{current.policy.version}: sites would ignore it, and it cannot be signed"
            )
        return DraftCheck(policy=policy, warnings=tuple(warnings))

    def diff(self, publisher: str, draft: str) -> DraftDiff:
        """``draft`` against the current policy; an invalid draft has empty changes."""
        check = self.check(publisher, draft)
        current = self.current(publisher)
        if check.policy is None:
            return DraftDiff(
                check=check, current=current, rules=RuleDiff(), known=(), by_condition=()
            )
        old, new, at = current.policy, check.policy, self.clock()
        return DraftDiff(
            check=check,
            current=current,
            rules=rule_diff(old, new),
            known=tuple(impacts(old, new, self.ontology, self.subscribers, at=at)),
            by_condition=tuple(impacts(old, new, self.ontology, representatives(old, new), at=at)),
        )

    def grants(self, credential: Credential) -> dict[str, Authorization]:
        """What ``credential`` gets from each publisher's current policy now, with reasons."""
        at = self.clock()
        return {
            p: auth_list(credential, self.current(p).policy, self.ontology, at=at)
            for p in self.publishers
        }

    def sign(self, publisher: str, draft: str) -> Policy:
        """Validate ``draft``, then write it as the publisher's policy with its signature.

        Raises:
            PolicyError: the draft is invalid, or does not supersede the signed version.
            UsageError: no key for this publisher here, or a file cannot be read or written.
        """
        files = self.files(publisher)
        if files.key is None:
            raise UsageError(
                f"no key for {publisher!r}: start the console with --key "
                f"{publisher}=KEY.pem to sign its policy here"
            )
        check = self.check(publisher, draft)
        if check.policy is None:
            raise PolicyError(check.error or "invalid draft")
        current = self.current(publisher)
        if current.signed and check.policy.version <= current.policy.version:
            raise PolicyError(
                f"version {check.policy.version} does not supersede the signed "
                f"version {current.policy.version}: raise it first"
            )
        data = draft.encode("utf-8")
        signature = sign_policy(data, self._key(files.key))
        _write_atomically(files.policy, data)
        _write_atomically(signature_path(files.policy), signature)
        return check.policy
