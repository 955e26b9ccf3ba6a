"""Administrator subcommands: ``ontology``, ``mapping``, ``policy`` and ``generate``.

Each leaf subcommand sets ``func`` to a function of the parsed namespace returning an exit
code. Errors are raised as :class:`~xdn.errors.XdnError` and printed by ``xdn.cli.main``. Heavy
imports (owlready2, lxml) happen inside the command functions so ``xdn --help`` stays fast.
This is an edge module: reading the clock for ``policy explain`` without ``--at`` is fine here.
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdn.errors import UsageError

if TYPE_CHECKING:
    from lxml import etree

    from xdn.certs import Credential
    from xdn.ontology import Ontology
    from xdn.policy import Authorization

__all__ = ["REPO_ROOT", "parse_size", "register"]

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ONTOLOGY = REPO_ROOT / "ontology" / "production.owl"
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(|B|KB|KIB|K|MB|MIB|M|GB|GIB|G)", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """``"10MB"`` → bytes (K, M, G are powers of 1024; ``KiB`` and ``KB`` alike)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"cannot read size {text!r}; write e.g. 512KB, 10MB or 1GB")
    value = float(match.group(1)) * _UNITS[match.group(2)[:1].upper()]
    if value < 1:
        raise UsageError(f"size {text!r} is not positive")
    return int(value)


def _ontology_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ontology",
        type=Path,
        action="append",
        metavar="OWL",
        help=f"ontology file, repeatable (default {DEFAULT_ONTOLOGY})",
    )


def _load_ontology(args: argparse.Namespace) -> Ontology:
    from xdn.ontology import load_ontology

    return load_ontology(args.ontology or [DEFAULT_ONTOLOGY])


def register(subparsers: Any) -> None:
    """Add the administrator subcommands to the ``xdn`` parser."""
    onto = subparsers.add_parser("ontology", help="check or show the concept ontology")
    onto_sub = onto.add_subparsers(dest="ontology_command", metavar="ACTION", required=True)
    p = onto_sub.add_parser("check", help="report cycles, orphans and several roots")
    _ontology_arg(p)
    p.set_defaults(func=cmd_ontology_check)
    p = onto_sub.add_parser("show", help="print the containment DAG as an indented tree")
    _ontology_arg(p)
    p.add_argument("--dot", type=Path, metavar="FILE", help="also write the DAG as Graphviz DOT")
    p.set_defaults(func=cmd_ontology_show)

    mapping = subparsers.add_parser("mapping", help="test a concept → XPath mapping")
    mapping_sub = mapping.add_subparsers(dest="mapping_command", metavar="ACTION", required=True)
    p = mapping_sub.add_parser("test", help="show which elements of DOC map to which concept")
    p.add_argument("doc", type=Path, metavar="DOC")
    p.add_argument("--mapping", type=Path, required=True, metavar="M")
    _ontology_arg(p)
    p.set_defaults(func=cmd_mapping_test)

    policy = subparsers.add_parser("policy", help="check, explain or sign a policy")
    policy_sub = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    p = policy_sub.add_parser("check", help="validate a policy (and its signature)")
    p.add_argument("policy", type=Path, metavar="POLICY")
    p.add_argument(
        "--verify",
        type=Path,
        metavar="PEM",
        help="publisher certificate or public key: also check POLICY.sig",
    )
    _ontology_arg(p)
    p.set_defaults(func=cmd_policy_check)
    p = policy_sub.add_parser("explain", help="what a credential gets, and why")
    p.add_argument("policy", type=Path, metavar="POLICY")
    p.add_argument("--cert", type=Path, required=True, metavar="CERT.pem")
    p.add_argument(
        "--at",
        type=datetime.fromisoformat,
        metavar="ISO-TIME",
        help="evaluation time (default now; naive times are UTC)",
    )
    _ontology_arg(p)
    p.set_defaults(func=cmd_policy_explain)
    p = policy_sub.add_parser("sign", help="validate, then write POLICY.sig")
    p.add_argument("policy", type=Path, metavar="POLICY")
    p.add_argument("--key", type=Path, required=True, metavar="KEY.pem")
    _ontology_arg(p)
    p.set_defaults(func=cmd_policy_sign)

    p = subparsers.add_parser("generate", help="generate a realistic enterprise XML document")
    p.add_argument("--schema", choices=("production-dept", "qa-company"), required=True)
    p.add_argument("--size", type=parse_size, default=parse_size("1MB"), help="e.g. 10MB")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fragments", type=int, metavar="N", help="about N mapped elements")
    p.add_argument("--out", type=Path, required=True, metavar="FILE", help="'-' for stdout")
    p.set_defaults(func=cmd_generate)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None


# ----------------------------------------------------------------------------- ontology


def cmd_ontology_check(args: argparse.Namespace) -> int:
    """``xdn ontology check``: 0 when the DAG is fit for dissemination."""
    from xdn.ontology import check

    ontology = _load_ontology(args)
    problems = check(ontology)
    for problem in problems:
        print(f"problem: {problem}")
    print(
        f"{ontology.iri}: {len(ontology.concepts)} concepts, "
        f"{ontology.graph.number_of_edges()} containments, {len(problems)} problem(s)"
    )
    return 1 if problems else 0


def tree_lines(ontology: Ontology) -> list[str]:
    """The DAG as an indented tree; a concept with several parents appears under each."""
    lines: list[str] = []

    def walk(concept: str, depth: int, trail: frozenset[str]) -> None:
        others = sorted(ontology.parents(concept) - trail)
        note = f"  [also ⊑ {', '.join(others)}]" if depth and others else ""
        label = ontology.labels.get(concept, concept)
        lines.append(f"{'  ' * depth}{concept} — {label}{note}")
        for child in sorted(ontology.children(concept)):
            if child not in trail:
                walk(child, depth + 1, trail | {concept})

    for root in sorted(ontology.roots()):
        walk(root, 0, frozenset())
    return lines


def dot_text(ontology: Ontology) -> str:
    """Graphviz DOT of the containment DAG (edges parent → child)."""
    out = ["digraph ontology {", "  rankdir=TB;", "  node [shape=box];"]
    for concept in sorted(ontology.concepts):
        label = ontology.labels.get(concept, concept).replace('"', r"\"")
        out.append(f'  "{concept}" [label="{label}"];')
    out += [f'  "{p}" -> "{c}";' for p, c in sorted(ontology.graph.edges)]
    return "\n".join([*out, "}", ""])


def cmd_ontology_show(args: argparse.Namespace) -> int:
    """``xdn ontology show``: print the tree; ``--dot FILE`` writes DOT too."""
    ontology = _load_ontology(args)
    print(ontology.iri)
    for line in tree_lines(ontology):
        print(line)
    if args.dot:
        args.dot.write_text(dot_text(ontology), encoding="utf-8")
        print(f"wrote {args.dot}")
    return 0


# ----------------------------------------------------------------------------- mapping


def _qname(element: etree._Element, prefixes: dict[str, str]) -> str:
    from lxml import etree

    name = etree.QName(element)
    prefix = prefixes.get(name.namespace or "", "")
    return f"{prefix}:{name.localname}" if prefix else name.localname


def cmd_mapping_test(args: argparse.Namespace) -> int:
    """``xdn mapping test``: list mapped elements and skeleton elements of DOC."""
    from xdn import xmlsafe
    from xdn.mapping import load_mapping, map_document, unmapped_elements

    ontology = _load_ontology(args)
    mapping = load_mapping(args.mapping, ontology)
    tree = xmlsafe.parse_file(args.doc)
    nodes = map_document(tree, mapping)
    concept_of = {node.element: node.concept for node in nodes}
    skeleton = set(unmapped_elements(tree, nodes))
    prefixes = {uri: prefix for prefix, uri in mapping.namespaces.items()}
    root = tree.getroot()
    for element in root.iter():
        if not isinstance(element.tag, str) or not (element in concept_of or element in skeleton):
            continue
        depth = sum(1 for _ in element.iterancestors())
        where = f"{element.sourceline:>6}  {'  ' * depth}{_qname(element, prefixes)}"
        concept = concept_of.get(element)
        print(f"{where}  → {concept}" if concept else f"{where}  (no concept)")
    counts = {c: sum(1 for n in nodes if n.concept == c) for c in sorted(mapping.concepts)}
    print(f"{len(nodes)} mapped element(s), {len(skeleton)} element(s) with no concept")
    for concept, count in counts.items():
        print(f"  {concept}: {count}" + ("  (matched nothing)" if not count else ""))
    return 0


# ----------------------------------------------------------------------------- policy


def _public_key(path: Path) -> tuple[Any, str | None]:
    from xdn import crypto

    data = _read(path)
    if b"BEGIN CERTIFICATE" in data:
        from xdn.certs import credential_from_pem, public_key_of

        return public_key_of(data), credential_from_pem(data).name
    return crypto.load_public_key_pem(data), None


def cmd_policy_check(args: argparse.Namespace) -> int:
    """``xdn policy check``: validate (and with ``--verify`` check the signature)."""
    from xdn.policy import load_policy, load_signed_policy

    ontology = _load_ontology(args)
    if args.verify:
        key, publisher = _public_key(args.verify)
        policy = load_signed_policy(args.policy, ontology, key, publisher=publisher)
        signed = ", signature verified"
    else:
        policy = load_policy(args.policy, ontology)
        signed = ""
    grants = sum(1 for r in policy.rules if r.effect == "grant")
    print(
        f"{args.policy}: publisher {policy.publisher}, version {policy.version}, "
        f"{grants} grant / {len(policy.rules) - grants} deny rule(s){signed}: OK"
    )
    return 0


def _credential(path: Path) -> Credential:
    from xdn.certs import credential_from_pem

    return credential_from_pem(_read(path))


def explain_lines(credential: Credential, authorization: Authorization) -> list[str]:
    """Human-readable explanation of one authorization."""
    subject = ", ".join(f"{k}={v}" for k, v in credential.subject.items())
    lines = [
        f"credential {subject} (role {credential.role}), valid "
        f"{credential.not_before.isoformat()} to {credential.not_after.isoformat()}",
        f"publisher {authorization.publisher}: "
        f"{', '.join(sorted(authorization.concepts)) or 'nothing'}",
    ]
    for grant in authorization.explain:
        path = " ⊒ ".join(grant.via)
        because = f"  (because {', '.join(grant.because)} is granted)" if grant.because else ""
        lines.append(f"  {grant.effect:5} {grant.concept:24} by {grant.rule} via {path}{because}")
    lines += [f"  limit {concept}: at most {n} instance(s)" for concept, n in authorization.limits]
    lines += [f"  note  {note}" for note in authorization.notes]
    return lines


def cmd_policy_explain(args: argparse.Namespace) -> int:
    """``xdn policy explain``: what the credential gets from this policy, and why."""
    from xdn.policy import auth_list, load_policy

    ontology = _load_ontology(args)
    policy = load_policy(args.policy, ontology)
    credential = _credential(args.cert)
    at = args.at or datetime.now(UTC)
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    authorization = auth_list(credential, policy, ontology, at=at)
    print(f"{args.policy} version {policy.version} at {at.isoformat()}")
    for line in explain_lines(credential, authorization):
        print(line)
    return 0


def cmd_policy_sign(args: argparse.Namespace) -> int:
    """``xdn policy sign``: refuse an invalid policy, else write ``POLICY.sig``."""
    from xdn import crypto
    from xdn.policy import parse_policy, sign_policy, signature_path

    ontology = _load_ontology(args)
    data = _read(args.policy)
    policy = parse_policy(data, ontology, source=str(args.policy))
    key = crypto.load_private_key_pem(_read(args.key))
    target = signature_path(args.policy)
    target.write_bytes(sign_policy(data, key))
    print(
        f"signed {args.policy} (publisher {policy.publisher}, version {policy.version}) → {target}"
    )
    return 0


# ----------------------------------------------------------------------------- generate


def cmd_generate(args: argparse.Namespace) -> int:
    """``xdn generate``: write a deterministic document of about ``--size`` bytes."""
    from xdn.docgen import generate

    if args.fragments is not None and args.fragments < 1:
        raise UsageError("--fragments must be positive")
    if str(args.out) == "-":
        written = generate(
            args.schema, args.size, sys.stdout.buffer, seed=args.seed, fragments_hint=args.fragments
        )
        return 0
    try:
        with args.out.open("wb") as out:
            written = generate(
                args.schema, args.size, out, seed=args.seed, fragments_hint=args.fragments
            )
    except OSError as exc:
        raise UsageError(f"{args.out}: cannot write: {exc.strerror}") from None
    print(f"wrote {written} bytes of {args.schema} XML to {args.out}")
    return 0
