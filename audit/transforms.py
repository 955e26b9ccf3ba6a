"""Audit transforms: pure DataFrame → DataFrame functions over provenance log lines.

Theory of operation
-------------------
Every node's log holds its certificate (a node description) and the graphs it added to each
message. Nothing in a log is trusted: the pipeline rebuilds the envelope chains from all logs
together and checks each link.

1. :func:`parse_lines` — each line → canonical N-Quads line + graph name (or an error), and its
   size; :func:`file_problems` sums these per log file (malformed lines, lines too long to
   read) so a torn or binary log is one finding, not one per line.
2. :func:`collect_graphs` — lines grouped by graph name (sorted, de-duplicated: the graph's
   canonical form), with the log files it came from.
3. :func:`describe_graphs` — each graph classified and read strictly (signature, envelope,
   content, node description); :func:`signatures`, :func:`envelopes`, :func:`contents`,
   :func:`node_certificates` and :func:`graph_failures` select from that.
4. :mod:`audit.trust` — every certificate each node held (its node descriptions and the
   certificates its signature graphs carry), checked once each against the CA, with its
   validity period and revocation time (CRLs).
5. :func:`verify_signatures` — every signature graph against the canonical form of the graph it
   signs, with its signer's certified keys, in parallel (Python UDFs → :mod:`audit.verify`).
   A batch signature (one value over the Merkle root of many graphs) is checked once per
   (signer, root, value): each graph's root is rebuilt from its inclusion path first. A
   signature that only an uncertified key explains is a *forged signer*; a signature graph
   carrying a certificate the CA did not issue to its signer is flagged too. Then
   :func:`audit.trust.in_time` judges each at its signing time (renewals, rotation and
   certificates expired since are fine; a signature outside every period, or after a
   revocation, is not).
6. :func:`check_chains` — one row per envelope: its contained envelope exists, the reference
   value equals that envelope's signature value, it was added by the node the contained envelope
   was addressed to, the manifest leaves it carries are among those of what it wraps (each of
   its runs inside one run of the parent's: a higher-order SQL function, no UDF) — and whether
   the hop is sound. A content graph carries the leaves ``[0, leaf count)``.
7. :func:`reconstruct_paths` — from every leaf envelope back to the publication: the path of
   each message publisher → disseminators → subscriber receipt, with the manifest leaves it
   delivers and how many (one walk per document).
8. :func:`hop_latency`, :func:`fan_out`, :func:`failures` — what the report shows; every
   failure has a class (:data:`FAILURE_COLUMNS`), and :mod:`audit.faults` adds the fault
   classes beyond signatures and links (receipts, duplicates, time order, roles, deliveries
   after revocation).

``parse_lines`` and ``describe_graphs`` take optional Spark accumulators they count lines and
envelopes into, for the job's progress line (:mod:`audit.progress`).
9. :mod:`audit.refusals` — the failure notices parties signed when they refused something
   (issue #13). Notices are messages of their own, not part of any chain; their signatures
   are verified in step 5 with all others, so a forged notice is a failure like any forged
   graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark import Accumulator
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from audit import rows as R
from audit import verify as V

_S = T.StringType()
PARSED = T.StructType([T.StructField(n, _S) for n in ("line", "graph", "error")])
VERDICT = T.StructType(
    [
        T.StructField("verified", T.BooleanType()),
        T.StructField("reason", _S),
        T.StructField("keys", T.ArrayType(_S)),
    ]
)


def parse_lines(lines: DataFrame, counter: Accumulator[int] | None = None) -> DataFrame:
    """``(value, source, …)`` log lines → ``(source, …, bytes, line, graph, error)``.

    Every input line gives one row, its other columns kept: ``bytes`` is its size in the file
    (with its line end), and a blank or comment line has no ``line``, ``graph`` or ``error``.
    ``counter``, if given, is a Spark accumulator each parsed line adds one to (progress).
    """
    parse = F.udf(_counted(R.parse_row, counter), PARSED, useArrow=False)
    kept = [c for c in lines.columns if c != "value"]
    size = (F.octet_length("value") + 1).cast("bigint").alias("bytes")
    parsed = lines.select(*kept, size, parse("value").alias("p"))
    return parsed.select(*kept, "bytes", "p.line", "p.graph", "p.error")


def _counted(fn: Callable[..., Any], counter: Accumulator[int] | None) -> Callable[..., Any]:
    """``fn``, adding one to ``counter`` per call (``fn`` itself without a counter)."""
    if counter is None:
        return fn

    def counted(*args: Any) -> Any:
        counter.add(1)
        return fn(*args)

    return counted


def collect_graphs(parsed: DataFrame) -> DataFrame:
    """Well-formed lines grouped per graph → ``(graph, lines, sources, copies)``; ``copies``
    counts the lines read, repeats included (:func:`audit.faults.repeated_lines`)."""
    return (
        parsed.where(F.col("graph").isNotNull())
        .groupBy("graph")
        .agg(
            F.array_sort(F.collect_set("line")).alias("lines"),
            F.array_sort(F.collect_set("source")).alias("sources"),
            F.count("line").alias("copies"),
        )
    )


def describe_graphs(graphs: DataFrame, counter: Accumulator[int] | None = None) -> DataFrame:
    """Classify and read each graph → ``(graph, sources, kind, error, …fields of its kind)``;
    ``counter``, if given, is a Spark accumulator each envelope graph adds one to (progress)."""
    describe = F.udf(_envelopes_counted(counter), R.DESCRIPTION_TYPE, useArrow=False)
    return graphs.select("graph", "sources", describe("graph", "lines").alias("d")).select(
        "graph", "sources", "d.*"
    )


def _envelopes_counted(counter: Accumulator[int] | None) -> Callable[..., Any]:
    if counter is None:
        return R.describe_graph

    def counted(name: str, lines: list[str]) -> dict[str, Any]:
        row = R.describe_graph(name, lines)
        if row["kind"] == "envelope":
            counter.add(1)
        return row

    return counted


def _sound(described: DataFrame, kind: str) -> DataFrame:
    return described.where((F.col("kind") == kind) & F.col("error").isNull())


def signatures(described: DataFrame) -> DataFrame:
    """→ ``(sig_graph, signed_graph, signer, value, certificate, batch)``."""
    return _sound(described, "signature").select(
        F.col("graph").alias("sig_graph"), "signed_graph", "signer", "value", "certificate", "batch"
    )


def envelopes(described: DataFrame) -> DataFrame:
    """→ one row per envelope graph of a document's chain with what it says (failure notices
    are not part of any chain: see :mod:`audit.refusals`)."""
    chained = _sound(described, "envelope").where(
        ~F.col("env_kind").isin("refusal", "policy-notice")
    )
    return chained.select(
        F.col("graph").alias("envelope"),
        "message",
        "number",
        F.col("env_kind").alias("kind"),
        "sender",
        "recipient",
        "timestamp_ms",
        "contains",
        "remote_message",
        "content",
        "document_id",
        "leaves",
        "references",
    )


def contents(described: DataFrame) -> DataFrame:
    """→ ``(graph, document_id, publisher, leaves, document_version, concepts)`` of each
    content graph: all leaves of its manifest, ``[0, leaf count)``, and the version and concept
    runs it names (null when it does not)."""
    first = F.lit(0).cast("bigint").alias("start")
    every = F.array(F.struct(first, F.col("leaf_count").alias("end")))
    return _sound(described, "content").select(
        "graph", "document_id", "publisher", every.alias("leaves"), "document_version", "concepts"
    )


#: Lines longer than this many bytes are not read (Hadoop's line reader skips them, so one
#: enormous line costs no memory); :func:`file_problems` reports the bytes they leave unread.
MAX_LINE_BYTES = 1024 * 1024


def file_problems(parsed: DataFrame) -> DataFrame:
    """What is wrong with each log file as a whole → ``(graph, node, reason)``, one row per file.

    Malformed lines (binary data, a line torn by a crash) are counted per file with one
    example, so a log full of garbage is one finding, not thousands. A file whose lines add up
    to at least :data:`MAX_LINE_BYTES` fewer bytes than its size held lines too long to read
    (compressed files are not checked: their size is not their text's; a CR LF line end counts
    one byte short, far below the limit).

    Args:
        parsed: :func:`parse_lines` over lines with ``source`` and ``file_size`` (bytes).
    """
    per_file = parsed.groupBy("source").agg(
        F.count("error").alias("malformed"),
        F.min("error").alias("example"),
        F.sum("bytes").alias("read"),
        F.first("file_size").alias("size"),
    )
    unread = F.col("size") - F.col("read")
    torn = F.when(
        F.col("malformed") > 0,
        _text(
            F.col("malformed").cast("string"),
            " malformed log line(s), e.g. ",
            F.col("example"),
        ),
    )
    long_lines = F.when(
        ~F.col("source").endswith(".gz") & (unread >= MAX_LINE_BYTES),
        _text(
            "lines longer than ",
            str(MAX_LINE_BYTES),
            " bytes not read (",
            unread.cast("string"),
            " bytes)",
        ),
    )
    found = F.array_compact(F.array(torn, long_lines))
    return per_file.select(
        F.lit("").alias("graph"),
        F.col("source").alias("node"),
        F.explode(found).alias("reason"),
        F.lit("malformed").alias("class"),
    )


def graph_failures(described: DataFrame, parsed: DataFrame) -> DataFrame:
    """Bad log files (:func:`file_problems`), malformed graphs and graphs nobody signed →
    ``(graph, node, reason, class)``."""
    logs = F.array_join("sources", ", ").alias("node")  # who added it is unknown: name the logs
    bad_graphs = described.where(F.col("error").isNotNull()).select(
        "graph", logs, F.col("error").alias("reason"), F.lit("malformed").alias("class")
    )
    signed = signatures(described).select(F.col("signed_graph").alias("graph"))
    unsigned = (
        described.where(
            F.col("kind").isin("content", "envelope", "refusal", "policy")
            & F.col("error").isNull()
        )
        .join(signed, "graph", "left_anti")
        .select(
            "graph",
            logs,
            F.lit("not signed by any signature graph").alias("reason"),
            F.lit("unsigned").alias("class"),
        )
    )
    return file_problems(parsed).unionByName(bad_graphs).union(unsigned)


#: The facts of a certificate kept with each signature that verifies under it (no PEM).
_CERT_FACTS = ("serial", "name", "role", "not_before_ms", "not_after_ms", "revoked_ms")


def verify_signatures(sigs: DataFrame, graphs: DataFrame, nodes: DataFrame) -> DataFrame:
    """Verify every signature graph in parallel, each ECDSA signature once.

    Per signature graph a Python UDF (:func:`audit.verify.signed_input`) finds the bytes its
    value signs: the signed graph's canonical form, or a batch's root rebuilt from it and the
    inclusion path. Signature graphs are then grouped by (signer, value, signed bytes), so that
    all graphs of one batch fall in one group, and one UDF call per group
    (:func:`audit.verify.judge_signature` → ``xdn.crypto.verify``) judges them all.

    Args:
        nodes: :func:`audit.trust.judge_certificates`: every certificate each node held.

    Returns:
        ``(sig_graph, signed_graph, node, value, batch_size, verified, reason, class,
        verifying)``; ``batch_size`` is null for a plain signature, ``verifying`` the facts of
        the node's certificates the signature verifies under (judged at signing time by
        :func:`audit.trust.in_time`), ``class`` the failure class (null when verified).
    """
    held = F.struct("cert_pem", "problem", *_CERT_FACTS)
    keys = nodes.groupBy("node").agg(F.collect_list(held).alias("certs"))
    prepare = F.udf(V.signed_input, V.SIGNED_TYPE, useArrow=False)  # DDL: needs a session
    judge = F.udf(V.judge_signature, VERDICT, useArrow=False)
    each = (
        sigs.join(
            graphs.select(F.col("graph").alias("signed_graph"), "lines"), "signed_graph", "left"
        )
        .join(keys.withColumnRenamed("node", "signer"), "signer", "left")
        .select(
            "sig_graph",
            "signed_graph",
            "signer",
            "value",
            "certs",
            F.col("batch.size").alias("batch_size"),
            prepare("signed_graph", "signer", "lines", "batch", "certificate", "certs").alias("p"),
        )
    )
    row = F.struct("sig_graph", "signed_graph", "batch_size", "p.problem", "p.certificate_problem")
    once = each.groupBy("signer", "value", F.col("p.signed").alias("signed")).agg(
        F.first("certs").alias("certs"), F.collect_list(row).alias("graphs")
    )
    judged = once.select(
        "signer",
        "value",
        "certs",
        judge("signer", "value", "signed", "certs").alias("v"),
        F.explode("graphs").alias("g"),
    )
    reason = F.coalesce("g.problem", "v.reason", "g.certificate_problem")
    kind = (
        F.when(reason.isNull(), F.lit(None))
        .when(F.col("g.problem").isNotNull(), F.lit("signature"))
        .when(F.col("v.reason").startswith("forged signer"), F.lit("forged-signer"))
        .when(F.col("v.reason").startswith("unknown signer"), F.lit("unknown-signer"))
        .when(F.col("v.reason").isNotNull(), F.lit("signature"))
        .otherwise(F.lit("certificate"))
    )
    verifying = F.transform(
        F.filter("certs", lambda c: F.array_contains("v.keys", c["serial"])),
        lambda c: F.struct(*(c[f].alias(f) for f in _CERT_FACTS)),
    )
    return judged.select(
        "g.sig_graph",
        "g.signed_graph",
        F.col("signer").alias("node"),
        "value",
        "g.batch_size",
        reason.isNull().alias("verified"),
        reason.alias("reason"),
        kind.alias("class"),
        verifying.alias("verifying"),
    )


def _first_problem(*checks: tuple[Column, Column]) -> Column:
    return F.coalesce(*(F.when(cond, reason) for cond, reason in checks))


def _text(*parts: str | Column) -> Column:
    return F.concat(*(F.lit(p) if isinstance(p, str) else p for p in parts))


def _signed_items(envs: DataFrame, results: DataFrame, content: DataFrame) -> DataFrame:
    """Envelopes and content graphs, each with its signature (graph, value, signer, verdict)."""
    verdicts = results.select(
        F.col("signed_graph").alias("item"),
        "sig_graph",
        F.col("value").alias("sig_value"),
        F.col("node").alias("signer"),
        F.col("verified").alias("signature_ok"),
        F.col("role").alias("signer_role"),
        F.col("holder").alias("signer_name"),
    )
    items = envs.withColumnRenamed("envelope", "item").unionByName(
        content.select(
            F.col("graph").alias("item"),
            "document_id",
            "publisher",
            "leaves",
            "document_version",
            "concepts",
            F.lit("content").alias("kind"),
        ),
        allowMissingColumns=True,
    )
    return items.join(verdicts, "item", "left")


def leaves_within(runs: str, parents: str) -> Column:
    """Whether every leaf of ``runs`` is among ``parents`` (both :data:`audit.rows.LEAVES_TYPE`).

    Runs are merged (no two touch), so a leaf set is a subset of another exactly when each of
    its runs lies inside one run of the other; false when either is null.
    """

    def inside(run: Column) -> Column:
        return F.exists(parents, lambda p: (p["start"] <= run["start"]) & (run["end"] <= p["end"]))

    return F.coalesce(F.forall(runs, inside), F.lit(False))


def _link_problem(publication: Column, found: Column) -> Column:
    """The first reason an envelope (joined with what it wraps, ``up_*``) is not sound."""
    reference = F.struct(
        F.col("up_sig_graph").alias("signature_graph"),
        F.col("up_item").alias("signed_graph"),
        F.col("up_sig_value").alias("value"),
    )
    return _first_problem(
        (~found & ~publication, _text("contained envelope <", F.col("contains"), "> is in no log")),
        (~found, F.lit("its content graph is in no log")),
        (publication & (F.size("content") != 1), F.lit("needs exactly one content graph")),
        (publication != (F.col("up_kind") == "content"), F.lit("wraps a graph of the wrong kind")),
        (F.col("sig_graph").isNull(), F.lit("envelope is not signed")),
        (
            F.col("signer") != F.col("sender"),
            _text("signed by <", F.col("signer"), "> but names <", F.col("sender"), "> as sender"),
        ),
        (
            ~F.col("message").startswith(F.concat("sender", F.lit("msg/"))),
            _text("condition 11: message URI is outside the URI space of <", F.col("sender"), ">"),
        ),
        (
            F.col("up_sig_graph").isNull(),
            _text("wrapped graph <", F.col("up_item"), "> is not signed"),
        ),
        (
            F.col("references") != F.array(reference),
            _text(
                "condition 5: does not reference exactly the signature of <",
                F.col("up_item"),
                "> with its value",
            ),
        ),
        (
            ~publication & ~F.coalesce(F.col("sender") == F.col("up_recipient"), F.lit(False)),
            _text(
                "added by <",
                F.col("sender"),
                "> but <",
                F.col("contains"),
                "> is addressed to <",
                F.coalesce("up_recipient", F.lit("nobody")),
                ">",
            ),
        ),
        (
            ~publication & (F.col("remote_message") != F.col("up_message")),
            F.lit("msg:hasRemoteMessage does not name the contained message"),
        ),
        (
            ~publication & (F.col("number") != F.col("up_number") + 1),
            F.lit("envelope number does not follow the contained envelope"),
        ),
        (F.col("up_kind") == "receipt", F.lit("relays a receipt")),
        (
            F.col("document_id") != F.col("up_document_id"),
            F.lit("carries another document than what it wraps"),
        ),
        (
            ~leaves_within("leaves", "up_leaves"),
            F.lit("carries manifest leaves that what it wraps does not"),
        ),
    )


def check_chains(envs: DataFrame, results: DataFrame, content: DataFrame) -> DataFrame:
    """Check every envelope's link to what it wraps → one row per envelope with ``hop_ok``.

    An envelope is joined once with its own signature and once with the graph it wraps (the
    contained envelope, or for a publication its content graph) and that graph's signature.
    Kept for :mod:`audit.faults`: the wrapped envelope's time (``parent_ms``), the role of the
    certificate the envelope was signed under (``role``) and, for a publication, the publisher
    its content graph names, the holder of the certificate that signed that graph, and the
    document version and concept runs it names (:mod:`audit.entitlements`).
    """
    items = _signed_items(envs, results, content)
    up = items.select(
        *(
            F.col(c).alias("up_" + c)
            for c in (
                "item",
                "message",
                "number",
                "kind",
                "recipient",
                "document_id",
                "leaves",
                "sig_graph",
                "sig_value",
                "signature_ok",
                "timestamp_ms",
                "publisher",
                "signer_name",
                "document_version",
                "concepts",
            )
        )
    )
    wrapped = F.coalesce(F.col("contains"), F.try_element_at("content", F.lit(1)))
    e = items.where(F.col("kind") != "content").join(up, F.col("up_item") == wrapped, "left")
    publication = F.col("kind") == "publication"
    content_ok = F.when(publication, F.coalesce("up_signature_ok", F.lit(False))).otherwise(True)
    return e.select(
        F.col("item").alias("envelope"),
        "message",
        "number",
        "kind",
        F.col("sender").alias("node"),
        F.col("contains").alias("parent"),
        "recipient",
        "timestamp_ms",
        "document_id",
        "leaves",
        F.coalesce("signature_ok", F.lit(False)).alias("signature_ok"),
        content_ok.alias("content_ok"),
        F.col("up_timestamp_ms").alias("parent_ms"),
        F.col("signer_role").alias("role"),
        F.when(publication, F.col("up_publisher")).alias("named_publisher"),
        F.when(publication, F.col("up_signer_name")).alias("content_signer"),
        F.when(publication, F.col("up_document_version")).alias("document_version"),
        F.when(publication, F.col("up_concepts")).alias("concepts"),
        _link_problem(publication, F.col("up_item").isNotNull()).alias("link_problem"),
    ).withColumn(
        "hop_ok",
        F.col("link_problem").isNull() & F.col("signature_ok") & F.col("content_ok"),
    )


def reconstruct_paths(chains: DataFrame) -> DataFrame:
    """Walk from every leaf envelope back to its publication, one document at a time.

    Chains never leave their document, so the envelopes are grouped by document and each
    group's tree is walked by one Python UDF (:func:`audit.rows.walk_paths`).

    Args:
        chains: the output of :func:`check_chains`.

    Returns:
        one row per leaf envelope: the nodes, envelopes and timestamps along the path, the
        manifest leaves the leaf envelope carries (``leaves``, runs) and how many
        (``fragments``), the network hops it took (``hops``: its envelopes, less the receipt,
        which acknowledges the last hop rather than making one), whether it ends in a
        subscriber receipt, the first missing envelope, whether every hop is sound.
    """
    walk = F.udf(R.walk_paths, R.PATH_TYPE, useArrow=False)  # DDL: needs a session
    hop = F.struct("envelope", "parent", "node", "kind", "timestamp_ms", "hop_ok", "leaves")
    per_document = chains.groupBy("document_id").agg(F.collect_list(hop).alias("hops"))
    paths = per_document.select("document_id", F.explode(walk("hops")).alias("p"))
    count = F.aggregate(
        "p.leaves", F.lit(0).cast("bigint"), lambda total, run: total + run["end"] - run["start"]
    )
    return paths.select(
        "p.leaf",
        "document_id",
        "p.leaves",
        count.alias("fragments"),
        "p.nodes",
        "p.envelopes",
        "p.timestamps_ms",
        (F.size("p.nodes") - F.col("p.receipt").cast("int")).alias("hops"),
        "p.receipt",
        "p.subscriber",
        "p.missing_envelope",
        "p.chain_ok",
    )


def hop_latency(chains: DataFrame) -> DataFrame:
    """Latency of each (sender → receiver) link from envelope timestamps, in milliseconds:
    ``(sender, receiver, hops, mean_ms, p50_ms, p90_ms, p99_ms, max_ms)``."""
    up = chains.select(
        F.col("envelope").alias("parent"),
        F.col("node").alias("sender"),
        F.col("timestamp_ms").alias("sent_ms"),
    )
    return (
        chains.join(up, "parent")
        .select(
            "sender",
            F.col("node").alias("receiver"),
            (F.col("timestamp_ms") - F.col("sent_ms")).alias("latency_ms"),
        )
        .groupBy("sender", "receiver")
        .agg(
            F.count("*").alias("hops"),
            F.avg("latency_ms").alias("mean_ms"),
            *percentiles("latency_ms"),
            F.max("latency_ms").alias("max_ms"),
        )
    )


#: The latency percentiles the audit reports (column ``pNN_ms`` each).
PERCENTILES = (50, 90, 99)


def percentiles(column: str) -> list[Column]:
    """Approximate ``p50_ms``, ``p90_ms``, ``p99_ms`` of ``column`` (one pass, bounded
    memory: Spark's ``percentile_approx``)."""
    return [
        F.percentile_approx(column, p / 100, 1_000).alias(f"p{p}_ms") for p in PERCENTILES
    ]


def fan_out(chains: DataFrame) -> DataFrame:
    """Per forwarding node: messages in, envelopes out and the widest fan-out of one message."""
    upstream = F.coalesce(F.col("parent"), _text("document:", F.col("document_id")))
    per_message = (
        chains.where(F.col("kind") != "receipt")
        .groupBy("node", upstream.alias("upstream"))
        .agg(F.count("*").alias("out"))
    )
    return per_message.groupBy("node").agg(
        F.count("*").alias("inbound"),
        F.sum("out").alias("outbound"),
        F.max("out").alias("max_fan_out"),
    )


#: The columns of the failures table: the graph at fault, the node responsible, why, and the
#: class of fault (``malformed``, ``unsigned``, ``signature``, ``forged-signer``,
#: ``unknown-signer``, ``certificate``, ``revocation``, ``chain``, ``receipt``, ``duplicate``,
#: ``time-order``, ``role``, ``notice``; ``docs/audit.md`` lists what each finds).
FAILURE_COLUMNS = ("graph", "node", "reason", "class")


def failures(
    graph_problems: DataFrame,
    results: DataFrame,
    chains: DataFrame,
    notices: DataFrame | None = None,
    findings: Sequence[DataFrame] = (),
) -> DataFrame:
    """Everything that failed → ``(graph, node, reason, class)``; ``notices``: the refusals
    table (:func:`audit.refusals.refusals`), whose unsound notices are failures too;
    ``findings``: more of the same shape (:mod:`audit.faults`)."""
    bad_sigs = results.where(~F.col("verified")).select(
        F.col("signed_graph").alias("graph"), "node", "reason", "class"
    )
    orphan = (F.col("kind") == "receipt") & F.col("link_problem").startswith("contained envelope")
    bad_links = chains.where(F.col("link_problem").isNotNull()).select(
        F.col("envelope").alias("graph"),
        "node",
        F.col("link_problem").alias("reason"),
        F.when(orphan, F.lit("receipt")).otherwise(F.lit("chain")).alias("class"),
    )
    found = graph_problems.union(bad_sigs).union(bad_links)
    if notices is not None:
        found = found.union(
            notices.where(F.col("problem").isNotNull()).select(
                F.col("notice").alias("graph"),
                F.col("subscriber").alias("node"),
                F.col("problem").alias("reason"),
                F.lit("notice").alias("class"),
            )
        )
    for more in findings:
        found = found.union(more.select(*FAILURE_COLUMNS))
    return found
