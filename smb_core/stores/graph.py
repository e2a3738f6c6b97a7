"""The typed knowledge graph: a networkx MultiDiGraph persisted as a snapshot plus an append-only log.

Appending one JSON line per write batch keeps writes proportional to the batch (not to the graph), and
a process that has not read the graph (an ingest run, an evolution cycle) appends without loading it;
a torn last line from a crashed writer is simply ignored. When the log outgrows the snapshot, a writer
has DuckDB fold it into a new snapshot (graph_snapshot.py: atomic rename, and no networkx graph in the
writer). Replaying is idempotent, so a crash between the two steps loses nothing. Readers catch up by
replaying only the lines they have not seen.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import networkx as nx

from smb_core.fsutil import atomic_write_bytes
from smb_core.model import EdgeType, NodeType, edge_type, node_type
from smb_core.stores import graph_snapshot

#: The log is folded into the snapshot once it is this many times the snapshot's size. The Parquet
#: snapshot is compressed: the same graph as log lines takes about 7.5 times its bytes (bench/graph.py),
#: so this folds about as often as the pickled snapshot did (when the log outgrew it).
SNAPSHOT_TO_LOG = 8


class GraphStore:
    def __init__(self, directory: Path, memory_limit: str | None = None) -> None:
        self.directory = directory
        self.snapshot_path = directory / "graph.parquet"
        self.legacy_snapshot_path = directory / "graph.pickle"  # banks made before the Parquet snapshot
        self.log_path = directory / "graph.log"
        self.memory_limit = memory_limit  # of DuckDB when it folds or reads the snapshot
        self.graph = nx.MultiDiGraph()
        self._loaded = False
        self._log_offset = 0
        self._log_inode: int | None = None

    # ---- persistence ----------------------------------------------------------------------

    def ensure_loaded(self) -> nx.MultiDiGraph:
        """Load on first use, then replay only new log lines (cheap when nothing changed)."""
        if not self._loaded:
            self._load_snapshot()
        self._replay_log()
        return self.graph

    def _load_snapshot(self) -> None:
        """Read the snapshot; the log's inode is taken first, so that a compaction that replaces both
        while we read is noticed by `_replay_log` (which then reads them again)."""
        self._log_inode = _inode(self.log_path)
        self.graph = nx.MultiDiGraph()
        if self.snapshot_path.exists():
            graph_snapshot.read_snapshot(self.snapshot_path, self.graph, self.memory_limit)
        elif self.legacy_snapshot_path.exists():
            with self.legacy_snapshot_path.open("rb") as handle:
                self.graph = pickle.load(handle)
        self._log_offset, self._loaded = 0, True

    def _replay_log(self) -> None:
        if not self.log_path.exists():
            return
        stat = self.log_path.stat()
        while self._log_inode is not None and (stat.st_ino != self._log_inode or stat.st_size < self._log_offset):
            self._load_snapshot()  # another process compacted: start again from its snapshot
            stat = self.log_path.stat()
        self._log_inode = stat.st_ino
        with self.log_path.open("rb") as handle:
            handle.seek(self._log_offset)
            data = handle.read()
        complete = data.rfind(b"\n") + 1  # a torn last line (crashed writer) is ignored
        for line in data[:complete].splitlines():
            if line.strip():
                self._apply(json.loads(line))
        self._log_offset += complete

    def append(self, nodes: Iterable[tuple[str, dict[str, Any]]] = (),
               edges: Iterable[tuple[str, str, str, dict[str, Any]]] = (),
               remove_edges: Iterable[tuple[str, str, str]] = ()) -> None:
        """Durably add/update nodes and edges (node and edge types are validated first)."""
        batch = {
            "n": [[n, _checked_node(a)] for n, a in nodes],
            "e": [[h, t, k, _checked_edge(a)] for h, t, k, a in edges],
            "r": [list(x) for x in remove_edges],
        }
        if not (batch["n"] or batch["e"] or batch["r"]):
            return
        if self._loaded:
            self._replay_log()  # catch up with other writers, so our copy stays complete
        self.directory.mkdir(parents=True, exist_ok=True)
        line = json.dumps(batch, ensure_ascii=False).encode("utf-8") + b"\n"
        with self.log_path.open("a+b") as handle:
            end = handle.seek(0, os.SEEK_END)
            complete = self._log_offset if self._loaded else _complete_lines_end(handle, end)
            if end > complete:
                # A torn last line of a crashed writer: cut it off, or our line would be glued to it.
                handle.truncate(complete)
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if self._loaded:  # a process that has not read the graph yet only appends: it reads the log when it does
            self._apply(batch)
            self._log_offset += len(line)
            self._log_inode = self.log_path.stat().st_ino
        self._maybe_compact()

    def _apply(self, batch: dict[str, list]) -> None:
        for node, attrs in batch.get("n", []):
            if self.graph.has_node(node):
                self.graph.nodes[node].update(attrs)
            else:
                self.graph.add_node(node, **attrs)
        for head, tail, key, attrs in batch.get("e", []):
            self.graph.add_edge(head, tail, key=key, **attrs)
        for head, tail, key in batch.get("r", []):
            if self.graph.has_edge(head, tail, key):
                self.graph.remove_edge(head, tail, key)

    def _maybe_compact(self) -> None:
        log_size = self.log_path.stat().st_size
        snapshot_size = self.snapshot_path.stat().st_size if self.snapshot_path.exists() else 0
        if log_size > max(4 * 1024 * 1024, SNAPSHOT_TO_LOG * snapshot_size):
            self.compact()

    def compact(self) -> None:
        """Fold the log into a new snapshot; the caller holds the bank's writer lock. DuckDB does the
        folding, so a process that has not read the graph does not load it here either (it did with a
        pickled snapshot: about 2 GB at 10,000 documents, for a moment, in every ingest run and cycle)."""
        if self._loaded:
            self._replay_log()  # another writer's lines: ours to keep in step, as the log is emptied below
        with self._folded() as con:
            graph_snapshot.write_snapshot(con, self.snapshot_path)
        atomic_write_bytes(self.log_path, b"", durable=True)
        self.legacy_snapshot_path.unlink(missing_ok=True)
        self._log_offset, self._log_inode = 0, self.log_path.stat().st_ino

    # ---- queries --------------------------------------------------------------------------

    def has_node(self, node: str) -> bool:
        return self.ensure_loaded().has_node(node)

    def missing_nodes(self, nodes: Iterable[str]) -> set[str]:
        """The given nodes the graph does not have.

        A process that has not read the graph looks for them in the log first, from its end backwards,
        where a run's own writes are: an ingest run checking its objects this way reads a few MB instead
        of loading every node of the bank (30 s and about 2 GB at 10,000 documents, growing with the
        bank). Only nodes not found in the log (folded into the snapshot, or really missing) cost a load."""
        wanted = set(nodes)
        if wanted and not self._loaded and self.log_path.exists():
            for line in _complete_lines_backwards(self.log_path):
                wanted.difference_update(node for node, _ in json.loads(line).get("n", []))
                if not wanted:
                    break
        if wanted and not self._loaded and self.snapshot_path.exists():
            inode = _inode(self.log_path)
            found = graph_snapshot.nodes_in_snapshot(self.snapshot_path, wanted, self.memory_limit)
            if inode == _inode(self.log_path):  # no compaction moved nodes from the log meanwhile
                return wanted - found
        if wanted:
            graph = self.ensure_loaded()
            wanted = {node for node in wanted if not graph.has_node(node)}
        return wanted

    def counts(self) -> tuple[int, int]:
        """(nodes, edges), without building the graph in a process that has not read it."""
        if self._loaded:
            graph = self.ensure_loaded()
            return graph.number_of_nodes(), graph.number_of_edges()
        with self._folded() as con:
            return graph_snapshot.folded_counts(con)

    def audit(self, node_batches: Iterable[Sequence[str]], shown: int = 20) -> tuple[int, int, list[str], int]:
        """(nodes, edges, the first `shown` of the given nodes the graph lacks, how many it lacks): the
        whole-bank check. A process that has not read the graph compares the nodes, given in batches,
        with the folded graph in SQL, so that neither side is held in Python (`missing_nodes` for
        every object of a 50,000-document bank held 6.8 million ids and parsed its 1.4 GB log twice)."""
        if self._loaded:
            graph = self.ensure_loaded()
            missing = sorted(node for batch in node_batches for node in batch if not graph.has_node(node))
            return graph.number_of_nodes(), graph.number_of_edges(), missing[:shown], len(missing)
        with self._folded() as con:
            con.execute("CREATE TEMP TABLE wanted (node VARCHAR)")
            for batch in node_batches:
                con.execute("INSERT INTO wanted SELECT unnest(?::VARCHAR[])", [list(batch)])
            con.execute("CREATE TEMP TABLE absent AS "
                        "SELECT w.node FROM wanted w ANTI JOIN folded_nodes f ON f.h = w.node")
            missing = [row[0] for row in
                       con.execute("SELECT node FROM absent ORDER BY node LIMIT ?", [shown]).fetchall()]
            absent = con.execute("SELECT count(*) FROM absent").fetchone()[0]
            return *graph_snapshot.folded_counts(con), missing, absent

    @contextmanager
    def _folded(self) -> Iterator[Any]:
        """DuckDB holding the graph folded from the log's complete lines and the snapshot (read in that
        order: a compaction in between leaves lines that the new snapshot already has, never a gap).
        Its work files (the flattened log, DuckDB's spill) go beside the graph, not to /tmp, which may be
        memory: at 10,000 documents the flattened log alone is a few hundred MB."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".fold-", dir=self.directory) as work:
            ops = Path(work) / "ops.jsonl"
            with ops.open("w", encoding="utf-8") as handle:
                if self.log_path.exists():
                    graph_snapshot.write_ops(_complete_lines(self.log_path), handle)
                if not self.snapshot_path.exists() and self.legacy_snapshot_path.exists():
                    with self.legacy_snapshot_path.open("rb") as legacy:  # a bank from before the Parquet one
                        graph_snapshot.write_graph_ops(pickle.load(legacy), handle)
            snapshot = self.snapshot_path if self.snapshot_path.exists() else None
            with graph_snapshot.folded(snapshot, ops, self.memory_limit) as con:
                yield con

    def edges_touching(self, nodes: list[str], edge_type: str | None = None) -> list[tuple[str, str, str, str]]:
        """(head, tail, edge type, edge id) of the edges out of, then into, `nodes`, each once: the rows
        `MetadataStore.edges_touching` gives from DuckDB, so that both answer hops the same way."""
        graph = self.ensure_loaded()
        present = [node for node in nodes if graph.has_node(node)]
        rows: dict[tuple[str, str, str], str] = {}
        for head, tail, key, kind in [*graph.out_edges(present, keys=True, data="edge_type"),
                                      *graph.in_edges(present, keys=True, data="edge_type")]:
            if edge_type in (None, kind):
                rows.setdefault((head, tail, key), kind)
        return [(head, tail, kind, key) for (head, tail, key), kind in rows.items()]

    def neighbors(self, node: str, edge_type_filter: str | EdgeType | None = None) -> list[dict[str, Any]]:
        """Adjacent nodes in both directions, with the edge type and direction that joins them."""
        if not self.ensure_loaded().has_node(node):
            return []
        wanted = edge_type(edge_type_filter).value if edge_type_filter else None
        return neighbours_in(self.edges_touching([node], wanted), node)

    def multi_hop(self, node: str, max_hops: int = 3, edge_type_filter: str | EdgeType | None = None,
                  limit: int = 10_000) -> list[list[str]]:
        """Every simple path (as node lists) from `node` of 1..max_hops edges, found breadth first."""
        if not self.ensure_loaded().has_node(node):
            return []
        return multi_hop_over(self.edges_touching, [node], max_hops, edge_type_filter, limit)[node]

    def path(self, a: str, b: str) -> list[str]:
        """A shortest path between two nodes ignoring direction, or [] if none."""
        graph = self.ensure_loaded()
        try:
            return nx.shortest_path(graph.to_undirected(as_view=True), a, b)
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            return []

    def nodes_by_type(self, type_: str | NodeType) -> list[str]:
        wanted = node_type(type_).value
        return sorted(n for n, t in self.ensure_loaded().nodes(data="type") if t == wanted)

    def stats(self) -> dict[str, Any]:
        """Counts by type and weakly connected components; computed in SQL by a process that has not
        read the graph (so an agent asking for them does not load it)."""
        if not self._loaded:
            with self._folded() as con:
                return graph_snapshot.folded_stats(con)
        graph = self.ensure_loaded()
        return {
            "nodes": graph.number_of_nodes(),
            "edges": graph.number_of_edges(),
            "node_types": dict(Counter(t for _, t in graph.nodes(data="type"))),
            "edge_types": dict(Counter(t for *_, t in graph.edges(data="edge_type"))),
            "components": nx.number_weakly_connected_components(graph) if graph.number_of_nodes() else 0,
        }


EdgeRows = Callable[[list[str], str | None], list[tuple[str, str, str, str]]]


def neighbours_in(rows: list[tuple[str, str, str, str]], node: str) -> list[dict[str, Any]]:
    """`GraphStore.neighbors` from (head, tail, edge type, edge id) rows such as
    `MetadataStore.edges_touching` gives: outgoing edges first, then incoming ones."""
    return ([{"id": t, "edge_type": e, "direction": "out", "edge_id": k} for h, t, e, k in rows if h == node]
            + [{"id": h, "edge_type": e, "direction": "in", "edge_id": k} for h, t, e, k in rows if t == node])


def multi_hop_over(edges_touching: EdgeRows, roots: list[str], max_hops: int = 3,
                   edge_type_filter: str | EdgeType | None = None, limit: int = 10_000) -> dict[str, list[list[str]]]:
    """`GraphStore.multi_hop` of each root over an edge table (`MetadataStore.edges_touching`): one
    query per hop for all roots together, and no graph in memory. The paths, in their order, are the graph's."""
    wanted = edge_type(edge_type_filter).value if edge_type_filter else None

    def neighbours_of(nodes: list[str]) -> dict[str, list[str]]:
        adjacent: dict[str, set[str]] = {n: set() for n in nodes}
        for head, tail, _, _ in edges_touching(nodes, wanted):
            for here, there in ((head, tail), (tail, head)):
                if here in adjacent:
                    adjacent[here].add(there)
        return {n: sorted(others) for n, others in adjacent.items()}

    return paths_from(roots, max_hops, limit, neighbours_of)


def shortest_path_over(edges_touching: EdgeRows, a: str, b: str) -> list[str]:
    """A shortest path from `a` to `b` ignoring direction, or [] if none (`GraphStore.path` over an edge
    table): breadth first from both ends, a whole level of the smaller side per query, so that an agent
    asking how two things connect does not load the whole graph. `a == b` is the caller's to answer."""
    depth = ({a: 0}, {b: 0})
    parent: tuple[dict[str, str | None], dict[str, str | None]] = ({a: None}, {b: None})
    frontier = ([a], [b])
    while frontier[0] and frontier[1]:
        side = 0 if len(frontier[0]) <= len(frontier[1]) else 1
        here_set, seen, other = set(frontier[side]), depth[side], depth[1 - side]
        following = []
        for head, tail, _, _ in edges_touching(frontier[side], None):
            for here, there in ((head, tail), (tail, head)):
                if here not in here_set:
                    continue
                if there in other:  # the first meeting is a shortest one: the other side reached it last level
                    half, rest = _walk_back(parent[side], here), _walk_back(parent[1 - side], there)
                    return (half[::-1] + rest) if side == 0 else (rest[::-1] + half)
                if there not in seen:
                    seen[there], parent[side][there] = seen[here] + 1, here
                    following.append(there)
        frontier = (following, frontier[1]) if side == 0 else (frontier[0], following)
    return []


def _walk_back(parent: dict[str, str | None], node: str) -> list[str]:
    path = [node]
    while parent[path[-1]] is not None:
        path.append(parent[path[-1]])
    return path


def paths_from(roots: list[str], max_hops: int, limit: int,
               neighbours_of: Callable[[list[str]], dict[str, list[str]]]) -> dict[str, list[list[str]]]:
    """Each root's simple paths of 1..max_hops edges, breadth first, at most `limit` a root, a node's
    neighbours in the order `neighbours_of` gives them. It is asked for a whole level's nodes (of all
    roots) at once, so that a store answering with SQL makes one query per hop."""
    paths: dict[str, list[list[str]]] = {root: [] for root in roots}
    level = {root: [[root]] for root in roots}
    for _ in range(max_hops):
        level = {root: open_paths for root, open_paths in level.items() if open_paths and len(paths[root]) < limit}
        if not level:
            break
        adjacent = neighbours_of(sorted({path[-1] for open_paths in level.values() for path in open_paths}))
        following: dict[str, list[list[str]]] = {}
        for root, open_paths in level.items():
            found, longer = paths[root], []
            for path in open_paths:
                for hop in adjacent.get(path[-1], []):
                    if hop not in path and len(found) < limit:
                        found.append(path + [hop])
                        longer.append(found[-1])
            following[root] = longer
        level = following
    return paths


def _complete_lines(path: Path, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The log's non-blank complete lines, first first (a torn last line of a crashed writer is skipped)."""
    with path.open("rb") as handle:
        end = _complete_lines_end(handle, handle.seek(0, os.SEEK_END))
        handle.seek(0)
        pending, position = b"", 0
        while position < end:
            lines = (pending + handle.read(min(chunk, end - position))).split(b"\n")
            position = handle.tell()
            pending = lines.pop()
            yield from (line for line in lines if line.strip())
        if pending.strip():
            yield pending


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _complete_lines_backwards(path: Path, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The log's non-blank complete lines, last first (a torn last line of a crashed writer is skipped)."""
    with path.open("rb") as handle:
        position = _complete_lines_end(handle, handle.seek(0, os.SEEK_END))
        pending = b""  # the end of a line whose start lies further back
        while position > 0:
            start = max(0, position - chunk)
            handle.seek(start)
            lines = (handle.read(position - start) + pending).split(b"\n")
            pending = lines.pop(0) if start > 0 else b""
            yield from (line for line in reversed(lines) if line.strip())
            position = start


def _complete_lines_end(handle, end: int, chunk: int = 65536) -> int:
    """The offset just past the log's last newline (0 if none): where its complete lines end."""
    position = end
    while position > 0:
        start = max(0, position - chunk)
        handle.seek(start)
        newline = handle.read(position - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


def _checked_node(attrs: dict[str, Any]) -> dict[str, Any]:
    return {**attrs, "type": node_type(attrs.get("type", "")).value}


def _checked_edge(attrs: dict[str, Any]) -> dict[str, Any]:
    return {**attrs, "edge_type": edge_type(attrs.get("edge_type", "")).value}
