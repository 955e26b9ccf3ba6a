"""``xdn ontology check|show`` and ``xdn mapping test``."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.admin._common import load_ontology, ontology_arg, read
from xdn.errors import UsageError

if TYPE_CHECKING:
    from lxml import etree

__all__ = ["cmd_mapping_test", "cmd_ontology_check", "cmd_ontology_show", "register"]

GRAPHVIZ_HINT = (
    "install Graphviz: apt-get install graphviz (Debian/Ubuntu), dnf install graphviz "
    "(Fedora), brew install graphviz (macOS)"
)


def register(subparsers: Any) -> None:
    """Add ``ontology`` and ``mapping``."""
    onto = subparsers.add_parser("ontology", help="check or show the concept ontology")
    sub = onto.add_subparsers(dest="ontology_command", metavar="ACTION", required=True)
    p = sub.add_parser(
        "check", help="report cycles, unknown references, unsatisfiable and orphan concepts"
    )
    ontology_arg(p)
    p.set_defaults(func=cmd_ontology_check)
    p = sub.add_parser("show", help="print the containment DAG; write it as DOT, SVG or PNG")
    ontology_arg(p)
    p.add_argument("--dot", type=Path, metavar="FILE", help="write the DAG as Graphviz DOT")
    p.add_argument("--svg", type=Path, metavar="FILE", help="draw the DAG as SVG")
    p.add_argument("--png", type=Path, metavar="FILE", help="draw the DAG as PNG (Graphviz)")
    p.add_argument(
        "--builtin",
        action="store_true",
        help="draw SVG with the built-in layout even when Graphviz is installed",
    )
    p.set_defaults(func=cmd_ontology_show)

    mapping = subparsers.add_parser("mapping", help="test a concept → XPath mapping")
    sub = mapping.add_subparsers(dest="mapping_command", metavar="ACTION", required=True)
    p = sub.add_parser("test", help="show which elements of DOC map to which concept")
    p.add_argument("doc", type=Path, metavar="DOC")
    p.add_argument("--mapping", type=Path, required=True, metavar="M")
    ontology_arg(p)
    p.set_defaults(func=cmd_mapping_test)


def cmd_ontology_check(args: argparse.Namespace) -> int:
    """``xdn ontology check``: 0 when the DAG is fit for dissemination, else 1."""
    from xdn.ontology import check

    ontology = load_ontology(args)
    problems = check(ontology)
    for problem in problems:
        print(f"problem: {problem}")
    print(
        f"{ontology.iri}: {len(ontology.concepts)} concepts, "
        f"{ontology.graph.number_of_edges()} containments, {len(problems)} problem(s)"
    )
    return 1 if problems else 0


def _graphviz(dot: str, fmt: str, target: Path) -> None:
    exe = shutil.which("dot")
    if exe is None:
        raise UsageError(f"Graphviz 'dot' is not installed; {GRAPHVIZ_HINT}")
    try:
        subprocess.run(
            [exe, f"-T{fmt}", "-o", str(target)],
            input=dot.encode(),
            check=True,
            capture_output=True,
            timeout=120,
        )
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip()
        raise UsageError(f"Graphviz failed to draw {target}: {message}") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"Graphviz took too long to draw {target}") from None


def _write(path: Path, data: str) -> None:
    try:
        path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror}") from None


def cmd_ontology_show(args: argparse.Namespace) -> int:
    """``xdn ontology show``: print the tree; write DOT / SVG / PNG when asked."""
    from xdn.ontology import dot_text, svg_text, tree_lines

    if getattr(args, "png", None) and shutil.which("dot") is None:  # before printing anything
        raise UsageError(
            f"drawing PNG needs Graphviz 'dot', which is not installed; {GRAPHVIZ_HINT}; "
            "or use --svg (built-in layout, no Graphviz needed)"
        )
    ontology = load_ontology(args)
    print(ontology.iri)
    for line in tree_lines(ontology):
        print(line)
    dot = dot_text(ontology)
    if getattr(args, "dot", None):
        _write(args.dot, dot)
        print(f"wrote {args.dot}")
    if getattr(args, "svg", None):
        if shutil.which("dot") and not getattr(args, "builtin", False):
            _graphviz(dot, "svg", args.svg)
            print(f"wrote {args.svg} (Graphviz)")
        else:
            _write(args.svg, svg_text(ontology))
            note = (
                "" if getattr(args, "builtin", False) else f"; Graphviz not found — {GRAPHVIZ_HINT}"
            )
            print(f"wrote {args.svg} (built-in layout{note})")
    if getattr(args, "png", None):
        _graphviz(dot, "png", args.png)
        print(f"wrote {args.png} (Graphviz)")
    return 0


def _qname(element: etree._Element, prefixes: dict[str, str]) -> str:
    from lxml import etree

    name = etree.QName(element)
    prefix = prefixes.get(name.namespace or "", "")
    return f"{prefix}:{name.localname}" if prefix else name.localname


def cmd_mapping_test(args: argparse.Namespace) -> int:
    """``xdn mapping test``: each element of DOC with its line, and its concept or none."""
    from xdn import xmlsafe
    from xdn.mapping import load_mapping, map_document, unmapped_elements, unpublished

    ontology = load_ontology(args)
    mapping = load_mapping(args.mapping, ontology)
    read(args.doc)
    tree = xmlsafe.parse_file(args.doc)
    nodes = map_document(tree, mapping)
    concept_of = {node.element: node.concept for node in nodes}
    skeleton = set(unmapped_elements(tree, nodes))
    prefixes = {uri: prefix for prefix, uri in mapping.namespaces.items()}
    print(f"{'line':>6}  element  → concept")
    for element in tree.getroot().iter():
        if not isinstance(element.tag, str) or not (element in concept_of or element in skeleton):
            continue
        depth = sum(1 for _ in element.iterancestors())
        where = f"{element.sourceline:>6}  {'  ' * depth}{_qname(element, prefixes)}"
        concept = concept_of.get(element)
        print(f"{where}  → {concept}" if concept else f"{where}  not published")
    counts = {c: sum(1 for n in nodes if n.concept == c) for c in sorted(mapping.concepts)}
    print(f"{len(nodes)} mapped element(s)")
    if left := unpublished(tree, nodes, mapping):
        print(left.describe())
    print("(elements inside a mapped element travel in its fragment and are not listed)")
    for concept, count in counts.items():
        print(f"  {concept}: {count}" + ("  (matched nothing)" if not count else ""))
    unmapped = sorted(ontology.concepts - mapping.concepts)
    if unmapped:
        print(f"concepts this mapping never produces: {', '.join(unmapped)}")
    return 0
