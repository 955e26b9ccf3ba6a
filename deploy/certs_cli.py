"""``xdn certs``: create a development CA, issue certificates, revoke them (CRL)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from deploy.pki import CRL_DAYS, Party, ensure_ca, issue_party, revoke_party, write_crl
from xdn import certs, crypto
from xdn.errors import UsageError

__all__ = ["register"]


def _attributes(pairs: list[str]) -> dict[str, str | list[str]]:
    """``--attr`` pairs; a field given several times keeps every value, in order."""
    out: dict[str, list[str]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--attr expects FIELD=VALUE (e.g. OU=Cred1), got {pair!r}")
        out.setdefault(key, []).append(value)
    return {key: values[0] if len(values) == 1 else values for key, values in out.items()}


def _init(args: argparse.Namespace) -> int:
    now = datetime.now(UTC)
    path = ensure_ca(args.dir, now=now, name=args.name, curve=args.curve)
    print(f"CA certificate: {path} ({certs.curve_of_certificate(path.read_bytes())})")
    if not (args.dir / "crl.pem").exists():  # a site's `crl = ".../crl.pem"` works at once
        print(f"CRL (empty, signed by the CA): {write_crl(args.dir, now=now)}")
    return 0


def _issue(args: argparse.Namespace) -> int:
    attributes = _attributes(args.attr)
    if args.block:
        attributes[certs.BLOCK_FIELD] = args.block
    party = Party(name=args.name, role=args.role, attributes=attributes, hosts=args.host)
    files = issue_party(args.dir, party, now=datetime.now(UTC), days=args.days)
    print(f"certificate: {files.cert}\nprivate key: {files.key}")
    return 0


def _show(args: argparse.Namespace) -> int:
    credential = certs.credential_from_pem(args.cert.read_bytes())
    print(f"name:      {credential.name}\nrole:      {credential.role}")
    if credential.block:
        print(f"block:     {credential.block} (the block this site may serve)")
    print(f"uri:       {credential.uri}")
    print("subject:   " + certs.describe_fields(credential.subject))
    print("issuer:    " + certs.describe_fields(credential.issuer))
    print(f"valid:     {credential.not_before.isoformat()} .. {credential.not_after.isoformat()}")
    print(f"sha256:    {credential.fingerprint}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    serial = revoke_party(args.dir, args.name, now=datetime.now(UTC), days=args.days)
    print(f"revoked certificate of {args.name} (serial {serial:x})")
    print(f"CRL: {args.dir / 'crl.pem'}")
    return 0


def _crl(args: argparse.Namespace) -> int:
    print(f"CRL: {write_crl(args.dir, now=datetime.now(UTC), days=args.days)}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``xdn certs init|issue|show|revoke|crl``."""
    parser = subparsers.add_parser(
        "certs", help="development CA and certificates", description=__doc__
    )
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    init = sub.add_parser("init", help="create a development CA (ca.pem, ca.key) in --dir")
    init.add_argument("--dir", type=Path, required=True, help="certificate directory")
    init.add_argument("--name", default="xdn-dev-ca", help="CA common name")
    init.add_argument(
        "--curve", choices=sorted(crypto.CURVES), default=crypto.DEFAULT_CURVE,
        help=f"ECDSA curve of the CA and of every key it issues (default {crypto.DEFAULT_CURVE}: "
        "~9x faster to verify; P-384 for the larger security margin)",
    )
    init.set_defaults(func=_init)
    issue = sub.add_parser(
        "issue",
        help="issue a site, publisher or subscriber certificate from the CA in --dir",
        description="Writes NAME.pem and NAME.key (mode 0600) into --dir.",
    )
    issue.add_argument("--dir", type=Path, required=True, help="certificate directory with the CA")
    issue.add_argument("--name", required=True, help="common name, e.g. d1, production-dept, alice")
    issue.add_argument("--role", required=True, choices=sorted(certs.ROLES))
    issue.add_argument(
        "--attr", action="append", default=[], metavar="FIELD=VALUE",
        help="extra subject field policies can match, e.g. OU=Cred1 (repeatable)",
    )
    issue.add_argument(
        "--host", action="append", default=[],
        help="TLS host name or IP it serves (a site; `xdn console --tls`), repeatable",
    )
    issue.add_argument(
        "--block", metavar="CONCEPT",
        help="for a site (required): the concept whose maximum conceptual block it may serve; "
        "peers and the DHT refuse it any other",
    )
    issue.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    issue.set_defaults(func=_issue)
    show = sub.add_parser("show", help="print what a certificate says (role, subject, validity)")
    show.add_argument("cert", type=Path, help="certificate PEM file")
    show.set_defaults(func=_show)
    revoke = sub.add_parser(
        "revoke",
        help="revoke NAME's certificate and rewrite the CRL (crl.pem) in --dir",
        description="Appends NAME's serial to revoked.txt and rewrites crl.pem, signed by the "
        "CA. Sites with `[tls] crl` reload it at once and end NAME's connections.",
    )
    revoke.add_argument("--dir", type=Path, required=True, help="certificate directory with the CA")
    revoke.add_argument("--name", required=True, help="whose certificate (NAME.pem) to revoke")
    crl = sub.add_parser("crl", help="re-sign crl.pem from revoked.txt (before it goes stale)")
    crl.add_argument("--dir", type=Path, required=True, help="certificate directory with the CA")
    for action in (revoke, crl):
        action.add_argument(
            "--days", type=int, default=CRL_DAYS,
            help=f"days until the CRL goes stale (default {CRL_DAYS})",
        )
    revoke.set_defaults(func=_revoke)
    crl.set_defaults(func=_crl)
