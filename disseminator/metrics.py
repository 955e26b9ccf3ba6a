"""Prometheus metrics of one disseminator, served over HTTP on ``[site] metrics_listen``.

Each site process has its own :class:`prometheus_client.CollectorRegistry` (no global state),
so tests can run several sites in one process. Gauges that describe current state (queue
depths, registrations) are computed at scrape time from the node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["SiteMetrics", "WebRefusals", "serve_metrics"]


class SiteMetrics:
    """Counters the node increments, plus gauges read from it at scrape time."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.registry = CollectorRegistry(auto_describe=True)
        self.routed = Counter(
            "xdn_documents_routed", "Documents routed on by this site", registry=self.registry
        )
        self.fragments = Counter(
            "xdn_fragments_forwarded", "Fragments queued for destinations", registry=self.registry
        )
        self.deliveries_sent = Counter(
            "xdn_deliveries_sent", "Deliveries written to streams", ["kind"],
            registry=self.registry,
        )
        self.parts_sent = Counter(
            "xdn_delivery_parts_sent",
            "Messages carrying a part of a delivery too large for one (see [limits] part_bytes)",
            ["kind"], registry=self.registry,
        )
        self.acks = Counter(
            "xdn_acks", "Acknowledgements received", ["kind"], registry=self.registry
        )
        self.queue_full = Counter(
            "xdn_queue_full", "Deliveries refused because a queue was full",
            registry=self.registry,
        )
        self.storage_full = Counter(
            "xdn_storage_full",
            "Work refused because the state directory is full (below [limits] min_free_bytes, "
            "or a write failed with SQLITE_FULL / ENOSPC), by operation",
            ["operation"], registry=self.registry,
        )
        self.refused_peers = Counter(
            "xdn_refused_calls", "Calls refused (bad certificate, malformed or unauthorised)",
            ["reason"], registry=self.registry,
        )
        self.refused_documents = Counter(
            "xdn_documents_refused",
            "Documents refused before routing: provenance that does not verify (provenance), "
            "or fragments that do not match their document (document)",
            ["kind"], registry=self.registry,
        )
        self.receipts = Counter(
            "xdn_receipts",
            "Delivery receipts accepted, by where they came from (subscriber, downlink): "
            "verified, logged and queued upstream or kept for the publisher",
            ["source"], registry=self.registry,
        )
        self.refused_receipts = Counter(
            "xdn_receipts_refused",
            "Delivery receipts refused, by where they came from and why (the error type)",
            ["source", "reason"], registry=self.registry,
        )
        self.notices = Counter(
            "xdn_notices",
            "Subscribers' failure notices accepted, by where they came from (subscriber, "
            "downlink): verified, logged, listed in the inbox and queued upstream",
            ["source"], registry=self.registry,
        )
        self.refused_notices = Counter(
            "xdn_notices_refused",
            "Subscribers' failure notices refused, by where they came from and why (the error "
            "type)",
            ["source", "reason"], registry=self.registry,
        )
        self.refused_policy_notices = Counter(
            "xdn_policy_notices_refused",
            "Publishers' policy-change notices refused (dropped; their entitlements delivered "
            "without them), by why (the error type)",
            ["reason"], registry=self.registry,
        )
        self.crl_refused = Counter(
            "xdn_crl_refused",
            "CRLs refused (older than the one in force, not the CA's, malformed)",
            ["reason"], registry=self.registry,
        )
        self.members_verified = Counter(
            "xdn_link_members_verified",
            "Members behind downlinks whose certificate, lease and grants this site checked "
            "(the members an interest update lists; all of them on a policy or CRL change)",
            registry=self.registry,
        )
        self.interest_updates = Counter(
            "xdn_interest_updates",
            "Interest updates of downlinks put in force, by kind: the whole set or a delta",
            ["kind"], registry=self.registry,
        )
        self.publish_parts = Counter(
            "xdn_publish_parts",
            "Parts received of publish requests sent in parts (PublishParts), counted once the "
            "request they make is joined",
            registry=self.registry,
        )
        self.dead_peers = Counter(
            "xdn_dead_peers", "Streams ended because the peer went silent (no heartbeat)",
            ["kind"], registry=self.registry,
        )

        self.web = WebRefusals(self.registry)

    def watch(self, state: Callable[[], dict[str, float]]) -> None:
        """Expose ``state()`` (gauge name → value) at every scrape."""
        self.registry.register(_StateCollector(state))


class WebRefusals:
    """What the HTTPS endpoint's limits refuse (it counts them through
    :class:`disseminator.web.Refusals`, which this implements)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.connections_refused = Counter(
            "xdn_web_connections_refused",
            "Connections to the HTTPS endpoint closed at accept, before their TLS handshake, by "
            "the cap they were over: total ([web] connections) or per_address "
            "([web] connections_per_address)",
            ["reason"], registry=registry,
        )
        self.requests_refused = Counter(
            "xdn_web_requests_refused",
            "Requests to the HTTPS endpoint refused by a limit, by status (429, 408, 413, 507) "
            "and the [web] key that refused them (client_requests_per_second, posts_in_flight, "
            "request_seconds, notification_bytes, inbox_notifications)",
            ["status", "limit"], registry=registry,
        )

    def connection(self, reason: str) -> None:
        """A connection closed at accept, over the cap ``reason``."""
        self.connections_refused.labels(reason=reason).inc()

    def request(self, status: int, limit: str) -> None:
        """A request refused with ``status`` by ``limit``."""
        self.requests_refused.labels(status=str(status), limit=limit).inc()


class _StateCollector(Collector):
    def __init__(self, state: Callable[[], dict[str, float]]) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, value in sorted(self._state().items()):
            yield GaugeMetricFamily(f"xdn_{name}", name.replace("_", " "), value=value)


def serve_metrics(metrics: SiteMetrics, listen: str) -> int:
    """Serve ``/metrics`` on ``HOST:PORT`` (port 0 picks one); return the bound port."""
    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host, registry=metrics.registry)
    return int(server.server_port)
