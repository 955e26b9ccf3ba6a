"""Start one disseminator from its site configuration and run it until told to stop.

The I/O edge of the disseminator: reads the configuration's files (CA, certificate, ontology,
signed policies), opens the provenance log, binds the gRPC server with mutual TLS plus the
standard health and reflection services, serves the site's linked data and LDN inbox over
HTTPS with the same certificates when ``[site] web_listen`` is set (:mod:`disseminator.web`;
bound port in ``STATE_DIR/web_port``), writes the bound gRPC port to ``STATE_DIR/port`` (so
launchers can use port 0; written last, once the site has joined), keeps the uplink link open,
and drains on SIGTERM / SIGINT: it stops taking new work, lets connected streams acknowledge
what is queued for them (at most ``[site] drain_seconds``; a second signal cuts it short), then
stops (:mod:`disseminator.drain`).

Credential changes reach live connections without a restart: signed policies and the CA's
CRL (``[tls] crl``) are reloaded when their files change or on SIGHUP; a bad new file is
refused and the one in force stays.

Revocation (:mod:`disseminator.revocation`, docs/network.md). The CRL in force is kept in the
site's store with its number: a CRL numbered lower — on reload or at a restart — is refused
(logged, counted in ``xdn_crl_refused``) and the newest one stays in force. A stale CRL raises
the alarm (log, ``xdn_crl_stale``) and, past ``[site] crl_grace_seconds``, new registrations
and links are refused. Every site-to-site peer is checked against the CRL and its
certificate's validity at connect and again on each CRL change and housekeeping pass: a
downlink or uplink that fails is cut, and the DHT forgets and refuses its records.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc

from disseminator.admin_service import ADMIN_SERVICE_NAME, AdminService, add_admin_to_server
from disseminator.config import SiteConfig
from disseminator.dht import (
    DHT_SERVICE_NAME,
    DhtNode,
    RecordAuthenticationError,
    SiteRecord,
    add_dht_to_server,
    create_grpc_node,
    is_fallback,
)
from disseminator.discovery import describe_choice, uplink_other_than, watch_uplink
from disseminator.drain import DrainReport, drain
from disseminator.introspection import Introspection
from disseminator.limits import SERVER_OPTIONS
from disseminator.metrics import SiteMetrics, serve_metrics
from disseminator.node import SiteIdentity, SiteNode
from disseminator.notices import SiteNotices
from disseminator.receipts import SiteReceipts
from disseminator.revocation import CrlInForce
from disseminator.server import DisseminatorService, add_to_server
from disseminator.store import Store, Window
from disseminator.uplink import Uplink
from disseminator.web import WebServer, WebSite, server_context
from xdn import certs, crypto, provenance
from xdn.errors import CertificateError, ConfigError, PolicyError, XdnError
from xdn.grpc_tls import (
    CHANNEL_OPTIONS,
    TlsFiles,
    server_credentials,
)
from xdn.ontology import Ontology, load_ontology
from xdn.policy import PolicyEngine, PolicySet, load_signed_policy
from xdn.wire.v1 import dissemination_pb2

__all__ = ["crl_at_start", "load_policies", "read_crl_file", "serve"]

log = logging.getLogger(__name__)

_SERVICE_NAME = dissemination_pb2.DESCRIPTOR.services_by_name["Disseminator"].full_name


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None


def load_policies(config: SiteConfig, ontology: Ontology, ca_pem: bytes) -> PolicySet:
    """Load every publisher's policy, refusing any not signed by that publisher."""
    policies = []
    now = datetime.now(UTC)
    for entry in config.publishers:
        cert_pem = _read(entry.certificate, f"certificate of publisher {entry.name}")
        credential = certs.verify_certificate(cert_pem, ca_pem, at=now, role="publisher")
        if credential.name != entry.name:
            raise ConfigError(
                f"{entry.certificate}: certificate is for {credential.name!r}, not {entry.name!r}"
            )
        policies.append(
            load_signed_policy(
                entry.policy, ontology, certs.public_key_of(cert_pem), publisher=entry.name
            )
        )
    return PolicySet.of(ontology, policies)


def check_no_rollback(policies: PolicySet, enforced: dict[str, tuple[int, str]]) -> None:
    """Refuse a policy older than one this site already enforced (across restarts too).

    Raises:
        PolicyError: a policy's version is below the highest this site put in force, or equal
            to it with other content.
    """
    for publisher, policy in sorted(policies.policies.items()):
        if publisher not in enforced:
            continue
        version, digest = enforced[publisher]
        if policy.version < version or (policy.version == version and policy.digest != digest):
            raise PolicyError(
                f"{policy.source}: version {policy.version} of {publisher!r} would roll back "
                f"version {version}, which this site already enforced; install version "
                f"{version} or a newer one signed by {publisher!r}"
            )


def enforced_versions(policies: PolicySet) -> dict[str, tuple[int, str]]:
    return {p: (policy.version, policy.digest) for p, policy in policies.policies.items()}


def read_crl_file(config: SiteConfig, ca_pem: bytes) -> certs.Crl | None:
    """The CA-signed CRL of ``[tls] crl`` (``None`` without one); not checked for staleness.

    Raises:
        ConfigError: the CRL cannot be read, is not the CA's, or cannot be ordered.
    """
    if config.crl is None:
        return None
    crl_pem = _read(config.crl, "CRL")
    try:
        return certs.read_crl(crl_pem, ca_pem)
    except CertificateError as exc:
        raise ConfigError(f"{config.crl}: {exc}") from None


def crl_at_start(
    config: SiteConfig, ca_pem: bytes, store: Store, metrics: SiteMetrics, *, at: datetime
) -> CrlInForce:
    """The CRL to enforce at start: the file's, unless the store holds a newer one.

    A CRL file numbered below the CRL this site last enforced is refused (logged, counted):
    the stored one stays in force, so a restart cannot roll revocation back.

    Raises:
        ConfigError: the file cannot be read or is not the CA's; or there is no file to
            offer and the stored CRL no longer verifies under the CA.
    """
    held = CrlInForce(grace=timedelta(seconds=config.crl_grace_seconds))
    saved = store.saved_crl()
    if saved is not None:
        try:
            held.offer(certs.read_crl(saved[1], ca_pem), at=at)
        except CertificateError as exc:
            raise ConfigError(
                f"the CRL this site enforced before (number {saved[0]}) does not verify under "
                f"the CA: {exc}"
            ) from None
    offered = read_crl_file(config, ca_pem)
    if offered is not None:
        try:
            held.offer(offered, at=at)
        except CertificateError as exc:
            metrics.crl_refused.labels(reason=type(exc).__name__).inc()
            log.error("%s refused, the CRL enforced before stays in force: %s", config.crl, exc)
    if held.crl is not None:
        store.save_crl(held.crl.number, held.crl.pem)
    return held


def _write_port(state_dir: Path, port: int, *, name: str = "port") -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f"{name}.tmp"
    tmp.write_text(f"{port}\n")
    os.replace(tmp, state_dir / name)


async def serve(config: SiteConfig) -> DrainReport:
    """Run the daemon until SIGTERM or SIGINT; return what the shutdown drained."""
    tls = TlsFiles(
        cert_pem=_read(config.cert, "site certificate"),
        key_pem=_read(config.key, "site key"),
        ca_pem=_read(config.ca, "CA certificate"),
    )
    identity = certs.verify_certificate(tls.cert_pem, tls.ca_pem, at=datetime.now(UTC), role="site")
    if identity.name != config.name:
        raise ConfigError(
            f"{config.cert}: certificate is for {identity.name!r}, not {config.name!r}"
        )
    if identity.block != config.block:
        raise ConfigError(
            f"{config.cert}: the certificate authorises block {identity.block!r}, but site.block "
            f"is {config.block!r}; fix the config or reissue the certificate with "
            f"`xdn certs issue --role site --block {config.block}`"
        )
    ontology = load_ontology(config.ontology_files)
    if config.block not in ontology.concepts:
        raise ConfigError(f"site.block {config.block!r} is not a concept of the ontology")
    policies = load_policies(config, ontology, tls.ca_pem)
    signer = provenance.Signer(
        node_uri=certs.node_uri(config.name),
        private_key=crypto.load_private_key_pem(tls.key_pem),
        certificate=tls.cert_pem,
    )
    config.provenance_log.parent.mkdir(parents=True, exist_ok=True)
    log_sink = provenance.ProvenanceLog(
        config.provenance_log, node_uri=signer.node_uri, cert_pem=tls.cert_pem
    )
    store = Store(
        config.state_dir / "site.sqlite",
        retain=config.retain_documents,
        durable=config.durability == "full",
        routed_window=Window(
            retention_days=config.routed_retention_days,
            per_publisher=config.routed_per_publisher,
        ),
        # the web endpoint serves the messages this site mints: keep them (disseminator.messages)
        messages_of=signer.node_uri if config.web.listen is not None else None,
    )
    check_no_rollback(policies, store.enforced_policies())
    store.record_policies(enforced_versions(policies))
    metrics = SiteMetrics(config.name)
    uplinks: list[Uplink] = []

    def interest_changed() -> None:
        for uplink in uplinks:
            uplink.interest_changed()

    node = SiteNode(
        site=SiteIdentity(
            name=config.name, block=config.block, uplink=config.uplink, tls=tls, signer=signer,
            lease_s=config.lease_seconds,
        ),
        ontology=ontology,
        engine=PolicyEngine(policies, disseminated=store.disseminated()),
        store=store,
        log_sink=log_sink,
        clock=lambda: datetime.now(UTC),
        on_interest_change=interest_changed,
        metrics=metrics,
        state_dir=config.state_dir,
        min_free_bytes=config.limits.min_free_bytes,
    )
    crl = crl_at_start(config, tls.ca_pem, store, metrics, at=node.now())
    if identity.serial in crl.revoked:
        raise ConfigError(f"{config.cert}: this site's own certificate is revoked by the CRL")
    node.set_revoked(crl.revoked)
    if crl.crl is not None:  # subscribers get the CRL in force when they connect
        node.relay_crl(crl.crl.pem, queue=False)
    receipts = SiteReceipts(node, config.limits, inbox=config.web.listen is not None)
    notices = SiteNotices(
        node, config.limits, wake=receipts.queued, inbox=config.web.listen is not None
    )
    service = DisseminatorService(
        node, heartbeat_s=config.heartbeat_seconds, limits=config.limits,
        crl_refusal=lambda: crl.refusal(node.now()), receipts=receipts, notices=notices,
    )
    server = grpc.aio.server(
        options=(*CHANNEL_OPTIONS, *SERVER_OPTIONS)
    )
    add_to_server(service, server)
    introspection = Introspection(server, (_SERVICE_NAME, DHT_SERVICE_NAME, ADMIN_SERVICE_NAME))
    port = server.add_secure_port(config.listen, server_credentials(tls))
    if port == 0:
        raise ConfigError(f"cannot listen on {config.listen}")
    dht = create_grpc_node(
        tls=tls,
        address=config.dht.advertise or f"{config.listen.rpartition(':')[0]}:{port}",
        ontology=ontology,
        config=config.dht,
        revoked=lambda: node.revoked,
        archive=store.dht_records,
    )
    dht.restore()  # what it stored before a restart, verified again: never serve from nothing
    add_dht_to_server(server, dht)
    add_admin_to_server(server, AdminService(
        node, uplink_connected=lambda: any(u.connected.is_set() for u in uplinks), dht=dht,
    ))
    await server.start()
    await introspection.serving()
    if config.metrics_listen:
        metrics_port = serve_metrics(metrics, config.metrics_listen)
        _write_port(config.state_dir, metrics_port, name="metrics_port")
        log.info("metrics on http://%s:%d/metrics", config.listen.rpartition(":")[0], metrics_port)
    web = await _start_web(config, tls, node, receipts, notices, dht)  # before the port file
    if web is not None:  # announced in our DHT record, so a node URI resolves to it
        dht.web = config.web.advertised(web.port)
    log.info("site %s serving block %s on port %d", config.name, config.block, port)

    stop, hurry = asyncio.Event(), asyncio.Event()  # hurry: a second signal skips the drain
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: (hurry if stop.is_set() else stop).set())
    watcher = _PolicyWatcher(config, node, tls.ca_pem)

    def check_peers() -> None:  # site-to-site trust: CRL and validity, now
        service.cut_untrusted_links()
        for uplink in uplinks:
            uplink.check_peer()
        dht.purge_untrusted()

    crl_watcher = _CrlWatcher(config, node, tls.ca_pem, crl, on_change=check_peers)

    def on_sighup() -> None:
        watcher.reload()
        crl_watcher.reload()

    loop.add_signal_handler(signal.SIGHUP, on_sighup)
    tasks = [
        asyncio.ensure_future(
            _housekeeping(node, (watcher.check, crl_watcher.check, check_peers),
                          config.housekeeping_seconds)
        ),
        asyncio.ensure_future(crl_watcher.watch(min(1.0, config.housekeeping_seconds))),
        asyncio.ensure_future(
            _discovery(
                config, node, dht, uplinks, lambda: _write_port(config.state_dir, port),
                receipts=receipts,
            )
        ),
    ]
    try:
        await stop.wait()
        log.warning(
            "site %s stopping: no new work; draining for at most %.1fs",
            config.name, config.drain_seconds,
        )
        for task in tasks:  # the uplink too: nothing new is routed from here on
            task.cancel()
        service.stop_taking_work()
        await introspection.enter_graceful_shutdown()
        report = await drain(node, timeout=config.drain_seconds, interrupted=hurry)
        (log.warning if report.left else log.info)("site %s %s", config.name, report.describe())
    finally:
        for task in tasks:
            task.cancel()
        await dht.stop(leave=True)
        await introspection.enter_graceful_shutdown()
        await server.stop(grace=0.5)
        if web is not None:
            await web.stop()
        await node.settle_acks()
        node.flush_log()
        store.close()
        log_sink.close()
    return report


async def _start_web(
    config: SiteConfig, tls: TlsFiles, node: SiteNode, receipts: SiteReceipts,
    notices: SiteNotices, dht: DhtNode,
) -> WebServer | None:
    """Serve the site's linked data and LDN inbox on ``[site] web_listen`` (if set), with the
    gRPC port's certificate and CA (receipts posted to the inbox go to ``receipts``, failure
    notices to ``notices``, ``GET /nodes/NAME`` asks ``dht``); write the bound port to
    ``STATE_DIR/web_port``."""
    if config.web.listen is None:
        return None
    site = WebSite(
        node_uri=node.site.signer.node_uri, cert_pem=tls.cert_pem,
        notifications=node.store.notifications, messages=node.store.messages,
        log_path=config.provenance_log, config=config.web, clock=node.now,
        revoked=lambda: node.revoked, new_id=lambda: uuid.uuid4().hex, receipts=receipts,
        notices=notices, refusals=node.metrics.web, nodes=dht,
    )
    try:
        context = server_context(cert=config.cert, key=config.key, ca_pem=tls.ca_pem)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigError(f"cannot load the TLS material for the web endpoint: {exc}") from None
    web = WebServer(site, context)
    try:
        port = await web.start()
    except OSError as exc:
        await web.stop()
        raise ConfigError(f"cannot listen on {config.web.listen}: {exc.strerror}") from None
    _write_port(config.state_dir, port, name="web_port")
    base = f"https://{config.web.host}:{port}/"
    print(f"site {config.name}: linked data at {base} (inbox {base}inbox/)", flush=True)
    return web


async def _discovery(
    config: SiteConfig,
    node: SiteNode,
    dht: DhtNode,
    uplinks: list[Uplink],
    on_joined: Callable[[], None],
    *,
    receipts: SiteReceipts | None = None,
) -> None:
    """Join the DHT, announce our block, find our uplink (unless configured), link to it.

    ``on_joined`` runs once the site is announced (the launcher's readiness signal).
    """
    delay = 0.2
    while True:
        try:
            await dht.bootstrap()  # (and the sites of the records restored)
            await dht.announce(config.block)
            on_joined()
            break
        except XdnError as exc:
            log.warning("DHT join failed: %s; retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
    dht.start()

    async def identify(address: str) -> certs.Credential:
        try:
            return await dht.identify(address)
        except RecordAuthenticationError as exc:
            raise CertificateError(str(exc)) from None

    chosen: SiteRecord | None = None  # (a better uplink the re-check found)
    leaving: _Leaving | None = None  # the uplink we move from, handing us over
    handed_by: str | None = None  # the uplink that handed us over (not taken again at once)
    while True:  # until cancelled: a refused uplink is replaced, a fallback re-checked
        if chosen is None:
            found = await _find_uplink(config, node, dht)
            if found is None:
                return  # a root site
            address, chosen = found
            if chosen is not None and chosen.site == handed_by:
                chosen = await uplink_other_than(dht, config.block, handed_by)
                address = chosen.address
        else:
            address = chosen.address
        node.uplink_address = address
        hold = None if leaving is None else asyncio.Event()
        print(f"site {config.name}: uplink at {address}", flush=True)  # found, or configured
        uplink = Uplink(
            node, address, heartbeat_s=config.heartbeat_seconds, identify=identify,
            limits=config.limits, receipts=receipts, hold=hold,
        )
        uplinks[:] = [uplink] if leaving is None else [uplink, leaving[0]]
        handing = None
        if leaving is not None and hold is not None:
            handing = asyncio.ensure_future(
                _hand_over(leaving, hold, uplinks, max(10.0, 3 * config.heartbeat_seconds))
            )
        leaving = None
        try:
            if chosen is None:  # configured: kept whatever the DHT says
                await uplink.run()
            else:
                (log.warning if is_fallback(config.block, chosen.block, node.ontology)
                 else log.info)("%s", describe_choice(config.block, chosen, dht))
                chosen, leaving = await _linked(uplink, config.block, dht)
        finally:
            if handing is not None:
                handing.cancel()
        handed_by = None
        if chosen is None and (uplink.refused or "").startswith("handed over"):
            handed_by = uplink.peer.name if uplink.peer is not None else None
        if chosen is None:
            await asyncio.sleep(1.0)  # the uplink was refused: look for another one


_Leaving = tuple[Uplink, "asyncio.Task[None]"]  # an uplink we move from, and its run()


async def _linked(
    uplink: Uplink, block: str, dht: DhtNode
) -> tuple[SiteRecord, _Leaving] | tuple[None, None]:
    """Run the link while re-checking the choice. Return the uplink to move to, with this one
    (still running: it hands us over), or ``(None, None)`` once this one was refused."""
    run = asyncio.ensure_future(uplink.run())
    watch = asyncio.ensure_future(watch_uplink(dht, block, uplink))
    try:
        await asyncio.wait((run, watch), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        run.cancel()
        raise
    finally:
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    if not run.done() and not watch.cancelled() and watch.exception() is None:
        better = watch.result()
        log.warning(
            "leaving uplink %s for %s at %s (block %s): nearer, or the one in use is gone",
            uplink.peer.name if uplink.peer is not None else uplink.address,
            better.site, better.address, better.block,
        )
        return better, (uplink, run)
    if not run.done():
        run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    if not run.cancelled() and (error := run.exception()) is not None:
        raise error
    return None, None


async def _hand_over(
    leaving: _Leaving, hold: asyncio.Event, uplinks: list[Uplink], timeout: float
) -> None:
    """Let the uplink we leave send what it still holds for us, until it ends the link
    (handed over: everything acknowledged) or ``timeout``; then the new link reads."""
    old, run = leaving
    try:
        if old.connected.is_set():
            await asyncio.wait((run,), timeout=timeout)
            if old.refused is not None and old.refused.startswith("handed over"):
                log.info("uplink %s handed us over: nothing left queued there", old.address)
            else:
                log.warning(
                    "uplink %s did not hand us over within %.0fs: what it still holds for us "
                    "stays queued there (until we link to it again or its lease runs out)",
                    old.address, timeout,
                )
    finally:
        run.cancel()
        hold.set()
        if old in uplinks:
            uplinks.remove(old)
        await asyncio.gather(run, return_exceptions=True)


async def _find_uplink(
    config: SiteConfig, node: SiteNode, dht: DhtNode
) -> tuple[str, SiteRecord | None] | None:
    """The configured uplink (no record), else the one the DHT names (``None``: a root)."""
    if config.uplink is not None:
        return config.uplink, None
    if not node.ontology.parents(config.block):
        return None
    delay = 0.2
    while True:
        record = await dht.find_uplink(config.block)
        if record is not None:
            return record.address, record
        await asyncio.sleep(delay)
        delay = min(delay * 2, 5.0)


async def _housekeeping(
    node: SiteNode, checks: tuple[Callable[[], object], ...], every: float
) -> None:
    while True:
        await asyncio.sleep(every)
        for check in checks:
            check()
        node.housekeeping()


class _PolicyWatcher:
    """Reload signed policies when their files change (or on SIGHUP), all or nothing."""

    def __init__(self, config: SiteConfig, node: SiteNode, ca_pem: bytes) -> None:
        self._config, self._node, self._ca_pem = config, node, ca_pem
        self._stamp = self._stamps()

    def _stamps(self) -> tuple[float, ...]:
        stamps = []
        for entry in self._config.publishers:
            for path in (entry.policy, entry.policy.with_name(entry.policy.name + ".sig")):
                try:
                    stamps.append(path.stat().st_mtime)
                except OSError:
                    stamps.append(-1.0)
        return tuple(stamps)

    def check(self) -> None:
        if self._stamps() != self._stamp:
            self.reload()

    def reload(self) -> None:
        self._stamp = self._stamps()
        try:
            policies = load_policies(self._config, self._node.ontology, self._ca_pem)
            check_no_rollback(policies, self._node.store.enforced_policies())
            done = self._node.reload_policies(policies)
            self._node.store.record_policies(enforced_versions(policies))
        except XdnError as exc:
            log.error("policy reload refused, previous policies stay in force: %s", exc)
            return
        log.info("policies reloaded (%d subscriptions changed)", len(done))
        print(  # a normal event: said on stdout like the start-up lines, never as a warning
            f"site {self._config.name}: policies reloaded ({len(done)} subscriptions changed)",
            flush=True,
        )


class _CrlWatcher:
    """Reload the CRL when its file changes (or on SIGHUP); raise the alarm when it is stale.

    A bad or older CRL is refused (logged, counted) and the one in force stays.
    """

    def __init__(
        self,
        config: SiteConfig,
        node: SiteNode,
        ca_pem: bytes,
        held: CrlInForce,
        *,
        on_change: Callable[[], None],
    ) -> None:
        self._config, self._node, self._ca_pem = config, node, ca_pem
        self._held, self._on_change = held, on_change
        self._stamp = self._stamps()
        self._alarmed: tuple[certs.CrlFreshness, int] | None = None
        self._gauges: dict[str, float] = {}
        self.check()
        node.metrics.watch(lambda: dict(self._gauges))

    def _stamps(self) -> tuple[int, int, int]:
        if self._config.crl is None:
            return (0, 0, 0)
        try:
            st = self._config.crl.stat()
        except OSError:
            return (-1, -1, -1)
        return (st.st_mtime_ns, st.st_ino, st.st_size)

    async def watch(self, every: float) -> None:
        """Poll the CRL file's stamp every ``every`` seconds (cheap: one stat)."""
        while self._config.crl is not None:
            await asyncio.sleep(every)
            if self._stamps() != self._stamp:
                self.reload()

    def reload(self) -> None:
        if self._config.crl is None:
            return
        self._stamp = self._stamps()
        try:
            offered = read_crl_file(self._config, self._ca_pem)
            if offered is None or not self._held.offer(offered, at=self._node.now()):
                return
        except XdnError as exc:
            self._node.metrics.crl_refused.labels(reason=type(exc).__name__).inc()
            log.error("CRL reload refused, the previous CRL stays in force: %s", exc)
            return
        self._node.store.save_crl(offered.number, offered.pem)
        done = self._node.set_revoked(self._held.revoked)
        self._node.relay_crl(offered.pem, queue=True)
        self._on_change()
        log.warning(
            "CRL reloaded: CRL number %d, %d certificates revoked (%d changes)",
            offered.number, len(offered.serials), len(done),
        )
        self.check()

    def check(self) -> None:
        """Raise the alarm when the CRL in force is stale (on a change, then every 10 min)."""
        now = self._node.now()
        freshness = self._held.freshness(now)
        crl = self._held.crl
        self._gauges = {
            "crl_number": float(crl.number) if crl is not None else -1.0,
            "crl_stale": float(freshness is not certs.CrlFreshness.FRESH),
            "crl_refusing_new": float(freshness is certs.CrlFreshness.EXPIRED),
        }
        alarm = self._held.alarm(now)
        if alarm is None:
            self._alarmed = None
            return
        minute = int(now.timestamp()) // 600
        if self._alarmed is None or self._alarmed[0] is not freshness or self._alarmed[1] != minute:
            self._alarmed = (freshness, minute)
            log.error("ALARM: %s", alarm)
