"""The console's aiohttp application: routes, the access gate, security headers, handlers.

Handlers only read the request, ask the :class:`~console._workspace.Workspace` or the sites'
Admin API (:mod:`deploy.site_admin`) and render a page; every page is built on the server.
A bad draft or certificate is shown on the page (status 400), never raised to aiohttp.
"""

from __future__ import annotations

import asyncio
import importlib.resources
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

from console import _pages as pages
from console import _policy_pages as policy_pages
from console._access import COOKIE, Gate, TokenGate, same_origin
from console._workspace import Workspace
from deploy.site_admin import fetch_status, fetch_subscribers
from xdn.certs import credential_from_pem
from xdn.errors import XdnError
from xdn.grpc_tls import TlsFiles
from xdn.ontology import check, svg_text
from xdn.policy import signature_path

__all__ = ["ConsoleConfig", "build_app", "latest_report"]

MAX_BODY = 1024 * 1024
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# The audit report is the audit's own HTML (inline style): shown sandboxed, no script at all.
_REPORT_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleConfig:
    """Everything the console serves from.

    Args:
        workspace: policies, keys, ontology, known subscribers.
        gate: who may use the console.
        sites: ``HOST:PORT`` of the sites whose status to show.
        admin_tls: the console's certificate for the sites' Admin API (``None``: no sites).
        audit_report: the audit's ``report.html``, or a folder of audit outputs (the newest
            ``report.html`` under it is shown).
        site_timeout: seconds to wait for one site.
        page_size: subscribers shown at once (1 to 1000).
    """

    workspace: Workspace
    gate: Gate
    sites: tuple[str, ...] = ()
    admin_tls: TlsFiles | None = None
    audit_report: Path | None = None
    site_timeout: float = 10.0
    page_size: int = 100


def latest_report(path: Path) -> Path | None:
    """``path`` itself if a file, else the newest ``report.html`` under the folder ``path``."""
    if path.is_file():
        return path
    found = [p for p in path.rglob("report.html") if p.is_file()] if path.is_dir() else []
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


class _Console:
    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.ws = config.workspace
        self.svg = svg_text(self.ws.ontology)
        self.problems = check(self.ws.ontology)

    @property
    def nav(self) -> list[tuple[str, str]]:
        return [
            ("/", "Overview"),
            ("/ontology", "Ontology"),
            *((f"/policies/{p}", f"Policy: {p}") for p in self.ws.publishers),
            ("/who", "Who gets what"),
            ("/sites", "Sites"),
            ("/audit", "Audit report"),
        ]

    def html(self, text: str, status: int = 200) -> web.Response:
        return web.Response(text=text, status=status, content_type="text/html")

    def fail(self, title: str, message: str, status: int = 400) -> web.Response:
        return self.html(pages.message_page(title, message, nav=self.nav), status)

    def publisher(self, request: web.Request) -> str:
        name = request.match_info["publisher"]
        if name not in self.ws.publishers:
            raise web.HTTPNotFound(text=f"no policy of {name!r} here")
        return name

    async def draft(self, request: web.Request) -> str:
        form = await request.post()
        value = form.get("draft", "")
        return (value if isinstance(value, str) else "").replace("\r\n", "\n")

    # -- pages ---------------------------------------------------------------------------------

    async def overview(self, request: web.Request) -> web.Response:
        states = {}
        for p in self.ws.publishers:
            try:
                current = self.ws.current(p)
                states[p] = f"version {current.policy.version}, signature {current.signature}"
            except XdnError as exc:
                states[p] = f"unreadable: {exc}"
        return self.html(
            pages.overview_page(
                states,
                sites=self.config.sites,
                subscribers=len(self.ws.subscribers),
                audit=self.config.audit_report is not None,
                nav=self.nav,
            )
        )

    async def ontology(self, request: web.Request) -> web.Response:
        return self.html(
            pages.ontology_page(self.ws.ontology, self.svg, self.problems, nav=self.nav)
        )

    async def policy(self, request: web.Request) -> web.Response:
        publisher = self.publisher(request)
        try:
            current = self.ws.current(publisher)
        except XdnError as exc:
            return self.fail(f"Policy of {publisher}", str(exc), 500)
        draft, checked = current.text, None
        if request.method == "POST":
            draft = await self.draft(request)
            checked = self.ws.check(publisher, draft)
        return self.html(
            policy_pages.policy_page(
                publisher,
                str(self.ws.files(publisher).policy),
                current,
                draft=draft,
                check=checked,
                can_sign=self.ws.files(publisher).key is not None,
                nav=self.nav,
            ),
            400 if checked is not None and not checked.ok else 200,
        )

    async def check(self, request: web.Request) -> web.Response:
        checked = self.ws.check(self.publisher(request), await self.draft(request))
        return web.json_response(
            {
                "ok": checked.ok,
                "error": checked.error,
                "line": checked.line,
                "warnings": list(checked.warnings),
                "html": policy_pages.check_html(checked),
            }
        )

    async def diff(self, request: web.Request) -> web.Response:
        publisher = self.publisher(request)
        draft = await self.draft(request)
        found = self.ws.diff(publisher, draft)
        return self.html(
            policy_pages.diff_page(
                publisher,
                found,
                draft=draft,
                can_sign=self.ws.files(publisher).key is not None,
                nav=self.nav,
            ),
            200 if found.check.ok else 400,
        )

    async def sign(self, request: web.Request) -> web.Response:
        publisher = self.publisher(request)
        try:
            policy = self.ws.sign(publisher, await self.draft(request))
        except XdnError as exc:
            return self.fail(f"Not signed: {publisher}'s policy", str(exc))
        path = self.ws.files(publisher).policy
        return self.html(
            policy_pages.signed_page(
                publisher,
                policy,
                str(path),
                str(signature_path(path)),
                nav=self.nav,
            )
        )

    async def who(self, request: web.Request) -> web.Response:
        grid, explained, pasted, error = {}, None, "", ""
        try:
            grid = {name: self.ws.grants(c) for name, c in self.ws.subscribers.items()}
            if request.method == "POST":
                form = await request.post()
                pasted = str(form.get("cert", ""))
                credential = credential_from_pem(pasted.encode())
                explained = (
                    f"certificate of {credential.name} (role {credential.role})",
                    self.ws.grants(credential),
                )
            elif "name" in request.match_info:
                name = request.match_info["name"]
                if name not in self.ws.subscribers:
                    raise web.HTTPNotFound(text=f"no known subscriber {name!r}")
                explained = (name, grid[name])
        except XdnError as exc:
            error = str(exc)
        return self.html(
            pages.who_page(
                grid,
                list(self.ws.publishers),
                pasted=pasted,
                explained=explained,
                error=error,
                nav=self.nav,
            ),
            400 if error else 200,
        )

    async def sites(self, request: web.Request) -> web.Response:
        tls, sites = self.config.admin_tls, self.config.sites
        answers = await asyncio.gather(*(self._ask(a, tls) for a in sites)) if tls else []
        signed = {}
        for p in self.ws.publishers:
            try:
                signed[p] = self.ws.current(p).policy.version
            except XdnError:
                continue
        return self.html(
            pages.sites_page(answers, signed, configured=bool(tls and sites), nav=self.nav)
        )

    async def _ask(self, address: str, tls: TlsFiles) -> pages.SiteAnswer:
        try:
            report = await fetch_status(
                address, tls, limit=self.config.page_size, timeout=self.config.site_timeout
            )
        except XdnError as exc:
            return pages.SiteAnswer(address=address, error=str(exc))
        return pages.SiteAnswer(address=address, report=report)

    async def subscribers(self, request: web.Request) -> web.Response:
        address, after = request.query.get("site", ""), request.query.get("after", "")
        tls = self.config.admin_tls
        if address not in self.config.sites or tls is None:  # only the sites we were given
            raise web.HTTPNotFound(text=f"no site {address!r} here")
        found, error = None, ""
        try:
            found = await fetch_subscribers(
                address,
                tls,
                after=after,
                limit=self.config.page_size,
                timeout=self.config.site_timeout,
            )
        except XdnError as exc:
            error = str(exc)
        return self.html(
            pages.subscribers_page(address, found, after=after, error=error, nav=self.nav)
        )

    def _report(self) -> Path | None:
        path = self.config.audit_report
        return None if path is None else latest_report(path)

    async def audit(self, request: web.Request) -> web.Response:
        report = self._report()
        if report is None:
            where = self.config.audit_report
            return self.fail(
                "Audit report",
                f"no audit report found at {where}"
                if where
                else "no audit report given: start the console with --audit-report",
                404,
            )
        written = datetime.fromtimestamp(report.stat().st_mtime, UTC).strftime(
            "%Y-%m-%d %H:%M:%S UTC"
        )
        return self.html(pages.audit_page(str(report), written, nav=self.nav))

    async def audit_report(self, request: web.Request) -> web.Response:
        report = self._report()
        if report is None:
            raise web.HTTPNotFound(text="no audit report")
        response = web.Response(body=report.read_bytes(), content_type="text/html", charset="utf-8")
        response.headers["Content-Security-Policy"] = _REPORT_CSP
        return response

    async def login(self, request: web.Request) -> web.Response:
        gate = self.config.gate
        session = (
            gate.login(request.query.get("token", "")) if isinstance(gate, TokenGate) else None
        )
        if session is None:
            return self.fail(
                "Not signed in",
                "this token is wrong or already used: restart `xdn console` for a new one",
                403,
            )
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE, session, httponly=True, samesite="Strict", path="/", secure=request.secure
        )
        raise response


def _middlewares(console: _Console) -> list[Callable[..., Awaitable[web.StreamResponse]]]:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        open_path = request.path == "/login" or request.path.startswith("/static/")
        refusal = None if open_path else console.config.gate.refusal(request)
        if refusal is not None:
            return console.fail("Not signed in", refusal, 401)
        if request.method == "POST" and not same_origin(request):
            return console.fail("Refused", "a request from another site", 403)
        try:
            return await handler(request)
        except XdnError as exc:  # a file the console reads went bad under it, typically
            return console.fail("Error", str(exc), 500)

    @web.middleware
    async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = exc
        response.headers.setdefault("Content-Security-Policy", _CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        if isinstance(response, web.HTTPException):
            raise response
        return response

    return [headers, guard]


def build_app(config: ConsoleConfig) -> web.Application:
    """The console as an aiohttp application (serve it with ``aiohttp.web``)."""
    console = _Console(config)
    app = web.Application(middlewares=_middlewares(console), client_max_size=MAX_BODY)
    static = importlib.resources.files("console") / "static"
    app.router.add_static("/static/", Path(str(static)))
    app.router.add_get("/", console.overview)
    app.router.add_get("/login", console.login)
    app.router.add_get("/ontology", console.ontology)
    app.router.add_get("/policies/{publisher}", console.policy)
    app.router.add_post("/policies/{publisher}", console.policy)
    app.router.add_post("/policies/{publisher}/check", console.check)
    app.router.add_post("/policies/{publisher}/diff", console.diff)
    app.router.add_post("/policies/{publisher}/sign", console.sign)
    app.router.add_get("/who", console.who)
    app.router.add_post("/who", console.who)
    app.router.add_get("/who/{name}", console.who)
    app.router.add_get("/sites", console.sites)
    app.router.add_get("/sites/subscribers", console.subscribers)
    app.router.add_get("/audit", console.audit)
    app.router.add_get("/audit/report.html", console.audit_report)
    return app
