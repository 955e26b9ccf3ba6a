"""Fault classes beyond broken signatures and links: DataFrame → DataFrame checks.

Theory of operation
-------------------
Every check here is native Spark SQL over tables the audit builds anyway (the graphs, the
chains of :func:`audit.transforms.check_chains`, the certificates of
:func:`audit.trust.judge_certificates`); none runs Python per row, none collects to the driver.
Each returns findings ``(graph, node, reason, class)`` for the failures table.

* :func:`repeated_lines` (``duplicate``) — a graph whose lines were read more often than its
  distinct lines times the logs it is in: a hop's lines appended twice to a log. A graph may
  be in several logs (a receipt is logged by the subscriber and by every site it passes) but
  in each at most once. Node descriptions are exempt: each rotated log starts with one.
* :func:`resent` (``duplicate``) — one node wrapping the same envelope twice for the same
  recipient (a delivery re-sent and re-signed under a new message URI), or a subscriber
  signing two receipts for one delivery; every copy after the first (by time, then name).
* :func:`receipts` (``receipt``) — a delivery to a subscriber (a node whose certificate has
  the subscriber role) that no receipt wraps: the receipt hop was deleted, or never signed
  (a subscriber that refused the version in a signed failure notice owes none).
  The other half, a receipt whose delivery is in no log, is a broken link, reported by
  :func:`audit.transforms.failures` under the same class.
* :func:`revoked_deliveries` (``revocation``) — a delivery to a subscriber at a time when
  none of its subscriber certificates was in force and one had been revoked.
* :func:`time_order` (``time-order``) — an envelope stamped earlier than the envelope it
  wraps by more than the clock-skew tolerance (``--clock-skew``, default
  :data:`CLOCK_SKEW_MS`): the nodes' clocks differ a little, a hop never goes back in time.
* :func:`entitlement` (``entitlement``) — a delivery to a subscriber after its publisher's
  signed policy stopped granting it anything: the publisher's policy-change notices
  (:func:`xdn.provenance.policy_notice`, in the publisher's log) say when each policy version
  took effect for each subscriber; a relay to it of that publisher's document when the newest
  notice before it says ``losesEverything`` and is older than :data:`POLICY_GRACE_MS`.
  Only notices whose signature verifies under a ``publisher`` certificate of that publisher
  count. (Which *concepts* a delivery carries is not in the chain — it names manifest leaves —
  so a grant narrowed to fewer concepts cannot be checked here.)
* :func:`roles` (``role``) — a hop signed under a certificate of the wrong role (a
  publication needs a ``publisher`` certificate, a relay a ``site`` one, a receipt a
  ``subscriber`` one: a subscriber relaying is found here), and a publication whose content
  graph names another publisher than the holder of the certificate that signed it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

__all__ = [
    "CLOCK_SKEW_MS",
    "EXPECTED_ROLE",
    "POLICY_GRACE_MS",
    "entitlement",
    "policy_changes",
    "receipts",
    "repeated_lines",
    "resent",
    "revoked_deliveries",
    "roles",
    "time_order",
]

#: Default tolerance for clocks that disagree (ms): a hop may be stamped this much before the
#: hop it wraps. Sites keep their clocks by NTP (milliseconds apart); two seconds absorbs a
#: poorly synchronised host without hiding a reordered or back-dated hop.
CLOCK_SKEW_MS = 2_000

#: How long after a policy change sites may still deliver under the previous version (ms):
#: sites load a newly signed policy when its file changes, within seconds; a minute covers a
#: slow reload without hiding deliveries made under a policy long replaced.
POLICY_GRACE_MS = 60_000

#: The certificate role each kind of hop must be signed under.
EXPECTED_ROLE = {"publication": "publisher", "relay": "site", "receipt": "subscriber"}


def _text(*parts: str | Column) -> Column:
    return F.concat(*(F.lit(p) if isinstance(p, str) else p for p in parts))


def _finding(graph: Column, node: Column, reason: Column, kind: str) -> list[Column]:
    return [graph.alias("graph"), node.alias("node"), reason.alias("reason"),
            F.lit(kind).alias("class")]


def repeated_lines(graphs: DataFrame) -> DataFrame:
    """Graphs some of whose lines a log holds twice (see the module docstring).

    Args:
        graphs: :func:`audit.transforms.collect_graphs` (``lines``, ``sources``, ``copies``).
    """
    expected = F.size("lines") * F.size("sources")
    extra = F.col("copies") - expected
    return graphs.where(~F.col("graph").endswith("#cert") & (extra > 0)).select(
        *_finding(
            F.col("graph"),
            F.array_join("sources", ", "),
            _text(extra.cast("string"), " line(s) of the graph logged more than once"),
            "duplicate",
        )
    )


def resent(chains: DataFrame) -> DataFrame:
    """Relays and receipts that repeat one already made (see the module docstring)."""
    hops = chains.where(F.col("kind").isin("relay", "receipt") & F.col("parent").isNotNull())
    same = Window.partitionBy("parent", "node", "kind", F.coalesce("recipient", F.lit("")))
    ordered = same.orderBy("timestamp_ms", "envelope")
    numbered = hops.select(
        "envelope",
        "node",
        "kind",
        "parent",
        "recipient",
        F.row_number().over(ordered).alias("n"),
        F.first("envelope").over(ordered).alias("first"),
    )
    return numbered.where(F.col("n") > 1).select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                F.col("kind"), " repeated: <", F.col("parent"), "> was already wrapped for <",
                F.coalesce("recipient", F.lit("?")), "> by <", F.col("first"), ">",
            ),
            "duplicate",
        )
    )


def _subscribers(nodes: DataFrame) -> DataFrame:
    """Nodes holding a subscriber certificate the CA issued them → ``(recipient, certs)``."""
    facts = F.struct("serial", "not_before_ms", "not_after_ms", "revoked_ms")
    return (
        nodes.where(F.col("problem").isNull() & (F.col("role") == "subscriber"))
        .groupBy(F.col("node").alias("recipient"))
        .agg(F.collect_list(facts).alias("certs"))
    )


def _deliveries(chains: DataFrame, nodes: DataFrame) -> DataFrame:
    relays = chains.where(F.col("kind") == "relay")
    return relays.join(F.broadcast(_subscribers(nodes)), "recipient")


def receipts(
    chains: DataFrame, nodes: DataFrame, refused: DataFrame | None = None
) -> DataFrame:
    """Deliveries to subscribers that no receipt wraps (see the module docstring).

    Args:
        chains: :func:`audit.transforms.check_chains`.
        nodes: :func:`audit.trust.judge_certificates`.
        refused: ``(envelope)`` of deliveries the subscriber refused in a signed failure
            notice instead (:func:`audit.entitlements.refused_deliveries`): no receipt is due.
    """
    receipted = chains.where(F.col("kind") == "receipt").select(
        F.col("parent").alias("envelope")
    )
    if refused is not None:
        receipted = receipted.union(refused.select("envelope"))
    missing = _deliveries(chains, nodes).join(receipted, "envelope", "left_anti")
    return missing.select(
        *_finding(
            F.col("envelope"),
            F.col("recipient"),
            _text("delivery to <", F.col("recipient"), "> has no receipt"),
            "receipt",
        )
    )


def revoked_deliveries(chains: DataFrame, nodes: DataFrame) -> DataFrame:
    """Deliveries made after the subscriber's certificate was revoked (see the module
    docstring)."""
    at = F.col("timestamp_ms")

    def valid(c: Column) -> Column:
        return (c["not_before_ms"] <= at) & (at <= c["not_after_ms"])

    def in_force(c: Column) -> Column:
        return valid(c) & (c["revoked_ms"].isNull() | (at < c["revoked_ms"]))

    revoked = F.filter("certs", lambda c: valid(c) & (c["revoked_ms"] <= at))
    first = F.try_element_at(revoked, F.lit(1))
    found = _deliveries(chains, nodes).where(
        ~F.exists("certs", in_force) & (F.size(revoked) > 0)
    )
    return found.select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                "delivered to <", F.col("recipient"), "> at ",
                F.date_format(F.timestamp_millis(at), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
                ", after its certificate ", first["serial"], " was revoked at ",
                F.date_format(
                    F.timestamp_millis(first["revoked_ms"]), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
                ),
            ),
            "revocation",
        )
    )


def time_order(chains: DataFrame, skew_ms: int = CLOCK_SKEW_MS) -> DataFrame:
    """Hops stamped before the hop they wrap, beyond ``skew_ms`` (see the module docstring)."""
    back = F.col("parent_ms") - F.col("timestamp_ms")
    return chains.where(F.col("parent_ms").isNotNull() & (back > skew_ms)).select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                "stamped ", back.cast("string"), " ms before the envelope it wraps (<",
                F.col("parent"), ">; clock-skew tolerance ", str(skew_ms), " ms)",
            ),
            "time-order",
        )
    )


def roles(chains: DataFrame) -> DataFrame:
    """Hops signed under the wrong role, and publishers naming another publisher (see the
    module docstring)."""
    expected = F.create_map(*(F.lit(x) for pair in EXPECTED_ROLE.items() for x in pair))
    needed = expected[F.col("kind")]
    wrong_role = chains.where(
        F.col("role").isNotNull() & needed.isNotNull() & (F.col("role") != needed)
    ).select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                "a ", F.col("kind"), " signed under a ", F.col("role"),
                " certificate (it needs a ", needed, " certificate)",
            ),
            "role",
        )
    )
    other = chains.where(
        F.col("named_publisher").isNotNull()
        & F.col("content_signer").isNotNull()
        & (F.col("named_publisher") != F.col("content_signer"))
    ).select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                "its content graph names publisher '", F.col("named_publisher"),
                "' but is signed by '", F.col("content_signer"), "'",
            ),
            "role",
        )
    )
    return wrong_role.union(other)


def policy_changes(described: DataFrame, results: DataFrame) -> DataFrame:
    """Policy-change notices signed by the publisher they name → ``(subscriber, publisher,
    version, changed_at_ms, everything)``."""
    notices = described.where((F.col("kind") == "policy") & F.col("error").isNull()).select(
        F.col("graph").alias("signed_graph"), "policy_change.*"
    )
    trusted = results.where(F.col("verified") & (F.col("role") == "publisher")).select(
        "signed_graph", "holder"
    )
    return (
        notices.join(trusted, "signed_graph")
        .where(F.col("holder") == F.col("publisher"))
        .select("subscriber", "publisher", "version", "changed_at_ms", "everything")
    )


def entitlement(
    chains: DataFrame,
    described: DataFrame,
    results: DataFrame,
    grace_ms: int = POLICY_GRACE_MS,
) -> DataFrame:
    """Deliveries to a subscriber its publisher's policy granted nothing then (see the module
    docstring).

    Args:
        chains: :func:`audit.transforms.check_chains`.
        described: :func:`audit.transforms.describe_graphs`.
        results: :func:`audit.trust.in_time` (``verified``, ``role``, ``holder``).
        grace_ms: how long after a change deliveries under the previous version are fine.
    """
    changes = policy_changes(described, results)
    publishers = (
        chains.where(F.col("kind") == "publication")
        .select("document_id", F.col("named_publisher").alias("publisher"))
        .distinct()
    )
    deliveries = (
        chains.where(F.col("kind") == "relay")
        .join(publishers, "document_id")
        .select("envelope", "node", "recipient", "timestamp_ms", "publisher")
    )
    known = deliveries.join(
        F.broadcast(changes.withColumnRenamed("publisher", "p")),
        (F.col("recipient") == F.col("subscriber"))
        & (F.col("publisher") == F.col("p"))
        & (F.col("changed_at_ms") <= F.col("timestamp_ms")),
    )
    newest = known.groupBy("envelope", "node", "recipient", "publisher", "timestamp_ms").agg(
        F.max_by(F.struct("everything", "version", "changed_at_ms"), "changed_at_ms").alias("c")
    )  # the version in force when it was delivered
    late = F.col("c.changed_at_ms") + grace_ms < F.col("timestamp_ms")
    return newest.where(F.col("c.everything") & late).select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                "delivered to <", F.col("recipient"), "> after version ",
                F.col("c.version").cast("string"), " of ", F.col("publisher"),
                "'s policy granted it nothing (from ",
                F.date_format(
                    F.timestamp_millis("c.changed_at_ms"), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
                ),
                ")",
            ),
            "entitlement",
        )
    )
