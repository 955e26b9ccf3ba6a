"""What each subscriber certificate was entitled to, and when: the publishers' own evaluation
of their signed policies over time (pure: no Spark here).

Theory of operation
-------------------
The audit is given the ontology and the publishers' signed policy versions (``--ontology``,
``--policy``). :func:`load_policies` reads them; :func:`check_signed` keeps a version only if
its detached signature (``<policy>.sig``) verifies under a publisher certificate the CA issued
to that publisher and the logs hold.

When did a version take effect? The logs say it: a publisher signs a policy-change notice for
every member whose grants a new version changes (:func:`xdn.provenance.policy_notice`), stamped
with the time it evaluated that version. A version is in force from its earliest notice
(``starts``); the lowest version given is in force from the beginning. A version no notice
names changed nobody's grants, so judging under its predecessor gives the same answer (it is
not used). For :data:`audit.faults.POLICY_GRACE_MS` after a change, sites may still act under
the previous version (they reload a signed policy within seconds), so both count then.

:func:`grant_intervals` cuts each subscriber certificate's validity (up to its revocation)
at every change, grace end and policy expiry, and evaluates each piece with
:func:`xdn.completeness.entitlement_of` — exactly what the publisher signs for its members:
``concepts`` it must deliver (whatever state its temporal and separation-of-duty rules are
in) and ``conditional`` ones it may. A piece says ``allowed`` (what some version in force may
deliver: a delivery of anything else is an ``entitlement`` failure) and ``required`` (what
every version in force must deliver: a publication holding one of those that the subscriber
never received is a ``completeness`` failure). Adjacent pieces that say the same are merged,
so the table grows with certificates times versions, never with the logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

from xdn import certs
from xdn.completeness import entitlement_of
from xdn.errors import (
    CertificateError,
    OntologyError,
    PolicyError,
    SignatureError,
    UsageError,
)
from xdn.ontology import Ontology, load_ontology
from xdn.policy import Policy, parse_policy, signature_path, verify_policy_file

__all__ = [
    "GRANT_SCHEMA",
    "Grant",
    "PolicyFile",
    "SubscriberCertificate",
    "check_signed",
    "grant_intervals",
    "load_policies",
]

#: The Spark schema of :class:`Grant` rows.
GRANT_SCHEMA = (
    "subscriber string, serial string, publisher string, from_ms bigint, to_ms bigint, "
    "versions string, allowed array<string>, required array<string>"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyFile:
    """One ``--policy`` file: where it is, and what it says."""

    path: Path
    policy: Policy


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberCertificate:
    """A subscriber certificate the CA issued to ``node`` (from the logs), and when a CRL
    revoked it (``None``: never)."""

    node: str
    cert_pem: str
    revoked_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """What one subscriber certificate was entitled to from one publisher in ``[from_ms,
    to_ms)``; ``versions``: the policy versions possibly in force (``"1|2"`` within the grace
    after a change)."""

    subscriber: str
    serial: str
    publisher: str
    from_ms: int
    to_ms: int
    versions: str
    allowed: tuple[str, ...]
    required: tuple[str, ...]


def load_policies(
    ontology_paths: Sequence[Path], policy_paths: Sequence[Path]
) -> tuple[Ontology, tuple[PolicyFile, ...]]:
    """Read the ontology and every policy version (validated against it; signatures are
    checked later, against the logs' publisher certificates: :func:`check_signed`).

    Raises:
        UsageError: a file is missing or invalid, two files give one publisher's same version,
            or policies are given without an ontology.
    """
    if policy_paths and not ontology_paths:
        raise UsageError("--policy needs --ontology (the policies are validated against it)")
    try:
        ontology = load_ontology(list(ontology_paths))
    except OntologyError as exc:
        raise UsageError(f"cannot read the ontology: {exc}") from None
    files, seen = [], set()
    for path in policy_paths:
        try:
            policy = parse_policy(Path(path).read_bytes(), ontology, source=str(path))
        except OSError as exc:
            raise UsageError(f"{path}: cannot read policy: {exc.strerror}") from None
        except PolicyError as exc:
            raise UsageError(str(exc)) from None
        if (policy.publisher, policy.version) in seen:
            raise UsageError(f"{path}: a second version {policy.version} of {policy.publisher}")
        seen.add((policy.publisher, policy.version))
        files.append(PolicyFile(path=Path(path), policy=policy))
    return ontology, tuple(files)


def check_signed(
    files: Sequence[PolicyFile], publisher_certs: Mapping[str, Sequence[str]]
) -> tuple[Policy, ...]:
    """The policies whose ``.sig`` verifies under a certificate of their publisher.

    Args:
        publisher_certs: publisher name → PEMs of the publisher certificates the CA issued it
            (from the logs).

    Raises:
        UsageError: a policy no certificate of its publisher in the logs signed.
    """
    out = []
    for file in files:
        held = publisher_certs.get(file.policy.publisher, ())
        for pem in held:
            try:
                key = certs.public_key_of(pem.encode("ascii"))
                verify_policy_file(file.path, key)
            except (PolicyError, SignatureError, CertificateError, ValueError):
                continue
            out.append(file.policy)
            break
        else:
            raise UsageError(
                f"{file.path}: no certificate of publisher {file.policy.publisher!r} in the "
                f"logs verifies {signature_path(file.path).name}"
                + ("" if held else " (the logs hold none of its certificates)")
            )
    return tuple(out)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _timeline(
    versions: Sequence[Policy], starts: Mapping[int, int]
) -> list[tuple[int | None, Policy]]:
    """``(start_ms, policy)`` in force order: the lowest version from the beginning (``None``),
    then each later version the logs say took effect (by its earliest notice)."""
    ordered = sorted(versions, key=lambda p: p.version)
    line: list[tuple[int | None, Policy]] = [(None, ordered[0])]
    for policy in ordered[1:]:
        start = starts.get(policy.version)
        if start is not None:
            line.append((start, policy))
    return sorted(line, key=lambda sp: (sp[0] is not None, sp[0] or 0))


def _in_force(line: list[tuple[int | None, Policy]], at: int, grace_ms: int) -> list[Policy]:
    """The versions possibly in force at ``at``: the newest started, and its predecessor
    within the grace after the change."""
    index = max(i for i, (start, _) in enumerate(line) if start is None or start <= at)
    start, policy = line[index]
    if index > 0 and start is not None and at < start + grace_ms:
        return [line[index - 1][1], policy]
    return [policy]


def _certificate_grants(
    holder: SubscriberCertificate,
    credential: certs.Credential,
    versions: Sequence[Policy],
    starts: Mapping[int, int],
    ontology: Ontology,
    grace_ms: int,
) -> Iterable[Grant]:
    begin = _ms(credential.not_before)
    end = _ms(credential.not_after) + 1  # valid through not_after
    if holder.revoked_ms is not None:
        end = min(end, holder.revoked_ms)
    if end <= begin:
        return
    line = _timeline(versions, starts)
    cuts = {begin, end}
    for start, _ in line:
        if start is not None:
            cuts |= {start, start + grace_ms}
    for policy in versions:
        if policy.valid_until is not None:
            cuts.add(_ms(policy.valid_until) + 1)
    points = sorted(c for c in cuts if begin <= c <= end)
    merged: list[Grant] = []
    for a, b in pairwise(points):
        in_force = _in_force(line, a, grace_ms)
        said = [entitlement_of(credential, p, ontology, at=_at(a)) for p in in_force]
        allowed = frozenset().union(*(e.concepts | e.conditional for e in said))
        required = frozenset.intersection(*(frozenset(e.concepts) for e in said))
        piece = Grant(
            subscriber=holder.node,
            serial=str(credential.serial),
            publisher=versions[0].publisher,
            from_ms=a,
            to_ms=b,
            versions="|".join(str(p.version) for p in in_force),
            allowed=tuple(sorted(allowed)),
            required=tuple(sorted(required)),
        )
        last = merged[-1] if merged else None
        if last is not None and (last.versions, last.allowed, last.required) == (
            piece.versions,
            piece.allowed,
            piece.required,
        ):
            merged[-1] = replace(last, to_ms=b)
        else:
            merged.append(piece)
    yield from merged


def grant_intervals(
    holders: Iterable[SubscriberCertificate],
    policies: Sequence[Policy],
    starts: Mapping[tuple[str, int], int],
    ontology: Ontology,
    *,
    grace_ms: int,
) -> list[Grant]:
    """Every subscriber certificate's entitlement from every publisher with a policy, as
    pieces of time (see the module docstring).

    Args:
        holders: the subscriber certificates (each once) the CA issued, from the logs.
        policies: the signed policy versions, any publishers.
        starts: ``(publisher, version)`` → when it took effect (its earliest notice, ms).
        grace_ms: how long after a change the previous version still counts.
    """
    by_publisher: dict[str, list[Policy]] = {}
    for policy in policies:
        by_publisher.setdefault(policy.publisher, []).append(policy)
    out: list[Grant] = []
    for holder in holders:
        try:
            credential = certs.credential_from_pem(holder.cert_pem.encode("ascii"))
        except (CertificateError, UsageError, ValueError):
            continue  # not a certificate: reported by the certificate checks
        for publisher, versions in sorted(by_publisher.items()):
            own = {v: ms for (p, v), ms in starts.items() if p == publisher}
            out.extend(_certificate_grants(holder, credential, versions, own, ontology, grace_ms))
    return out
