"""Helpers shared by the administrator subcommands: arguments, files, time."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from xdn.errors import UsageError
from xdn.paths import REPO_ROOT

if TYPE_CHECKING:
    from xdn.certs import Credential
    from xdn.ontology import Ontology

__all__ = [
    "DEFAULT_ONTOLOGY",
    "at_arg",
    "credential",
    "load_ontology",
    "ontology_arg",
    "read",
    "when",
]

DEFAULT_ONTOLOGY = REPO_ROOT / "ontology" / "production.owl"


def ontology_arg(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--ontology OWL`` option."""
    parser.add_argument(
        "--ontology",
        type=Path,
        action="append",
        metavar="OWL",
        help=f"ontology file (RDF/XML, OWL/XML or N-Triples), repeatable "
        f"(default {DEFAULT_ONTOLOGY.relative_to(REPO_ROOT)})",
    )


def at_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--at ISO-TIME``."""
    parser.add_argument(
        "--at",
        type=datetime.fromisoformat,
        metavar="ISO-TIME",
        help="evaluation time (default now; naive times are UTC)",
    )


def when(args: argparse.Namespace) -> datetime:
    """``--at`` as an aware time, or now (this is an edge module: reading the clock is fine)."""
    at: datetime | None = getattr(args, "at", None)
    at = at or datetime.now(UTC)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def load_ontology(args: argparse.Namespace) -> Ontology:
    """The ontology named by ``--ontology`` (or the default one)."""
    from xdn.ontology import load_ontology as load

    return load(getattr(args, "ontology", None) or [DEFAULT_ONTOLOGY])


def read(path: Path) -> bytes:
    """The bytes of ``path``, or a :class:`UsageError` naming it."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None


def credential(path: Path) -> Credential:
    """The credential of a PEM certificate file."""
    from xdn.certs import credential_from_pem
    from xdn.errors import CertificateError

    try:
        return credential_from_pem(read(path))
    except CertificateError as exc:
        raise UsageError(f"{path}: {exc}") from None
