"""The administrators' web console: the ontology, policies, who gets what, sites, the audit.

Served by ``xdn console`` (:mod:`console.cli`). Built on the core's ontology and policy
functions (:mod:`xdn.ontology`, :mod:`xdn.policy`) and on the sites' Admin API
(:mod:`deploy.site_admin`); it never reaches into a daemon. Pages are rendered on the server;
one small script adds live validation to the policy editor. See ``docs/console.md``.

The names below load on first use, so that registering ``xdn console`` (importing
:mod:`console.cli`) loads neither aiohttp nor gRPC: ``xdn --help`` stays fast, and gRPC is
not imported before the command line has set it up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console._access import ClientCertGate, Gate, TokenGate, mutual_tls
    from console._server import ConsoleConfig, build_app, latest_report
    from console._workspace import PublisherFiles, Workspace, known_subscribers

__all__ = [
    "ClientCertGate",
    "ConsoleConfig",
    "Gate",
    "PublisherFiles",
    "TokenGate",
    "Workspace",
    "build_app",
    "known_subscribers",
    "latest_report",
    "mutual_tls",
]

_HOMES = {
    "ClientCertGate": "_access",
    "Gate": "_access",
    "TokenGate": "_access",
    "mutual_tls": "_access",
    "ConsoleConfig": "_server",
    "build_app": "_server",
    "latest_report": "_server",
    "PublisherFiles": "_workspace",
    "Workspace": "_workspace",
    "known_subscribers": "_workspace",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'console' has no attribute {name!r}")
    return getattr(importlib.import_module(f"console.{home}"), name)
