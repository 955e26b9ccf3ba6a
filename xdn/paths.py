"""Where the embedded defaults live (sample ontology, mappings, policies, site configs)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO_ROOT"]

# xdn is installed editable from the repository; its data folders sit beside the package.
REPO_ROOT = Path(__file__).resolve().parents[1]
