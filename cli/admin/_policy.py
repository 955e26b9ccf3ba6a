"""``xdn policy check|explain|diff|sign``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.admin._common import at_arg, credential, load_ontology, ontology_arg, read, when
from xdn.errors import PolicyError, UsageError

if TYPE_CHECKING:
    from xdn.certs import Credential
    from xdn.ontology import Ontology
    from xdn.policy import Authorization, Policy, Rule

__all__ = [
    "cmd_policy_check",
    "cmd_policy_diff",
    "cmd_policy_explain",
    "cmd_policy_sign",
    "explain_lines",
    "register",
]


def register(subparsers: Any) -> None:
    """Add ``policy`` and its actions."""
    policy = subparsers.add_parser("policy", help="check, explain, diff or sign a policy")
    sub = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    p = sub.add_parser("check", help="validate policies (and their signatures)")
    p.add_argument("policy", type=Path, nargs="+", metavar="POLICY")
    p.add_argument(
        "--verify",
        type=Path,
        metavar="PEM",
        help="publisher certificate or public key: also check POLICY.sig",
    )
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    at_arg(p)
    ontology_arg(p)
    p.set_defaults(func=cmd_policy_check)
    p = sub.add_parser("explain", help="what a credential gets, and why")
    p.add_argument("policy", type=Path, metavar="POLICY")
    p.add_argument("--cert", type=Path, required=True, metavar="CERT.pem")
    p.add_argument(
        "--disseminated",
        action="append",
        default=[],
        metavar="PUBLISHER:CONCEPT",
        help="a concept already disseminated (temporal rules), repeatable",
    )
    p.add_argument(
        "--received",
        action="append",
        default=[],
        metavar="CONCEPT=N",
        help="document instances of CONCEPT already received (separation of duty), repeatable",
    )
    p.add_argument(
        "--crl",
        type=Path,
        metavar="CRL.pem",
        help="the CA's CRL (with ca.pem beside it); a revoked certificate gets nothing "
        "(default: crl.pem beside CERT.pem, if any)",
    )
    at_arg(p)
    ontology_arg(p)
    p.set_defaults(func=cmd_policy_explain)
    p = sub.add_parser("diff", help="rules changed, and who gains or loses what")
    p.add_argument("old", type=Path, metavar="OLD")
    p.add_argument("new", type=Path, metavar="NEW")
    p.add_argument(
        "--certs",
        type=Path,
        metavar="DIR",
        help="evaluate every *.pem certificate in DIR (default: one per condition set)",
    )
    at_arg(p)
    ontology_arg(p)
    p.set_defaults(func=cmd_policy_diff)
    p = sub.add_parser("sign", help="validate, then write POLICY.sig")
    p.add_argument("policy", type=Path, metavar="POLICY")
    p.add_argument("--key", type=Path, required=True, metavar="KEY.pem")
    at_arg(p)
    ontology_arg(p)
    p.set_defaults(func=cmd_policy_sign)


def _public_key(path: Path) -> tuple[Any, str | None]:
    from xdn import crypto
    from xdn.certs import credential_from_pem, public_key_of

    data = read(path)
    if b"BEGIN CERTIFICATE" in data:
        return public_key_of(data), credential_from_pem(data).name
    return crypto.load_public_key_pem(data), None


def cmd_policy_check(args: argparse.Namespace) -> int:
    """``xdn policy check``: validate each policy (signature with ``--verify``); 0 when fine."""
    from xdn.policy import PolicySet, load_policy, load_signed_policy

    ontology = load_ontology(args)
    at = when(args)
    policies = []
    paths = args.policy if isinstance(args.policy, list) else [args.policy]
    for path in paths:
        if getattr(args, "verify", None):
            key, publisher = _public_key(args.verify)
            policy = load_signed_policy(path, ontology, key, publisher=publisher, at=at)
            signed = ", signature verified"
        else:
            policy = load_policy(path, ontology, at=at)
            signed = ""
        for warning in policy.warnings:
            print(f"warning: {warning}")
        if policy.warnings and getattr(args, "strict", False):
            raise PolicyError(f"{path}: {len(policy.warnings)} warning(s) and --strict")
        grants = sum(1 for r in policy.rules if r.effect == "grant")
        until = f", valid until {policy.valid_until.isoformat()}" if policy.valid_until else ""
        print(
            f"{path}: publisher {policy.publisher}, version {policy.version}{until}, "
            f"{grants} grant / {len(policy.rules) - grants} deny rule(s){signed}: OK"
        )
        policies.append(policy)
    PolicySet.of(ontology, policies)
    return 0


def _rule_text(rule: Rule) -> str:
    parts = [f"{rule.effect} {rule.concept}" + (" and sub-concepts" if rule.inherit else "")]
    if rule.requires:
        parts.append(f"if {', '.join(rule.requires)} granted")
    parts += [f"after {a.concept} of {a.publisher}" for a in rule.after]
    if rule.max_instances is not None:
        parts.append(f"at most {rule.max_instances} instance(s)")
    return f"{rule.id}: {', '.join(parts)} — for {rule.when.describe()}"


def explain_lines(
    credential: Credential, authorization: Authorization, policy: Policy | None = None
) -> list[str]:
    """Human-readable explanation of one authorization (rules, paths, notes)."""
    from xdn.certs import describe_fields

    subject = describe_fields(credential.subject)
    lines = [
        f"credential {subject} (role {credential.role}), valid "
        f"{credential.not_before.isoformat()} to {credential.not_after.isoformat()}",
    ]
    if policy is not None:
        matched = [r for r in policy.rules if r.when.matches(credential)]
        lines.append(f"rules matching this credential: {len(matched)} of {len(policy.rules)}")
        lines += [f"  {_rule_text(rule)}" for rule in matched]
    lines.append(
        f"publisher {authorization.publisher}: "
        f"{', '.join(sorted(authorization.concepts)) or 'nothing'}"
    )
    for grant in authorization.explain:
        path = " ⊒ ".join(grant.via)
        because = f"  (because {', '.join(grant.because)} is granted)" if grant.because else ""
        lines.append(f"  {grant.effect:5} {grant.concept:24} by {grant.rule} via {path}{because}")
    lines += [f"  limit {concept}: at most {n} instance(s)" for concept, n in authorization.limits]
    lines += [f"  note  {note}" for note in authorization.notes]
    return lines


def _state(args: argparse.Namespace) -> tuple[set[tuple[str, str]], dict[str, int]]:
    disseminated = set()
    for item in getattr(args, "disseminated", None) or []:
        publisher, _, concept = item.partition(":")
        if not publisher or not concept:
            raise UsageError(f"--disseminated {item!r}: write PUBLISHER:CONCEPT")
        disseminated.add((publisher, concept))
    received = {}
    for item in getattr(args, "received", None) or []:
        concept, _, count = item.partition("=")
        if not concept or not count.isdigit():
            raise UsageError(f"--received {item!r}: write CONCEPT=N")
        received[concept] = int(count)
    return disseminated, received


def cmd_policy_explain(args: argparse.Namespace) -> int:
    """``xdn policy explain``: what the credential gets from this policy, and why."""
    from xdn.policy import auth_list, load_policy

    ontology = load_ontology(args)
    policy = load_policy(args.policy, ontology)
    holder = credential(args.cert)
    at = when(args)
    print(f"{args.policy} version {policy.version} at {at.isoformat()}")
    revoked = _revocation(args, holder)
    if revoked is not None:
        print(revoked)
        return 0
    disseminated, received = _state(args)
    authorization = auth_list(
        holder, policy, ontology, at=at, disseminated=disseminated, instances=received
    )
    for line in explain_lines(holder, authorization, policy):
        print(line)
    return 0


def _revocation(args: argparse.Namespace, holder: Credential) -> str | None:
    """What to say instead of the grants when ``--crl`` (default: ``crl.pem`` beside the
    certificate, if there is one) lists the certificate; ``None`` when it does not.

    The CRL must be the CA's (``ca.pem`` beside it); its freshness does not matter here: a
    revocation is for good.
    """
    from xdn.certs import read_crl
    from xdn.errors import XdnError

    crl_path: Path | None = args.crl
    if crl_path is None:
        beside = args.cert.parent / "crl.pem"
        if not beside.exists():
            return None
        crl_path = beside
    ca_path = crl_path.parent / "ca.pem"
    try:
        revoked = read_crl(read(crl_path), read(ca_path)).serials
    except XdnError as exc:
        raise UsageError(f"{crl_path}: {exc}") from None
    if holder.serial not in revoked:
        return None
    return (
        f"certificate {args.cert} (serial {holder.serial:x}) is revoked by {crl_path}: every site "
        f"refuses it, so it gets nothing from this policy"
    )


def _certificates(directory: Path) -> dict[str, Credential]:
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    found = {}
    for path in sorted(directory.glob("*.pem")):
        if b"BEGIN CERTIFICATE" in read(path):
            found[path.name] = credential(path)
    if not found:
        raise UsageError(f"{directory}: no *.pem certificate")
    return found


def _diff_lines(
    old: Policy, new: Policy, ontology: Ontology, args: argparse.Namespace
) -> list[str]:
    from xdn.policy import impacts, representatives, rule_diff

    changes = rule_diff(old, new)
    lines = [f"{old.publisher}: version {old.version} → {new.version}"]
    lines += [f"  + {_rule_text(r)}" for r in changes.added]
    lines += [f"  - {_rule_text(r)}" for r in changes.removed]
    for before, after in changes.edited:
        lines += [f"  ~ {_rule_text(before)}", f"    → {_rule_text(after)}"]
    if not changes:
        lines.append("  no rule changed")
    certs = getattr(args, "certs", None)
    who = _certificates(certs) if certs else representatives(old, new)
    label = "certificate" if certs else "credentials with"
    found = [i for i in impacts(old, new, ontology, who, at=when(args)) if i.gained or i.lost]
    for impact in found:
        lines.append(f"{label} {impact.who}:")
        if impact.gained:
            lines.append(f"  gains {', '.join(sorted(impact.gained))}")
        if impact.lost:
            lines.append(f"  loses {', '.join(sorted(impact.lost))}")
    if not found:
        what = "certificates" if certs else "credentials"
        lines.append(f"nobody gains or loses anything ({len(who)} {what} evaluated)")
    return lines


def cmd_policy_diff(args: argparse.Namespace) -> int:
    """``xdn policy diff OLD NEW``: rule changes, then who gains or loses which concepts."""
    from xdn.policy import load_policy

    ontology = load_ontology(args)
    old, new = load_policy(args.old, ontology), load_policy(args.new, ontology)
    if old.publisher != new.publisher:
        raise UsageError(f"{args.new}: policy of {new.publisher!r}, not {old.publisher!r}")
    if new.version <= old.version:
        print(f"warning: {args.new}: version {new.version} does not supersede {old.version}")
    for line in _diff_lines(old, new, ontology, args):
        print(line)
    return 0


def cmd_policy_sign(args: argparse.Namespace) -> int:
    """``xdn policy sign``: refuse an invalid or expired policy, else write ``POLICY.sig``."""
    from xdn import crypto
    from xdn.policy import parse_policy, sign_policy, signature_path

    ontology = load_ontology(args)
    data = read(args.policy)
    policy = parse_policy(data, ontology, source=str(args.policy), at=when(args))
    if not args.key.exists():
        raise UsageError(
            f"{args.key}: no such key; the policy of {policy.publisher!r} is signed with that "
            f"publisher's key: issue its certificate first (`xdn certs issue --dir "
            f"{args.key.parent} --name {policy.publisher} --role publisher` writes "
            f"{args.key.parent / (policy.publisher + '.key')})"
        )
    key = crypto.load_private_key_pem(read(args.key))
    target = signature_path(args.policy)
    try:
        target.write_bytes(sign_policy(data, key))
    except OSError as exc:
        raise UsageError(f"{target}: cannot write: {exc.strerror}") from None
    print(
        f"signed {args.policy} (publisher {policy.publisher}, version {policy.version}) → {target}"
    )
    return 0
