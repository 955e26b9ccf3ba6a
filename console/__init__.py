"""The administrators' web console: the ontology, policies, who gets what, sites, the audit.

Served by ``xdn console`` (:mod:`console.cli`). Built on the core's ontology and policy
functions (:mod:`xdn.ontology`, :mod:`xdn.policy`) and on the sites' Admin API
(:mod:`deploy.site_admin`); it never reaches into a daemon. Pages are rendered on the server;
one small script adds live validation to the policy editor. See ``docs/console.md``.
"""

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
