"""Graph compaction memory: DuckDB folding the Parquet snapshot and log vs loading the graph in networkx.

Writers (ingest runs, evolution cycles) fold the graph's log into its snapshot whenever the log outgrows
it. With a pickled networkx snapshot that meant loading the whole graph into the writer; now DuckDB folds
them in SQL. This builds a graph the size of a 10,000-document bank (about 600,000 nodes and 900,000
edges; node attributes as `Bank` writes them) as a snapshot plus a log of the same order, then in
fresh child processes measures: the fold (`GraphStore.compact`, with the default DuckDB memory limit
and with a small one, where DuckDB spills to disk), the old compaction (load into networkx, pickle), and
a reader loading the graph into networkx. Peak RSS is per child.

    python bench/graph.py [--nodes 600000] [--edges 900000]
"""

from __future__ import annotations

import argparse
import importlib
import pickle
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import in_child  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _build(directory: Path, nodes: int, edges: int, seed: int = 7) -> None:
    """Half the writes folded into a snapshot, the other half left in the log (a compaction is due)."""
    from smb_core.stores.graph import GraphStore

    rng = random.Random(seed)
    kinds = [("concept", "concept"), ("entity", "entity"), ("claim", "claim"), ("claim", "relationship")]
    store = GraphStore(directory)
    store._maybe_compact = lambda: None  # compacted once, at half way, below
    batch = 2_000
    for start in range(0, nodes, batch):
        ids = range(start, min(nodes, start + batch))
        node_rows = []
        for i in ids:
            node, mtype = rng.choice(kinds)
            node_rows.append((f"obj-{i:08x}", {"type": node, "mtype": mtype, "status": "active", "layer": 1,
                                               "title": f"A memory object title of ordinary length, number {i}"}))
        edge_rows = [(f"obj-{rng.choice(ids):08x}", f"obj-{rng.randrange(nodes):08x}", f"edge-{start}-{j}",
                      {"edge_type": rng.choice(["references", "supports", "related_to"]), "weight": 1.0})
                     for j in range(round(len(ids) * edges / nodes))]
        store.append(nodes=node_rows, edges=edge_rows)
        if start < nodes // 2 <= start + batch:
            store.compact()


def _fold(directory: str, memory_limit: str) -> dict:
    from smb_core.stores.graph import GraphStore

    started = time.perf_counter()
    store = GraphStore(Path(directory), memory_limit=memory_limit)
    store.compact()
    return {"seconds": time.perf_counter() - started, "rss_mb": _rss_mb(), "counts": store.counts()}


def _networkx(directory: str, dump: bool) -> dict:
    from smb_core.stores.graph import GraphStore

    started = time.perf_counter()
    graph = GraphStore(Path(directory)).ensure_loaded()
    if dump:  # what the old compaction wrote
        size = len(pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL))
    else:
        size = 0
    return {"seconds": time.perf_counter() - started, "rss_mb": _rss_mb(),
            "counts": (graph.number_of_nodes(), graph.number_of_edges()), "pickle_bytes": size}


def _baseline() -> dict:
    importlib.import_module("smb_core.stores.graph")  # the imports every side pays
    return {"rss_mb": _rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=600_000)
    parser.add_argument("--edges", type=int, default=900_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smb-bench-graph-") as work:
        built = Path(work) / "built"
        started = time.perf_counter()
        _build(built, args.nodes, args.edges)
        snapshot, log = (built / "graph.parquet").stat().st_size, (built / "graph.log").stat().st_size
        print(f"graph of {args.nodes:,} nodes / {args.edges:,} edges written in {time.perf_counter() - started:.0f} s: "
              f"snapshot {snapshot / 1e6:.0f} MB (Parquet), log {log / 1e6:.0f} MB")
        base = in_child(_baseline)
        rows = []
        for label, target, extra in [("fold in DuckDB (compact, ours; 2 GB limit)", _fold, ("2GB",)),
                                     ("the same, DuckDB limited to 128 MB", _fold, ("128MB",)),
                                     ("load into networkx + pickle (old compact)", _networkx, (True,)),
                                     ("load into networkx (a reader)", _networkx, (False,))]:
            copy = Path(work) / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(built, copy)
            rows.append((label, in_child(target, str(copy), *extra)))
            rows[-1][1]["snapshot_bytes"] = (copy / "graph.parquet").stat().st_size
        print(f"imports alone: peak RSS {base['rss_mb']:.0f} MB")
        print(f"{'':44} {'seconds':>8} {'peak RSS MB':>12} {'above imports':>14}  nodes / edges")
        for label, r in rows:
            print(f"{label:44} {r['seconds']:8.1f} {r['rss_mb']:12.0f} {r['rss_mb'] - base['rss_mb']:14.0f}  "
                  f"{r['counts'][0]:,} / {r['counts'][1]:,}")
        print(f"the whole graph as a Parquet snapshot: {rows[0][1]['snapshot_bytes'] / 1e6:.0f} MB; "
              f"pickled (the old snapshot): {rows[2][1]['pickle_bytes'] / 1e6:.0f} MB")
        fold, old = (rows[0][1]["rss_mb"] - base["rss_mb"], rows[2][1]["rss_mb"] - base["rss_mb"])
        if old > 0:  # a tiny graph stays within the imports' own peak
            print(f"peak RSS above imports, fold / old compaction: {fold / old:.2f}")


if __name__ == "__main__":
    main()
