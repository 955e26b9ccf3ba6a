"""Audit transforms: pure DataFrame → DataFrame functions over provenance log lines.

Theory of operation
-------------------
Every node's log holds its certificate (a node description) and the graphs it added to each
message. Nothing in a log is trusted: the pipeline rebuilds the envelope chains from all logs
together and checks each link.

1. :func:`parse_lines` — each line → canonical N-Quads line + graph name (or an error).
2. :func:`collect_graphs` — lines grouped by graph name (sorted, de-duplicated: the graph's
   canonical form), with the log files it came from.
3. :func:`describe_graphs` — each graph classified and read strictly (signature, envelope,
   content, node description); :func:`signatures`, :func:`envelopes`, :func:`contents`,
   :func:`node_certificates` and :func:`graph_failures` select from that.
4. :func:`verify_nodes` — each node certificate checked against the CA (role-agnostic).
5. :func:`verify_signatures` — every signature graph against the canonical form of the graph it
   signs, with its signer's certified key, in parallel (``mapPartitions`` → ``xdn.crypto``).
   A signature that only an uncertified key explains is a *forged signer*.
6. :func:`check_chains` — one row per envelope: its contained envelope exists, the reference
   value equals that envelope's signature value, it was added by the node the contained envelope
   was addressed to, it carries a subset of the fragments — and whether the hop is sound.
7. :func:`reconstruct_paths` — from every leaf envelope back to the publication: the path of
   each fragment publisher → disseminators → subscriber receipt.
8. :func:`hop_latency`, :func:`fan_out`, :func:`failures` — what the report shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from audit import rows as R

_S = T.StringType()
PARSED = T.StructType([T.StructField(n, _S) for n in ("line", "graph", "error")])
REFERENCE = T.StructType([T.StructField(n, _S) for n in ("signature_graph", "signed_graph", "value")])
DESCRIBED = T.StructType(
    [T.StructField(n, _S) for n in ("kind", "error", "signed_graph", "signer", "value",
                                    "message")]
    + [T.StructField("number", T.IntegerType())]
    + [T.StructField(n, _S) for n in ("env_kind", "sender", "recipient")]
    + [T.StructField("timestamp_ms", T.LongType())]
    + [T.StructField(n, _S) for n in ("contains", "remote_message")]
    + [T.StructField("content", T.ArrayType(_S)), T.StructField("document_id", _S),
       T.StructField("fragments", T.ArrayType(_S)),
       T.StructField("references", T.ArrayType(REFERENCE))]
    + [T.StructField(n, _S) for n in ("node_uri", "cert_pem")]
)
SIGNATURE_RESULTS = T.StructType([
    T.StructField("sig_graph", _S), T.StructField("signed_graph", _S),
    T.StructField("node", _S), T.StructField("verified", T.BooleanType()),
    T.StructField("reason", _S),
])
FAILURES = T.StructType([T.StructField(n, _S) for n in ("graph", "node", "reason")])

_parse = F.udf(R.parse_row, PARSED, useArrow=False)
_describe = F.udf(R.describe_graph, DESCRIBED, useArrow=False)


def parse_lines(lines: DataFrame) -> DataFrame:
    """``(value, source)`` log lines → ``(source, line, graph, error)``; blank lines dropped."""
    parsed = lines.select("source", _parse("value").alias("p")).where(F.col("p").isNotNull())
    return parsed.select("source", "p.line", "p.graph", "p.error")


def collect_graphs(parsed: DataFrame) -> DataFrame:
    """Well-formed lines grouped per graph → ``(graph, lines, sources)``."""
    return (
        parsed.where(F.col("error").isNull())
        .groupBy("graph")
        .agg(F.array_sort(F.collect_set("line")).alias("lines"),
             F.array_sort(F.collect_set("source")).alias("sources"))
    )


def describe_graphs(graphs: DataFrame) -> DataFrame:
    """Classify and read each graph → ``(graph, sources, kind, error, …fields of its kind)``."""
    return graphs.select("graph", "sources", _describe("graph", "lines").alias("d")).select(
        "graph", "sources", "d.*"
    )


def _sound(described: DataFrame, kind: str) -> DataFrame:
    return described.where((F.col("kind") == kind) & F.col("error").isNull())


def signatures(described: DataFrame) -> DataFrame:
    """→ ``(sig_graph, signed_graph, signer, value)``."""
    return _sound(described, "signature").select(
        F.col("graph").alias("sig_graph"), "signed_graph", "signer", "value"
    )


def envelopes(described: DataFrame) -> DataFrame:
    """→ one row per envelope graph with what it says."""
    return _sound(described, "envelope").select(
        F.col("graph").alias("envelope"), "message", "number", F.col("env_kind").alias("kind"),
        "sender", "recipient", "timestamp_ms", "contains", "remote_message", "content",
        "document_id", "fragments", "references",
    )


def contents(described: DataFrame) -> DataFrame:
    """→ ``(graph, document_id, fragments)`` of each content graph."""
    return _sound(described, "content").select("graph", "document_id", "fragments")


def node_certificates(described: DataFrame) -> DataFrame:
    """→ ``(node, cert_pem)`` from the node descriptions at the top of each log."""
    return _sound(described, "node").select(F.col("node_uri").alias("node"), "cert_pem").distinct()


def graph_failures(described: DataFrame, parsed: DataFrame) -> DataFrame:
    """Malformed lines, malformed graphs and graphs nobody signed → ``(graph, node, reason)``."""
    bad_lines = parsed.where(F.col("error").isNotNull()).select(
        F.lit("").alias("graph"), F.col("source").alias("node"),
        F.concat(F.lit("malformed log line: "), F.col("error")).alias("reason"),
    )
    bad_graphs = described.where(F.col("error").isNotNull()).select(
        "graph", F.lit("").alias("node"), F.col("error").alias("reason")
    )
    signed = signatures(described).select(F.col("signed_graph").alias("graph"))
    unsigned = (
        described.where(F.col("kind").isin("content", "envelope") & F.col("error").isNull())
        .join(signed, "graph", "left_anti")
        .select("graph", F.lit("").alias("node"),
                F.lit("not signed by any signature graph").alias("reason"))
    )
    return bad_lines.unionByName(bad_graphs).union(unsigned)


def verify_nodes(certificates: DataFrame, *, ca_pem: bytes, at: datetime) -> DataFrame:
    """→ ``(node, cert_pem, problem)``; ``problem`` is null when the CA vouches for the node."""
    check = F.udf(lambda node, pem: R.check_certificate(node, pem, ca_pem, at), _S,
                  useArrow=False)
    return certificates.withColumn("problem", check("node", "cert_pem"))


def _verify_partition(rows: Iterator[Row]) -> Iterator[tuple[Any, ...]]:
    return R.verify_signature_rows(row.asDict(recursive=True) for row in rows)


def verify_signatures(sigs: DataFrame, graphs: DataFrame, nodes: DataFrame) -> DataFrame:
    """Verify every signature graph → ``(sig_graph, signed_graph, node, verified, reason)``."""
    keys = nodes.groupBy("node").agg(
        F.collect_list(F.struct("cert_pem", "problem")).alias("certs")
    )
    joined = (
        sigs.join(graphs.select(F.col("graph").alias("signed_graph"), "lines"), "signed_graph",
                  "left")
        .join(keys.withColumnRenamed("node", "signer"), "signer", "left")
    )
    checked = joined.rdd.mapPartitions(_verify_partition)
    return joined.sparkSession.createDataFrame(checked, SIGNATURE_RESULTS)


def _first_problem(*checks: tuple[Column, Column]) -> Column:
    return F.coalesce(*(F.when(cond, reason) for cond, reason in checks))


def _text(*parts: str | Column) -> Column:
    return F.concat(*(F.lit(p) if isinstance(p, str) else p for p in parts))


def _reference_problems(envs: DataFrame, sigs: DataFrame) -> DataFrame:
    refs = envs.select("envelope", F.explode("references").alias("r"))
    joined = refs.join(sigs, F.col("r.signed_graph") == sigs.signed_graph, "left")
    bad = F.col("sig_graph").isNull() | (F.col("sig_graph") != F.col("r.signature_graph")) | (
        F.col("value") != F.col("r.value")
    )
    return joined.where(bad).groupBy("envelope").agg(F.min(_text(
        "condition 5: reference to <", F.col("r.signature_graph"),
        "> does not match that signature in the logs",
    )).alias("ref_problem"))


def check_chains(
    envs: DataFrame, sigs: DataFrame, results: DataFrame, content: DataFrame
) -> DataFrame:
    """Check every envelope's link to what it wraps → one row per envelope with ``hop_ok``."""
    up = envs.select(*(F.col(c).alias("up_" + c) for c in (
        "envelope", "message", "number", "kind", "recipient", "document_id", "fragments")))
    first_content = content.select(F.col("graph").alias("c_graph"),
                                   F.col("document_id").alias("c_doc"),
                                   F.col("fragments").alias("c_fragments"))
    own = sigs.select(F.col("signed_graph").alias("envelope"), F.col("signer").alias("own_signer"))
    verdict = results.select(F.col("signed_graph").alias("envelope"),
                             F.col("verified").alias("signature_ok"))
    content_ok = (
        envs.select("envelope", F.explode("content").alias("signed_graph"))
        .join(results.select("signed_graph", "verified"), "signed_graph", "left")
        .groupBy("envelope").agg(F.min(F.coalesce("verified", F.lit(False))).alias("content_ok"))
    )
    e = (
        envs.join(up, F.col("contains") == F.col("up_envelope"), "left")
        .join(first_content, F.col("c_graph") == F.try_element_at("content", F.lit(1)), "left")
        .join(own, "envelope", "left").join(verdict, "envelope", "left")
        .join(content_ok, "envelope", "left")
        .join(_reference_problems(envs, sigs), "envelope", "left")
    )
    relay, publication = F.col("up_envelope").isNotNull(), F.col("kind") == "publication"
    up_doc = F.coalesce("up_document_id", "c_doc")
    up_fragments = F.coalesce("up_fragments", "c_fragments")
    wraps = F.when(publication, F.col("content")).otherwise(F.array("contains"))
    problem = _first_problem(
        (~publication & ~relay, _text("contained envelope <", F.col("contains"), "> is in no log")),
        (publication & F.col("c_graph").isNull(), F.lit("its content graph is in no log")),
        (F.col("own_signer").isNull(), F.lit("envelope is not signed")),
        (F.col("own_signer") != F.col("sender"), _text(
            "signed by <", F.col("own_signer"), "> but names <", F.col("sender"), "> as sender")),
        (~F.col("message").startswith(F.concat("sender", F.lit("msg/"))), _text(
            "condition 11: message URI is outside the URI space of <", F.col("sender"), ">")),
        (F.array_sort(F.transform("references", lambda r: r.signed_graph)) != F.array_sort(wraps),
         F.lit("does not reference exactly the signatures of the graphs it wraps")),
        (F.col("ref_problem").isNotNull(), F.col("ref_problem")),
        (relay & ~F.coalesce(F.col("sender") == F.col("up_recipient"), F.lit(False)), _text(
            "added by <", F.col("sender"), "> but <", F.col("contains"), "> is addressed to <",
            F.coalesce("up_recipient", F.lit("nobody")), ">")),
        (relay & (F.col("remote_message") != F.col("up_message")),
         F.lit("msg:hasRemoteMessage does not name the contained message")),
        (relay & (F.col("number") != F.col("up_number") + 1),
         F.lit("envelope number does not follow the contained envelope")),
        (relay & (F.col("up_kind") == "receipt"), F.lit("relays a receipt")),
        ((F.col("document_id") != up_doc) | (F.size(F.array_except("fragments", up_fragments)) > 0),
         F.lit("carries a document or fragments that what it wraps does not")),
    )
    return e.select(
        "envelope", "message", "number", "kind", F.col("sender").alias("node"),
        F.col("contains").alias("parent"), "recipient", "timestamp_ms", "document_id",
        "fragments", F.coalesce("signature_ok", F.lit(False)).alias("signature_ok"),
        F.coalesce("content_ok", F.lit(True)).alias("content_ok"), problem.alias("link_problem"),
    ).withColumn(
        "hop_ok",
        F.col("link_problem").isNull() & F.col("signature_ok") & F.col("content_ok"),
    )


def reconstruct_paths(chains: DataFrame, depth: int) -> DataFrame:
    """Walk from every leaf envelope up to its publication (``depth`` joins, no actions).

    Args:
        chains: the output of :func:`check_chains`.
        depth: the longest chain to follow (the largest envelope number is enough).

    Returns:
        one row per (leaf, fragment): the nodes, envelopes and timestamps along the path, whether
        it ends in a subscriber receipt, and whether every hop of it is sound.
    """
    hop = F.struct("envelope", "node", "kind", "timestamp_ms", "hop_ok")
    parents = chains.where(F.col("parent").isNotNull()).select(F.col("parent").alias("envelope"))
    state = chains.join(parents, "envelope", "left_anti").select(
        F.col("envelope").alias("leaf"), F.col("parent").alias("cur"), F.array(hop).alias("hops"),
        F.lit(None).cast(_S).alias("missing"), "document_id", "fragments",
        F.col("kind").alias("leaf_kind"), F.col("node").alias("leaf_node"),
    )
    step = chains.select(F.col("envelope").alias("cur"), F.col("parent").alias("next"),
                         hop.alias("hop"))
    for _ in range(max(depth, 1)):
        found = F.col("hop").isNotNull()
        state = state.join(step, "cur", "left").select(
            "leaf", F.when(found, F.col("next")).alias("cur"),
            F.when(found, F.concat(F.array("hop"), "hops")).otherwise(F.col("hops")).alias("hops"),
            F.when(F.col("cur").isNotNull() & ~found, F.col("cur"))
            .otherwise(F.col("missing")).alias("missing"),
            "document_id", "fragments", "leaf_kind", "leaf_node",
        )
    complete = F.col("missing").isNull() & F.col("cur").isNull()
    receipt = F.col("leaf_kind") == "receipt"
    return state.select(
        "leaf", "document_id", F.explode("fragments").alias("fragment_id"),
        F.transform("hops", lambda h: h.node).alias("nodes"),
        F.transform("hops", lambda h: h.envelope).alias("envelopes"),
        F.transform("hops", lambda h: h.timestamp_ms).alias("timestamps_ms"),
        F.size("hops").alias("hops"), receipt.alias("receipt"),
        F.when(receipt, F.col("leaf_node")).alias("subscriber"),
        F.coalesce("missing", "cur").alias("missing_envelope"),
        (complete & (F.col("hops")[0]["kind"] == "publication")
         & F.forall("hops", lambda h: h.hop_ok)).alias("chain_ok"),
    )


def hop_latency(chains: DataFrame) -> DataFrame:
    """Latency of each (sender → receiver) link from envelope timestamps, in milliseconds."""
    up = chains.select(F.col("envelope").alias("parent"), F.col("node").alias("sender"),
                       F.col("timestamp_ms").alias("sent_ms"))
    return (
        chains.join(up, "parent")
        .select("sender", F.col("node").alias("receiver"),
                (F.col("timestamp_ms") - F.col("sent_ms")).alias("latency_ms"))
        .groupBy("sender", "receiver")
        .agg(F.count("*").alias("hops"), F.avg("latency_ms").alias("mean_ms"),
             F.max("latency_ms").alias("max_ms"))
    )


def fan_out(chains: DataFrame) -> DataFrame:
    """Per forwarding node: messages in, envelopes out and the widest fan-out of one message."""
    upstream = F.coalesce(F.col("parent"), _text("document:", F.col("document_id")))
    per_message = (
        chains.where(F.col("kind") != "receipt")
        .groupBy("node", upstream.alias("upstream")).agg(F.count("*").alias("out"))
    )
    return per_message.groupBy("node").agg(
        F.count("*").alias("inbound"), F.sum("out").alias("outbound"),
        F.max("out").alias("max_fan_out"),
    )


def failures(graph_problems: DataFrame, results: DataFrame, chains: DataFrame) -> DataFrame:
    """Everything that failed → ``(graph, node, reason)``."""
    bad_sigs = results.where(~F.col("verified")).select(
        F.col("signed_graph").alias("graph"), "node", "reason")
    bad_links = chains.where(F.col("link_problem").isNotNull()).select(
        F.col("envelope").alias("graph"), "node", F.col("link_problem").alias("reason"))
    return graph_problems.union(bad_sigs).union(bad_links)
