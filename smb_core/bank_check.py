"""The whole-bank consistency check (`smb status`): every object in all four stores, without stopping writers.

At 50,000 documents (6.9 million objects) the check takes minutes. Run inside one read session it held
the bank's shared lock all that time, and an evolution cycle running beside it failed: its writer gave
up after `SMB_LOCK_TIMEOUT_SECONDS`. So the check copies what it needs from DuckDB in one short read
session (a listing of the objects, streamed back a batch at a time, so memory does not grow with the
bank), takes the lock again only briefly per batch for Chroma (not safe across processes), and reads
files and the graph (whose log and snapshot a writer only appends to or replaces whole) with no lock.

A writer may run meanwhile. Then an object the listing names can have changed (a new text drops its
old vector): what the check finds missing is checked again, in one read session, before it is reported,
and the store counts, which the writer moved, are shown but not compared.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from smb_core.stores.metadata import sql_literal

if TYPE_CHECKING:
    from smb_core.bank import Bank

#: Objects read (and checked against Chroma under one brief lock) at once.
BATCH = 100_000
#: Missing objects a report names; it counts them all.
SHOWN = 20
#: Missing objects of each kind checked again when a writer ran during the check.
RECHECKED = 10_000


def check_whole_bank(bank: Bank) -> dict[str, Any]:
    """`Bank.check_consistency()` of every object."""
    bank.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".check-", dir=bank.root) as work:
        listing = Path(work) / "objects.parquet"
        with bank.reading() as db:
            generation = bank.generation
            edge_rows = db.sql("SELECT count(*) FROM edges")[0][0]
            texts = db.sql("SELECT count(DISTINCT NULLIF(embedding_id, '')) FROM objects")[0][0]
            db.con.execute("COPY (SELECT id, file_path, embedding_id, graph_node_id FROM objects) "
                           f"TO {sql_literal(listing)} (FORMAT parquet)")
            chroma_vectors = bank.vectors.count()
        with _reader(bank, Path(work)) as con:
            checked, missing_files, missing_vectors = 0, [], []
            for batch in _batches(con, f"SELECT id, file_path, embedding_id FROM read_parquet({sql_literal(listing)})"):
                checked += len(batch)
                missing_files += [i for i, path, _ in batch if not (bank.root / path).is_file()][:RECHECKED]
                keys = sorted({key for *_, key in batch if key})
                with bank.lock.shared():
                    in_chroma = bank.vectors.existing(keys) if keys else set()
                missing_vectors += [i for i, _, key in batch if key not in in_chroma][:RECHECKED]
            node_batches = ([row[0] for row in batch] for batch in _batches(
                con, f"SELECT graph_node_id FROM read_parquet({sql_literal(listing)}) WHERE graph_node_id IS NOT NULL"))
            nodes, edges, missing_nodes, absent = bank.graph.audit(node_batches, RECHECKED)
    markdown_files = bank.markdown.count() - bank.markdown.count(layer=0)
    changed = bank.current_generation() != generation
    if changed and (missing_files or missing_vectors or absent):
        still = bank.check_consistency(sorted({*missing_files, *missing_vectors, *missing_nodes}))
        # (an object deleted meanwhile is in none of the stores now: not a fault)
        missing_files, missing_vectors, missing_nodes = (still[key] for key in (
            "missing_markdown", "missing_vectors", "missing_graph_nodes"))
        absent = len(missing_nodes) + max(0, absent - RECHECKED)  # those past the cap stay counted
    problems = len(missing_files) + len(missing_vectors) + absent
    counts_agree = markdown_files == checked and edges == edge_rows
    return {
        "checked": checked,
        "missing_markdown": missing_files[:SHOWN],
        "missing_vectors": missing_vectors[:SHOWN],
        "missing_graph_nodes": missing_nodes[:SHOWN],  # a graph node's id is its object's
        "missing_rows": [],
        "markdown_files": markdown_files,
        "duckdb_rows": checked,
        "chroma_vectors": chroma_vectors,
        "distinct_texts": texts,
        # vectors of texts no object has (a writer died between Chroma and DuckDB): harmless to recall
        "unused_vectors": max(0, chroma_vectors - texts),
        "graph_nodes": nodes,
        "graph_edges": edges,
        "duckdb_edges": edge_rows,
        "changed_during_check": changed,
        "consistent": not problems and (changed or counts_agree),
    }


def _reader(bank: Bank, work: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB of its own for the listing (the bank's file stays free for writers)."""
    config = {"temp_directory": str(work / "duckdb.tmp")}
    if bank.settings.duckdb_memory_limit:
        config["memory_limit"] = bank.settings.duckdb_memory_limit
    return duckdb.connect(":memory:", config=config)


def _batches(con: duckdb.DuckDBPyConnection, query: str) -> Iterator[list[tuple]]:
    result = con.cursor().execute(query)
    while rows := result.fetchmany(BATCH):
        yield rows
