"""The graph's snapshot: one Parquet file that DuckDB folds from the previous snapshot and the log.

Why not a pickled networkx graph: folding the log into one meant loading the whole graph into the
writing process, about 2 GB at 10,000 documents and growing with the bank, in ingest runs and
evolution cycles that otherwise never read the graph. DuckDB folds snapshot and log in SQL within a
memory limit (spilling to disk past it); only code that asks for networkx's graph
(`GraphStore.ensure_loaded`) builds it.

One row per node (`kind` 'n', `head` its id; every node, also one only named by an edge, which networkx
creates without attributes) and per edge (`kind` 'e', `head`, `tail`, `key`); `attrs` is the JSON
object of its attributes (an attribute set to null is dropped, as JSON merge patch does).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import duckdb
import networkx as nx

from smb_core.stores.metadata import QUIET, sql_literal

_OPS_COLUMNS = "{'s': 'BIGINT', 'o': 'VARCHAR', 'h': 'VARCHAR', 't': 'VARCHAR', 'k': 'VARCHAR', 'a': 'JSON'}"
_MERGED = "list_reduce(list(a ORDER BY s), lambda x, y: json_merge_patch(x, y))"
# Most nodes and edges are written once: only those written several times are merged with a list
# aggregate, which DuckDB cannot spill to disk (all of them that way needed over 256 MB for 1.5M rows).
_FOLD = f"""
CREATE TEMP TABLE ops AS {{sources}};
CREATE TEMP TABLE removals AS SELECT h, t, k, max(s) AS last FROM ops WHERE o = 'r' GROUP BY h, t, k;
CREATE TEMP TABLE live AS  -- edge writes after the edge's last removal, if any
    SELECT ops.h, ops.t, ops.k, ops.s, ops.a FROM ops
    LEFT JOIN removals r ON ops.h = r.h AND ops.t = r.t AND ops.k = r.k
    WHERE ops.o = 'e' AND (r.last IS NULL OR ops.s > r.last);
CREATE TEMP TABLE rewritten AS SELECT h, t, k FROM live GROUP BY h, t, k HAVING count(*) > 1;
CREATE TEMP TABLE folded_edges AS
    SELECT l.h, l.t, l.k, l.a FROM live l LEFT JOIN rewritten r ON l.h = r.h AND l.t = r.t AND l.k = r.k
    WHERE r.h IS NULL
    UNION ALL
    SELECT h, t, k, {_MERGED} FROM (
        SELECT l.* FROM live l JOIN rewritten r ON l.h = r.h AND l.t = r.t AND l.k = r.k
    ) GROUP BY h, t, k;
CREATE TEMP TABLE node_writes AS SELECT h, s, a FROM ops WHERE o = 'n';
CREATE TEMP TABLE rewritten_nodes AS SELECT h FROM node_writes GROUP BY h HAVING count(*) > 1;
CREATE TEMP TABLE folded_nodes AS
    SELECT h, a FROM node_writes WHERE h NOT IN (SELECT h FROM rewritten_nodes)
    UNION ALL
    SELECT h, {_MERGED} FROM node_writes WHERE h IN (SELECT h FROM rewritten_nodes) GROUP BY h
    UNION ALL  -- an edge's ends are nodes too, without attributes unless written as nodes
    SELECT h, '{{}}'::JSON FROM (SELECT h FROM ops WHERE o = 'e' UNION SELECT t FROM ops WHERE o = 'e')
    WHERE h NOT IN (SELECT h FROM node_writes);
"""


def write_ops(lines: Iterable[bytes], handle: IO[str]) -> None:
    """Flatten log lines into one operation per row, numbered in the order replaying applies them
    (each line's nodes, then its edges, then its removals)."""
    seq = 0
    for line in lines:
        batch = json.loads(line)
        rows = [{"o": "n", "h": node, "a": attrs} for node, attrs in batch.get("n", [])]
        rows += [{"o": "e", "h": head, "t": tail, "k": key, "a": attrs}
                 for head, tail, key, attrs in batch.get("e", [])]
        rows += [{"o": "r", "h": head, "t": tail, "k": key} for head, tail, key in batch.get("r", [])]
        for row in rows:
            row["s"] = seq
            seq += 1
            handle.write(json.dumps(row, ensure_ascii=False))
            handle.write("\n")


def write_graph_ops(graph: nx.MultiDiGraph, handle: IO[str]) -> None:
    """A networkx graph (an old bank's pickled snapshot) as operations that come before any log line."""
    for node, attrs in graph.nodes(data=True):
        handle.write(json.dumps({"s": -1, "o": "n", "h": node, "a": attrs}, ensure_ascii=False) + "\n")
    for head, tail, key, attrs in graph.edges(keys=True, data=True):
        handle.write(json.dumps({"s": -1, "o": "e", "h": head, "t": tail, "k": key, "a": attrs},
                                ensure_ascii=False) + "\n")


@contextmanager
def folded(snapshot: Path | None, ops: Path, memory_limit: str | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection holding `folded_nodes` (h, a) and `folded_edges` (h, t, k, a): the snapshot
    (if any) with the operations in `ops` (written by `write_ops`) applied in order."""
    sources = [f"SELECT s, o, h, t, k, a FROM read_json({sql_literal(ops)}, format = 'newline_delimited', "
               f"columns = {_OPS_COLUMNS})"]
    if snapshot is not None:
        sources.append(f"SELECT -1::BIGINT AS s, kind AS o, head AS h, tail AS t, key AS k, attrs::JSON AS a "
                       f"FROM read_parquet({sql_literal(snapshot)})")
    with _connection(memory_limit, ops.parent) as con:
        con.execute(_FOLD.replace("{sources}", " UNION ALL ".join(sources)))
        yield con


def folded_counts(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(nodes, edges) of the folded graph."""
    return (con.execute("SELECT count(*) FROM folded_nodes").fetchone()[0],
            con.execute("SELECT count(*) FROM folded_edges").fetchone()[0])


def folded_stats(con: duckdb.DuckDBPyConnection) -> dict:
    """`GraphStore.stats` of the folded graph, in SQL. Weakly connected components by label propagation:
    each node takes the smallest label of itself and its neighbours until none changes (as many rounds
    as the longest shortest path, each a join DuckDB can spill), instead of networkx holding the graph."""
    con.execute("CREATE OR REPLACE TEMP TABLE labels AS SELECT h AS node, h AS label FROM folded_nodes")
    con.execute("CREATE OR REPLACE TEMP TABLE links AS SELECT h AS x, t AS y FROM folded_edges WHERE h != t "
                "UNION SELECT t, h FROM folded_edges WHERE h != t")
    while True:
        con.execute("CREATE OR REPLACE TEMP TABLE relabelled AS SELECT l.node, min(n.label) AS label "
                    "FROM labels l JOIN links k ON k.x = l.node JOIN labels n ON n.node = k.y GROUP BY l.node, l.label "
                    "HAVING min(n.label) < l.label")
        if not con.execute("SELECT count(*) FROM relabelled").fetchone()[0]:
            break
        con.execute("UPDATE labels SET label = r.label FROM relabelled r WHERE labels.node = r.node")
    nodes, edges = folded_counts(con)
    return {
        "nodes": nodes,
        "edges": edges,
        "node_types": dict(con.execute("SELECT a->>'type', count(*) FROM folded_nodes GROUP BY ALL").fetchall()),
        "edge_types": dict(con.execute("SELECT a->>'edge_type', count(*) FROM folded_edges GROUP BY ALL").fetchall()),
        "components": con.execute("SELECT count(DISTINCT label) FROM labels").fetchone()[0],
    }


def write_snapshot(con: duckdb.DuckDBPyConnection, target: Path) -> None:
    """Write the folded graph to `target` durably and atomically (a temp file beside it, then rename)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        con.execute(f"COPY (SELECT 'n' AS kind, h AS head, NULL::VARCHAR AS tail, NULL::VARCHAR AS key, "
                    f"a::VARCHAR AS attrs FROM folded_nodes UNION ALL "
                    f"SELECT 'e', h, t, k, a::VARCHAR FROM folded_edges) TO {sql_literal(tmp)} (FORMAT parquet)")
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def read_snapshot(snapshot: Path, graph: nx.MultiDiGraph, memory_limit: str | None, batch: int = 50_000) -> None:
    """Add the snapshot's nodes and edges to `graph` (one scan, so one version of the file)."""
    with tempfile.TemporaryDirectory(prefix="smb-graph-") as spill, _connection(memory_limit, Path(spill)) as con:
        cursor = con.execute(f"SELECT kind, head, tail, key, attrs FROM read_parquet({sql_literal(snapshot)})")
        while rows := cursor.fetchmany(batch):
            graph.add_nodes_from((head, json.loads(attrs)) for kind, head, _, _, attrs in rows if kind == "n")
            graph.add_edges_from((head, tail, key, json.loads(attrs))
                                 for kind, head, tail, key, attrs in rows if kind == "e")


def nodes_in_snapshot(snapshot: Path, nodes: set[str], memory_limit: str | None) -> set[str]:
    """Those of `nodes` the snapshot has, without reading the rest of it into memory."""
    with tempfile.TemporaryDirectory(prefix="smb-graph-") as spill, _connection(memory_limit, Path(spill)) as con:
        rows = con.execute(f"SELECT head FROM read_parquet({sql_literal(snapshot)}) WHERE kind = 'n' "
                           "AND head IN (SELECT unnest(?::VARCHAR[]))", [sorted(nodes)]).fetchall()
    return {row[0] for row in rows}


@contextmanager
def _connection(memory_limit: str | None, spill: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    config = {"temp_directory": str(spill / "duckdb.tmp"), "preserve_insertion_order": False}
    if memory_limit:
        config["memory_limit"] = memory_limit
    con = duckdb.connect(":memory:", config=config)
    con.execute(QUIET)
    try:
        yield con
    finally:
        con.close()
