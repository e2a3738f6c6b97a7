"""The four stores on their own: markdown files, the graph (snapshot + log), DuckDB metadata, Chroma vectors."""

from __future__ import annotations

import functools
import os
import pickle
import random
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from smb_core.embed import MiniLMEmbedder, get_embedder, single_threaded
from smb_core.model import (
    CanonicalEntity, Claim, Concept, EdgeType, Entity, EntityKind, ModelError, NodeType, Relationship, SourceDocument, SourceSpan,
    Status, from_markdown,
)
from smb_core.settings import Settings
from smb_core.stores import graph as graph_module
from smb_core.stores import graph_snapshot
from smb_core.stores.graph import GraphStore
from smb_core.stores.markdown import LAYER_FOLDERS, MarkdownStore, memory_folders
from smb_core.stores import metadata as metadata_module
from smb_core.stores.metadata import MetadataStore
from smb_core.stores.vectors import COLLECTION, HNSW, VectorStore, vector_key

# ---- markdown -------------------------------------------------------------------------------


def _concept(i: int, **kw) -> Concept:
    return Concept(id=f"con-{i:03d}", title=f"concept {i}", **kw)


def test_markdown_store_writes_readable_files_in_layer_folders(tmp_path: Path):
    store = MarkdownStore(tmp_path)
    store.create_layout()
    for layer, folders in LAYER_FOLDERS.items():
        for folder in folders:
            assert (tmp_path / f"layer-{layer}" / folder).is_dir()
    assert memory_folders() <= {f"layer-{layer}/{f}" for layer, fs in LAYER_FOLDERS.items() for f in fs}
    obj = _concept(1, body="hello\n", created=datetime(2024, 1, 1, tzinfo=timezone.utc))
    path = store.write(obj)
    assert path == tmp_path / "layer-1/concepts/con-001.md"
    assert store.read("layer-1/concepts/con-001.md") == obj
    assert store.exists("layer-1/concepts/con-001.md") and not store.exists("layer-1/concepts/nope.md")


def test_markdown_atomic_writes_leave_no_temp_files(tmp_path: Path):
    store = MarkdownStore(tmp_path)
    for round_ in range(3):
        for i in range(30):
            store.write(_concept(i, description=f"round {round_}"))
    folder = tmp_path / "layer-1" / "concepts"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f"con-{i:03d}.md" for i in range(30)]
    assert store.count() == 30 and store.count(layer=1) == 30 and store.count(layer=0) == 0
    assert from_markdown((folder / "con-007.md").read_text()).description == "round 2"


def test_markdown_failed_write_keeps_old_file_and_removes_its_temp_file(tmp_path: Path, monkeypatch):
    store = MarkdownStore(tmp_path)
    store.write(_concept(1, description="old"))
    calls = []

    def failing_replace(src, dst):
        calls.append((src, dst))
        raise OSError("disk full (injected)")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="injected"):
        store.write(_concept(1, description="new"))
    monkeypatch.undo()
    assert len(calls) == 1 and Path(calls[0][0]).name.startswith(".con-001.md.")
    assert [p.name for p in (tmp_path / "layer-1/concepts").iterdir()] == ["con-001.md"]
    assert store.read("layer-1/concepts/con-001.md").description == "old"


def test_markdown_count_skips_leftover_temp_files(tmp_path: Path):
    store = MarkdownStore(tmp_path)
    store.write(_concept(1))
    (tmp_path / "layer-1/concepts/.con-002.md.abc.tmp").write_text("partial")
    (tmp_path / "layer-1/concepts/.con-003.md").write_text("hidden")
    assert store.count() == 1
    assert [p.name for p in store.iter_paths()] == ["con-001.md"]


# ---- graph ------------------------------------------------------------------------------------


def _node(type_: str, title: str = "") -> dict:
    return {"type": type_, "title": title}


def _edge(type_: str) -> dict:
    return {"edge_type": type_, "weight": 1.0}


def _small_graph(directory: Path) -> GraphStore:
    """a -supports-> b -extends-> c -references-> d ; a -references-> e ; f isolated."""
    graph = GraphStore(directory)
    graph.append(nodes=[("a", _node("claim")), ("b", _node("claim")), ("c", _node("concept")),
                        ("d", _node("entity")), ("e", _node("entity")), ("f", _node("insight"))])
    graph.append(edges=[("a", "b", "e1", _edge("supports")), ("b", "c", "e2", _edge("extends")),
                        ("c", "d", "e3", _edge("references")), ("a", "e", "e4", _edge("references"))])
    return graph


def test_graph_persists_across_instances_via_snapshot_and_log(tmp_path: Path):
    directory = tmp_path / "graph"
    writer = _small_graph(directory)
    writer.compact()
    assert writer.snapshot_path.exists() and writer.log_path.read_bytes() == b""
    writer.append(nodes=[("g", _node("narrative", "after snapshot"))], edges=[("g", "a", "e5", _edge("explains"))])
    assert writer.log_path.read_bytes().count(b"\n") == 1
    fresh = GraphStore(directory)
    stats = fresh.stats()
    assert (stats["nodes"], stats["edges"]) == (7, 5)
    assert fresh.ensure_loaded().nodes["g"] == {"type": "narrative", "title": "after snapshot"}
    assert fresh.neighbors("g") == [{"id": "a", "edge_type": "explains", "direction": "out", "edge_id": "e5"}]


def test_graph_node_attributes_are_updated_not_duplicated(tmp_path: Path):
    graph = GraphStore(tmp_path / "g")
    graph.append(nodes=[("a", {"type": "claim", "status": "active", "title": "t"})])
    graph.append(nodes=[("a", {"type": "claim", "status": "superseded"})])
    graph.append(edges=[("a", "b", "k", _edge("supports"))])
    graph.append(edges=[("a", "b", "k", {"edge_type": "supports", "weight": 0.25})])
    fresh = GraphStore(tmp_path / "g").ensure_loaded()
    assert fresh.number_of_nodes() == 2 and fresh.number_of_edges() == 1
    assert fresh.nodes["a"] == {"type": "claim", "status": "superseded", "title": "t"}
    assert fresh.edges["a", "b", "k"]["weight"] == 0.25


def test_graph_ignores_a_torn_last_log_line(tmp_path: Path):
    directory = tmp_path / "graph"
    _small_graph(directory)
    with (directory / "graph.log").open("ab") as handle:  # a writer died mid-line
        handle.write(b'{"n": [["torn", {"type": "conc')
    fresh = GraphStore(directory)
    assert fresh.stats()["nodes"] == 6 and not fresh.has_node("torn")


def test_graph_append_after_a_torn_line_keeps_the_log_readable(tmp_path: Path):
    directory = tmp_path / "graph"
    _small_graph(directory)
    with (directory / "graph.log").open("ab") as handle:
        handle.write(b'{"n": [["torn", {"type": "conc')
    writer = GraphStore(directory)
    writer.append(nodes=[("h", _node("concept"))], edges=[("h", "a", "e9", _edge("related_to"))])
    writer.append(nodes=[("i", _node("concept"))])
    assert writer.has_node("h") and writer.has_node("i")
    fresh = GraphStore(directory)
    assert sorted(fresh.ensure_loaded().nodes) == ["a", "b", "c", "d", "e", "f", "h", "i"]
    assert fresh.stats()["edges"] == 5


def test_graph_append_by_a_process_that_has_not_read_it_does_not_load_it(tmp_path: Path):
    directory = tmp_path / "graph"
    _small_graph(directory).compact()
    with (directory / "graph.log").open("ab") as handle:  # a torn line longer than one read-back chunk
        handle.write(b'{"n": [["torn", {"title": "' + b"x" * 200_000)
    writer = GraphStore(directory)
    writer.append(nodes=[("h", _node("concept"))], edges=[("h", "a", "e9", _edge("related_to"))])
    assert writer.graph.number_of_nodes() == 0  # appended to the log only: the snapshot was not read
    assert writer.log_path.stat().st_size < 1000  # the torn line was cut off
    assert sorted(writer.ensure_loaded().nodes) == ["a", "b", "c", "d", "e", "f", "h"]
    assert writer.stats()["edges"] == 5


def test_graph_missing_nodes_reads_the_log_back_then_queries_the_snapshot_without_loading_it(tmp_path: Path,
                                                                                              monkeypatch):
    directory = tmp_path / "graph"
    _small_graph(directory).compact()  # a..f are in the snapshot only
    writer = GraphStore(directory)
    for k in range(300):  # lines longer than the read-back chunk patched below, and many of them
        writer.append(nodes=[(f"n{k}-{j}", _node("claim", "t" * 40)) for j in range(3)])
    with (directory / "graph.log").open("ab") as handle:  # a writer died mid-line
        handle.write(b'{"n": [["torn", {"type": "conc')
    monkeypatch.setattr(graph_module, "_complete_lines_backwards",
                        functools.partial(graph_module._complete_lines_backwards, chunk=97))
    reader = GraphStore(directory)
    assert reader.missing_nodes(["n299-2", "n0-0", "n150-1"]) == set()
    assert not reader._loaded  # found in the log: the snapshot was not read
    assert reader.missing_nodes(["n7-1", "a", "torn", "nowhere"]) == {"torn", "nowhere"}
    assert not reader._loaded  # "a" is only in the snapshot, found there by DuckDB; a torn line never counts
    assert reader.missing_nodes(["f", "n3-0", "zzz"]) == {"zzz"}
    assert reader.ensure_loaded().has_node("a") and reader.missing_nodes(["a", "zzz"]) == {"zzz"}


def test_graph_compaction_keeps_everything_and_readers_catch_up(tmp_path: Path):
    directory = tmp_path / "graph"
    writer = _small_graph(directory)
    writer.append(remove_edges=[("a", "e", "e4")])
    reader = GraphStore(directory)
    before = reader.stats()
    assert (before["nodes"], before["edges"]) == (6, 3)
    writer.compact()
    writer.append(nodes=[("z", _node("abstraction"))])
    assert GraphStore(directory).stats() == {**before, "nodes": 7,
                                             "node_types": {**before["node_types"], "abstraction": 1},
                                             "components": before["components"] + 1}
    assert reader.has_node("z")  # the reader notices the new log file and reloads from the snapshot
    assert reader.stats()["edges"] == 3 and not reader.ensure_loaded().has_edge("a", "e")


def _random_batches(seed: int, count: int) -> list[dict]:
    """Write batches that update node attributes, add, remove and add edges again, and name nodes only
    through edges: everything the snapshot's fold has to get right."""
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(12)]
    unnamed = [f"x{i}" for i in range(4)]  # never written as nodes: only an edge's tail
    types = ["claim", "concept", "entity", "insight"]
    batches = []
    for _ in range(count):
        batches.append({
            "n": [(rng.choice(nodes), {"type": rng.choice(types), **({"title": f"t{rng.random():.3f}"}
                                                                     if rng.random() < 0.5 else {})})
                  for _ in range(rng.randint(0, 4))],
            "e": [(rng.choice(nodes), rng.choice(nodes + unnamed), f"k{rng.randint(0, 3)}",
                   {"edge_type": rng.choice(["supports", "extends"]), "weight": rng.randint(1, 9) / 10})
                  for _ in range(rng.randint(0, 4))],
            "r": [(rng.choice(nodes), rng.choice(nodes + unnamed), f"k{rng.randint(0, 3)}")
                  for _ in range(rng.randint(0, 3))],
        })
    return batches


def _as_data(graph) -> tuple[dict, dict]:
    return dict(graph.nodes(data=True)), {(h, t, k): a for h, t, k, a in graph.edges(keys=True, data=True)}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_graph_snapshot_folded_by_duckdb_equals_replaying_every_write(tmp_path: Path, seed: int):
    reference = GraphStore(tmp_path / "reference")  # networkx replaying the writes in memory
    reference._loaded = True
    store = GraphStore(tmp_path / "graph")
    for number, batch in enumerate(_random_batches(seed, 120)):
        reference._apply({"n": [[n, a] for n, a in batch["n"]], "e": [[*e] for e in batch["e"]],
                          "r": [[*r] for r in batch["r"]]})
        if number % 2:  # one log line: its nodes, then its edges, then its removals
            store.append(nodes=batch["n"], edges=batch["e"], remove_edges=batch["r"])
        else:
            store.append(nodes=batch["n"], edges=batch["e"])
            store.append(remove_edges=batch["r"])
        if number % 37 == 36:
            store.compact()  # folds the log into the snapshot of the compactions before
    last = {"n": [], "e": [["n0", "n1", "k9", _edge("supports")]], "r": [["n0", "n1", "k9"]]}  # added, then removed
    reference._apply(last)
    store.append(edges=[tuple(last["e"][0])], remove_edges=[tuple(last["r"][0])])
    assert not store._loaded and store.snapshot_path.exists() and store.log_path.stat().st_size > 0
    expected = _as_data(reference.graph)
    assert GraphStore(tmp_path / "graph").counts() == (len(expected[0]), len(expected[1]))
    assert _as_data(GraphStore(tmp_path / "graph").ensure_loaded()) == expected
    assert GraphStore(tmp_path / "graph").stats() == reference.stats()  # in SQL, components included
    store.compact()
    assert store.log_path.stat().st_size == 0
    fresh = GraphStore(tmp_path / "graph")
    assert fresh.counts() == (len(expected[0]), len(expected[1])) and not fresh._loaded
    assert _as_data(fresh.ensure_loaded()) == expected


def test_graph_from_a_pickled_snapshot_is_read_and_folded_into_parquet(tmp_path: Path):
    """Banks made before the Parquet snapshot keep their graph: read as before, converted on compaction."""
    directory = tmp_path / "graph"
    old = _small_graph(directory)
    old.ensure_loaded()
    (directory / "graph.pickle").write_bytes(pickle.dumps(old.graph))
    (directory / "graph.log").write_bytes(b"")
    GraphStore(directory).append(nodes=[("g", _node("concept"))], remove_edges=[("a", "e", "e4")])
    expected = _as_data(GraphStore(directory).ensure_loaded())
    assert "g" in expected[0] and ("a", "b", "e1") in expected[1] and ("a", "e", "e4") not in expected[1]
    assert GraphStore(directory).counts() == (7, 3)
    GraphStore(directory).compact()
    assert not (directory / "graph.pickle").exists() and (directory / "graph.parquet").exists()
    assert _as_data(GraphStore(directory).ensure_loaded()) == expected


def test_shortest_path_over_an_edge_table_is_as_short_as_networkx_finds():
    """`shortest_path_over` (what `MemoryBank.path` runs against DuckDB's edge table) on random graphs:
    as long as networkx's shortest path, along existing edges, between the right ends; [] if none."""
    rng = random.Random(11)
    for _ in range(300):
        nodes = [f"n{i}" for i in range(rng.randint(2, 25))]
        edges = [(rng.choice(nodes), rng.choice(nodes), "related_to", f"e{i:03d}") for i in range(rng.randint(0, 40))]

        def touching(frontier: list[str], _edge_type: str | None) -> list[tuple[str, str, str, str]]:
            return [e for e in edges if e[0] in frontier or e[1] in frontier]  # by edge id, as DuckDB gives them

        undirected = nx.Graph([(h, t) for h, t, _, _ in edges])
        undirected.add_nodes_from(nodes)
        a, b = rng.sample(nodes, 2)
        found = graph_module.shortest_path_over(touching, a, b)
        if not nx.has_path(undirected, a, b):
            assert found == []
            continue
        assert len(found) == nx.shortest_path_length(undirected, a, b) + 1 and (found[0], found[-1]) == (a, b)
        assert all(undirected.has_edge(x, y) for x, y in zip(found, found[1:]))


def test_graph_compacts_by_itself_when_the_log_outgrows_the_snapshot(tmp_path: Path):
    directory = tmp_path / "graph"
    graph = GraphStore(directory)
    graph.append(nodes=[("small", _node("concept"))])
    assert not graph.snapshot_path.exists()
    graph.append(nodes=[("big", _node("concept", "x" * (4 * 1024 * 1024 + 1)))])  # log > 4 MiB > snapshot
    assert graph.snapshot_path.exists() and graph.log_path.stat().st_size == 0
    assert graph.graph.number_of_nodes() == 0  # it had not read the graph: it does not keep it either
    graph.append(nodes=[("after", _node("entity"))])
    assert graph.log_path.stat().st_size > 0
    fresh = GraphStore(directory)
    assert sorted(fresh.ensure_loaded().nodes) == ["after", "big", "small"]
    assert len(fresh.ensure_loaded().nodes["big"]["title"]) == 4 * 1024 * 1024 + 1
    fresh.compact()
    assert fresh.graph.number_of_nodes() == 3  # a reader keeps the graph it had read


def test_graph_neighbors_both_directions_with_edge_type_filter(tmp_path: Path):
    graph = _small_graph(tmp_path / "g")
    assert sorted((n["id"], n["edge_type"], n["direction"]) for n in graph.neighbors("b")) == [
        ("a", "supports", "in"), ("c", "extends", "out")]
    assert graph.neighbors("a", "references") == [
        {"id": "e", "edge_type": "references", "direction": "out", "edge_id": "e4"}]
    assert graph.neighbors("a", EdgeType.EXTENDS) == []
    assert graph.neighbors("missing") == []
    assert graph.neighbors("f") == []
    with pytest.raises(ModelError, match="unknown edge type 'likes'"):
        graph.neighbors("a", "likes")


def test_graph_multi_hop_returns_every_path_up_to_max_hops(tmp_path: Path):
    graph = _small_graph(tmp_path / "g")
    assert graph.multi_hop("a", max_hops=1) == [["a", "b"], ["a", "e"]]
    assert graph.multi_hop("a", max_hops=2) == [["a", "b"], ["a", "e"], ["a", "b", "c"]]
    assert graph.multi_hop("a", max_hops=3) == [["a", "b"], ["a", "e"], ["a", "b", "c"], ["a", "b", "c", "d"]]
    assert graph.multi_hop("a", max_hops=5) == graph.multi_hop("a", max_hops=3)
    assert graph.multi_hop("c", max_hops=2) == [["c", "b"], ["c", "d"], ["c", "b", "a"]]
    assert graph.multi_hop("a", max_hops=3, edge_type_filter="references") == [["a", "e"]]
    assert graph.multi_hop("a", max_hops=3, limit=2) == [["a", "b"], ["a", "e"]]
    assert graph.multi_hop("f", max_hops=3) == [] and graph.multi_hop("nope") == []


def test_graph_multi_hop_finds_all_simple_paths_in_a_cycle(tmp_path: Path):
    graph = GraphStore(tmp_path / "g")
    graph.append(nodes=[(n, _node("concept")) for n in "wxyz"],
                 edges=[("w", "x", "1", _edge("related_to")), ("x", "y", "2", _edge("related_to")),
                        ("y", "w", "3", _edge("related_to")), ("y", "z", "4", _edge("related_to"))])
    paths = graph.multi_hop("w", max_hops=3)
    assert sorted(map(tuple, paths)) == sorted([
        ("w", "x"), ("w", "y"), ("w", "x", "y"), ("w", "y", "x"), ("w", "y", "z"), ("w", "x", "y", "z"),
    ])


def test_graph_path_ignores_direction(tmp_path: Path):
    graph = _small_graph(tmp_path / "g")
    assert graph.path("a", "d") == ["a", "b", "c", "d"]
    assert graph.path("d", "e") == ["d", "c", "b", "a", "e"]
    assert graph.path("a", "f") == []
    assert graph.path("a", "missing") == []


def test_graph_nodes_by_type_and_stats(tmp_path: Path):
    graph = _small_graph(tmp_path / "g")
    assert graph.nodes_by_type("claim") == ["a", "b"]
    assert graph.nodes_by_type(NodeType.ENTITY) == ["d", "e"]
    assert graph.nodes_by_type("narrative") == []
    with pytest.raises(ModelError):
        graph.nodes_by_type("document")
    assert graph.stats() == {
        "nodes": 6, "edges": 4,
        "node_types": {"claim": 2, "concept": 1, "entity": 2, "insight": 1},
        "edge_types": {"supports": 1, "extends": 1, "references": 2},
        "components": 2,
    }
    assert GraphStore(tmp_path / "empty").stats() == {"nodes": 0, "edges": 0, "node_types": {}, "edge_types": {},
                                                      "components": 0}


# ---- DuckDB metadata --------------------------------------------------------------------------

T = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def _source(i: int, version: int, status: Status = Status.ACTIVE, path: str = "doc.md") -> SourceDocument:
    return SourceDocument(id=f"src-{i}", path=path, partition_key=f"key-{path}", sha256=f"{i:064x}",
                          version=version, title=f"Doc {i}", bytes=10, ingested_at=T, status=status,
                          tags=["t"], body="ignored")


def _objects() -> list:
    span = SourceSpan(source_id="src-1", start=0, end=5, line_start=1, line_end=1)
    return [
        Entity(id="ent-1", title="Mara Okafor", entity_kind=EntityKind.PERSON, aliases=["Dr. Okafor"],
               source_ids=["src-1"], source_spans=[span, span.model_copy(update={"start": 7, "end": 9})],
               created=T, modified=T),
        Concept(id="con-1", title="vector index", aliases=["Vector Indexes"], source_ids=["src-1"], created=T,
                modified=T),
        Claim(id="clm-1", title="c", statement="Okafor founded Lumen Labs.", source_ids=["src-1"],
              status=Status.SUPERSEDED, created=T, modified=T),
        Claim(id="clm-2", title="c2", statement="Another claim.", source_ids=["src-2"], created=T, modified=T),
        Relationship(id="rel-1", title="r", head="ent-1", tail="con-1", edge_type="explains", source_ids=["src-1"],
                     created=T, modified=T),
    ]


def test_metadata_store_object_queries(tmp_path: Path):
    db = MetadataStore(tmp_path / "m.duckdb").connect()
    try:
        objects = _objects()
        db.upsert_objects(objects)
        db.upsert_objects(objects[:2])  # upsert again: replaced, not duplicated
        assert db.sql("SELECT count(*) FROM objects")[0][0] == 5
        assert db.get_object("ent-1") == objects[0]
        assert db.get_object("nope") is None
        assert set(db.get_objects(["ent-1", "clm-2", "nope"])) == {"ent-1", "clm-2"}
        assert db.get_objects([]) == {}
        assert [o.id for o in db.list_objects(type="claim")] == ["clm-1", "clm-2"]
        assert [o.id for o in db.list_objects(type="claim", status="active")] == ["clm-2"]
        assert [o.id for o in db.list_objects(layer=1, limit=2, offset=1)] == ["clm-2", "con-1"]  # created, id
        assert [o.id for o in db.list_objects(layer=1, limit=None, offset=3)] == ["ent-1", "rel-1"]  # all the rest
        assert db.count_by_type() == {"claim": 2, "concept": 1, "entity": 1, "relationship": 1}
        assert db.count_by_type(status="active") == {"claim": 1, "concept": 1, "entity": 1, "relationship": 1}
        assert db.object_ids_for_sources(["src-1"]) == ["clm-1", "con-1", "ent-1", "rel-1"]
        assert db.sql("SELECT count(*) FROM spans WHERE object_id = 'ent-1'")[0][0] == 2
        names = set(db.sql("SELECT name, object_id FROM names"))
        assert {("mara okafor", "ent-1"), ("dr okafor", "ent-1"), ("vector index", "con-1"),
                ("vector indexes", "con-1")} <= names
        assert {object_id for _, object_id in names} == {"ent-1", "con-1"}  # only entities and concepts
        row = db.sql("SELECT type, layer, status, file_path, embedding_id, source_ids FROM objects "
                     "WHERE id = 'rel-1'")[0]
        assert row == ("relationship", 1, "active", "layer-1/relationships/rel-1.md", None, ["src-1"])
        db.upsert_objects([CanonicalEntity(id="cen-1", title="Mara Okafor", members=["ent-1", "ent-9"],
                                           source_ids=["src-0", "src-1"], created=T, modified=T)])
        assert db.object_ids_for_sources(["src-1", "src-7"]) == ["cen-1", "clm-1", "con-1", "ent-1", "rel-1"]
        assert db.object_ids_for_sources(["src-0"], "type = 'canonical_entity'") == ["cen-1"]  # its first
        assert db.object_ids_for_sources(["src-1"], "layer >= 2 OR type = 'claim'") == ["cen-1", "clm-1"]
        assert db.object_ids_for_sources(["src-7"]) == db.object_ids_for_sources([]) == []
        many = [f"src-x{i}" for i in range(3000)]  # past INDEX_LOOKUP_MAX: bound as a list, not constants
        assert db.object_ids_for_sources([*many, "src-1"]) == db.object_ids_for_sources(["src-1", "src-7"])
    finally:
        db.close()


def test_metadata_lookups_by_id_lists_short_long_and_quoted(tmp_path: Path, monkeypatch):
    """Short id lists are written as SQL constants (so DuckDB uses its index), long ones bound as one
    parameter; both give the same answer, and a quote in a value is data, not SQL."""
    from smb_core.stores import metadata

    db = MetadataStore(tmp_path / "m.duckdb").connect()
    try:
        db.upsert_objects(_objects())
        asked = ["clm-2", "ent-1", "it's'); DROP TABLE objects; --", "nope"]
        short = db.object_summaries(asked)
        assert sorted(short) == [("clm-2", "claim", "active", "c2"), ("ent-1", "entity", "active", "Mara Okafor")]
        assert sorted(db.spans_of_sources(["src-1", "o'brien"])) == [("src-1", 0, "ent-1"), ("src-1", 7, "ent-1")]
        monkeypatch.setattr(metadata, "INDEX_LOOKUP_MAX", 2)
        assert sorted(db.object_summaries(asked)) == sorted(short)
        assert set(db.get_objects(asked)) == {"clm-2", "ent-1"}
        assert db.sql("SELECT count(*) FROM objects")[0][0] == 5
        for rows_per_probe in (1000, 0):  # a scan of the table (few rows), then index probes in chunks
            monkeypatch.setattr(metadata, "ROWS_PER_PROBE", rows_per_probe)
            found = metadata.looked_up_rows(db, "objects", "id", asked, "id, type, title", "id, title",
                                            "type = 'entity'")
            assert found == [("ent-1", "Mara Okafor")]
    finally:
        db.close()


def test_metadata_store_sources_and_edges(tmp_path: Path):
    path = tmp_path / "m.duckdb"
    db = MetadataStore(path).connect()
    db.insert_sources([_source(2, 2), _source(1, 1, Status.SUPERSEDED)])
    db.insert_sources([_source(3, 1, path="other.md")])
    db.upsert_edges([("e1", "a", "b", "supports", 1.0, None, "run"), ("e1", "a", "b", "supports", 0.5, None, "run"),
                     ("e2", "b", "c", "extends", 1.0, "rel-1", None)])
    db.close()
    reader = MetadataStore(path, read_only=True).connect()
    try:
        assert [(s.id, s.version) for s in reader.sources_for_partition("key-doc.md")] == [("src-1", 1),
                                                                                          ("src-2", 2)]
        assert [s.id for s in reader.sources(status="active")] == ["src-2", "src-3"]
        assert reader.get_source("src-1").status is Status.SUPERSEDED
        assert reader.get_source("src-1").ingested_at == T
        assert reader.get_source("nope") is None
        assert {k: d.id for k, d in reader.latest_versions(["key-doc.md", "key-other.md", "nope"]).items()} == {
            "key-doc.md": "src-2", "key-other.md": "src-3"}
        assert reader.active_source_ids_for_partitions(["key-doc.md", "key-other.md"]) == ["src-2", "src-3"]
        assert reader.sql("SELECT id, weight FROM edges ORDER BY id") == [("e1", 0.5), ("e2", 1.0)]
        with pytest.raises(Exception, match="read-only"):
            reader.sql("DELETE FROM edges")
    finally:
        reader.close()


def test_duckdb_connections_draw_no_progress_bar(tmp_path: Path):
    """DuckDB draws one for queries over two seconds on a connection (not on a cursor, which read
    sessions use), into run logs too: 7,000 characters for one query."""
    setting = "SELECT current_setting('enable_progress_bar')"
    writer = MetadataStore(tmp_path / "m.duckdb").connect()
    try:
        assert writer.sql(setting) == [(False,)]
    finally:
        writer.close()
    with graph_snapshot._connection(None, tmp_path) as con:
        assert con.execute(setting).fetchall() == [(False,)]


def test_metadata_read_only_on_missing_file_is_empty_not_an_error(tmp_path: Path):
    db = MetadataStore(tmp_path / "none.duckdb", read_only=True).connect()
    try:
        assert db.count_by_type() == {} and db.sources() == []
    finally:
        db.close()
    assert not (tmp_path / "none.duckdb").exists()


def test_metadata_file_is_created_with_its_whole_schema_or_not_at_all(tmp_path: Path, monkeypatch):
    """A writer that stops while creating the tables leaves no file (before: a file with the first
    tables only, which every later read session failed on), and the next writer creates it whole."""
    path = tmp_path / "metadata.duckdb"
    whole = metadata_module._SCHEMA
    monkeypatch.setattr(metadata_module, "_SCHEMA", whole + "CREATE TABLE stops_here (x NO_SUCH_TYPE);")
    with pytest.raises(Exception, match="NO_SUCH_TYPE"):
        MetadataStore(path).connect()
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(metadata_module, "_SCHEMA", whole)
    MetadataStore(path).connect().close()
    reader = MetadataStore(path, read_only=True).connect()
    try:
        assert reader.sql("SELECT count(*) FROM extractions") == [(0,)]
        version = reader.sql("SELECT value FROM meta WHERE key = 'schema_version'")
        assert version == [(str(metadata_module.SCHEMA_VERSION),)]
    finally:
        reader.close()


_OTHER_PROCESS_WRITES = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("INSERT INTO meta VALUES (?, 'x')", [sys.argv[2]])
con.close()
"""


def _write_from_another_process(path: Path, key: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _OTHER_PROCESS_WRITES, str(path), key], capture_output=True,
                          text=True, timeout=60)


def test_metadata_read_sessions_let_other_processes_write_once_they_end(tmp_path: Path):
    """Read sessions share one DuckDB instance per process (the file is attached to it): while one is
    open the file is held, as by a connection; once the last one ends another process can write, and
    the next session sees what it wrote."""
    path, other = tmp_path / "m.duckdb", tmp_path / "other.duckdb"
    for p in (path, other):
        MetadataStore(p).connect().close()
    first, second = MetadataStore(path, read_only=True).connect(), MetadataStore(path, read_only=True).connect()
    elsewhere = MetadataStore(other, read_only=True).connect()
    assert first.sql("SELECT count(*) FROM meta") == [(1,)] and elsewhere.sql("SELECT count(*) FROM meta") == [(1,)]
    first.close()
    assert _write_from_another_process(path, "while-read").returncode != 0  # `second` still reads it
    second.close()
    elsewhere.close()
    assert _write_from_another_process(path, "after").returncode == 0
    reader = MetadataStore(path, read_only=True).connect()
    try:
        assert reader.sql("SELECT key FROM meta ORDER BY key") == [("after",), ("schema_version",)]
    finally:
        reader.close()


_WRITER_TAKES_THE_BANK_LOCK = """
import sys
from pathlib import Path
from smb_core.locking import BankLock
from smb_core.stores.metadata import MetadataStore
with BankLock(Path(sys.argv[2]), timeout=20).exclusive():
    db = MetadataStore(Path(sys.argv[1]), wait_seconds=20).connect()
    db.con.execute("INSERT INTO meta VALUES (?, 'x')", [sys.argv[3]])
    db.close()
"""


def _read_keys(path: Path, lock: Path | None) -> list[tuple]:
    reader = MetadataStore(path, read_only=True, writer_lock=lock).connect()
    try:
        return reader.sql("SELECT key FROM meta ORDER BY key")
    finally:
        reader.close()


def test_metadata_read_attachment_lingers_until_a_writer_takes_the_bank_lock(tmp_path: Path, monkeypatch):
    """A session given the bank's lock file leaves the file attached when it ends (a fresh attachment
    made recall at 10,000 documents 2x slower): a writer that ignores the bank lock is still refused,
    but one that holds the lock gets in long before LINGER_SECONDS, and the next session sees its
    write."""
    monkeypatch.setattr(metadata_module, "_READERS", metadata_module._ReadOnlyAttachments())
    monkeypatch.setattr(metadata_module, "LINGER_SECONDS", 120.0)
    path, lock = tmp_path / "m.duckdb", tmp_path / ".lock"
    MetadataStore(path).connect().close()
    assert _read_keys(path, lock) == [("schema_version",)]
    assert _write_from_another_process(path, "ignoring-the-lock").returncode != 0  # still attached here
    started = time.monotonic()
    writer = subprocess.run([sys.executable, "-c", _WRITER_TAKES_THE_BANK_LOCK, str(path), str(lock), "writer"],
                            capture_output=True, text=True, timeout=60)
    assert writer.returncode == 0, writer.stderr[-2000:]
    assert time.monotonic() - started < 60
    assert _read_keys(path, lock) == [("schema_version",), ("writer",)]


_EXITS_WHILE_AN_ATTACHMENT_LINGERS = """
import atexit, sys, threading
def after_the_stores_let_go():  # registered first, so it runs after every exit hook the stores register
    lingering = [t.name for t in threading.enumerate() if t.name == "smb-duckdb-linger"]
    print("threads at finalization:", lingering)
atexit.register(after_the_stores_let_go)
from pathlib import Path
from smb_core.stores import metadata
metadata.LINGER_SECONDS = 120.0
path = Path(sys.argv[1])
metadata.MetadataStore(path).connect().close()
reader = metadata.MetadataStore(path, read_only=True, writer_lock=Path(sys.argv[2])).connect()
print("read:", reader.sql("SELECT key FROM meta"))
reader.close()
"""


def test_a_process_that_exits_while_an_attachment_lingers_stops_the_linger_thread_first(tmp_path: Path):
    """The thread that detaches lingering files runs DuckDB statements. If it is still alive when Python
    finalizes, a statement it is running aborts the process (DuckDB's C++ swallows the forced unwind of
    a daemon thread: "FATAL: exception not rethrown"), which made test runs fail after every test had
    passed. Exit must stop it and close the shared instance before finalization."""
    done = subprocess.run([sys.executable, "-c", _EXITS_WHILE_AN_ATTACHMENT_LINGERS, str(tmp_path / "m.duckdb"),
                           str(tmp_path / ".lock")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "read: [('schema_version',)]" in done.stdout
    assert "threads at finalization: []" in done.stdout


def test_metadata_read_attachment_ends_after_lingering_and_follows_a_replaced_file(tmp_path: Path, monkeypatch):
    """Without a writer, a kept attachment still ends after LINGER_SECONDS (its cache is memory); a
    file replaced on disk while attached is read afresh, not from the old attachment; and a session
    without the lock file (no way to let writers in), or one that left DuckDB holding more than
    LINGER_MAX_BYTES, detaches at once."""
    monkeypatch.setattr(metadata_module, "_READERS", metadata_module._ReadOnlyAttachments())
    monkeypatch.setattr(metadata_module, "LINGER_SECONDS", 120.0)
    path, lock, other = tmp_path / "m.duckdb", tmp_path / ".lock", tmp_path / "other.duckdb"
    for p in (path, other):
        MetadataStore(p).connect().close()
    assert _read_keys(path, lock) == [("schema_version",)]
    assert _write_from_another_process(other, "replacement").returncode == 0
    os.replace(other, path)  # while `path` is still attached here
    assert _read_keys(path, lock) == [("replacement",), ("schema_version",)]
    monkeypatch.setattr(metadata_module, "LINGER_SECONDS", 0.2)
    deadline = time.monotonic() + 30
    while _write_from_another_process(path, "after-lingering").returncode != 0:
        assert time.monotonic() < deadline, "the attachment never ended"
        time.sleep(0.2)
    assert _read_keys(path, lock) == [("after-lingering",), ("replacement",), ("schema_version",)]
    third = tmp_path / "n.duckdb"
    MetadataStore(third).connect().close()
    assert _read_keys(third, None) == [("schema_version",)]
    assert _write_from_another_process(third, "at-once").returncode == 0
    monkeypatch.setattr(metadata_module, "LINGER_SECONDS", 120.0)
    monkeypatch.setattr(metadata_module, "LINGER_MAX_BYTES", 0)  # as if the session had read a lot
    assert _read_keys(third, lock) == [("at-once",), ("schema_version",)]
    assert _write_from_another_process(third, "after-a-large-session").returncode == 0


def test_metadata_read_sessions_still_open_after_a_query_spilled_to_disk(tmp_path: Path, monkeypatch):
    """A read query larger than the memory limit spills to `<file>.tmp`. DuckDB then refuses to set the
    temporary directory again, which every new read session did: at 10,000 documents a first cycle
    failed in its semantic layer. Later sessions, of this file and of another, must still open."""
    monkeypatch.setattr(metadata_module, "_READERS", metadata_module._ReadOnlyAttachments())  # its own instance
    path, other = tmp_path / "m.duckdb", tmp_path / "other.duckdb"
    for p in (path, other):
        MetadataStore(p).connect().close()
    big = MetadataStore(path, read_only=True, memory_limit="100MB").connect()
    try:
        assert big.sql("SELECT count(*) FROM (SELECT md5(range::VARCHAR) AS h FROM range(2000000) ORDER BY h)") \
            == [(2_000_000,)]
    finally:
        big.close()
    assert (tmp_path / "m.duckdb.tmp").exists()  # it did spill
    for p in (path, other, path):
        reader = MetadataStore(p, read_only=True, memory_limit="100MB").connect()
        try:
            assert reader.sql("SELECT count(*) FROM meta") == [(1,)]
        finally:
            reader.close()


# ---- Chroma vectors ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return get_embedder(Settings())


def test_minilm_embeddings_are_normalised_and_cached(embedder):
    vectors = embedder.embed(["a cat sat on the mat", "a cat sat on the mat", "quarterly revenue grew"])
    assert vectors.shape == (3, 384) and str(vectors.dtype) == "float32"
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4
    assert (vectors[0] == vectors[1]).all()
    assert embedder.embed([]).shape == (0, 384)


def test_minilm_rows_follow_the_input_order_whatever_the_batching():
    """Texts are batched by token count, so a row must still be its own text's vector: the same as
    embedding that text alone, whether it shares a call with short names or with long sentences."""
    texts = ["Lumen Labs", "The observatory opened in 1962 on the northern ridge above the town.",
             "IBM", "word " * 600, "a cat sat on the mat", "Kirchenlamitz"]
    alone = np.stack([MiniLMEmbedder().embed([t])[0] for t in texts])
    for budget, largest in ((1024, 128), (40, 2)):  # one call for the names; then one or two texts a call
        together = MiniLMEmbedder(batch_tokens=budget, max_batch=largest).embed(texts)
        assert together.shape == (len(texts), 384)
        assert (np.einsum("ij,ij->i", together, alone) > 0.99).all()
    similar = alone @ alone.T
    assert (similar[~np.eye(len(texts), dtype=bool)] < 0.95).all()  # rows out of order would fail above


def test_minilm_batches_pad_little_and_keep_every_text():
    """Padding is computed and thrown away: a batch of names of 3 and 8 tokens pads most of its rows."""
    words = ["Lumen", "Labs", "observatory", "northern", "ridge", "Kirchenlamitz", "quarterly", "revenue"]
    texts = [" ".join(words[(i + j) % len(words)] for j in range(1 + i % 6)) + f" {i}" for i in range(300)]
    embedder = MiniLMEmbedder()
    embedder._load()
    batches = list(embedder._batches(texts))
    assert sorted(t for batch, _ in batches for t in batch) == sorted(texts)
    for batch, token_ids in batches:
        padded = max(map(len, token_ids)) * len(token_ids)
        assert padded - sum(map(len, token_ids)) <= embedder.max_padding * padded
        assert len(batch) <= embedder.max_batch and (padded <= embedder.batch_tokens or len(batch) == 1)
    assert len(batches) < len(texts) / 10  # still many names to a call


def test_single_threaded_embedder_runs_on_one_thread_and_gives_the_same_vectors(embedder):
    """Ingest's embedding stage runs beside parsing and writing on one ONNX thread: the same model,
    the same vectors (batched the same way), made once per embedder."""
    texts = ["Lumen Labs", "The observatory opened in 1962 on the northern ridge above the town.", "IBM"]
    one = single_threaded(embedder)
    assert one is not embedder and single_threaded(embedder) is one and single_threaded(one) is one
    assert (one.name, one.dim, one.batch_tokens, one.max_padding) == (embedder.name, embedder.dim,
                                                                      embedder.batch_tokens, embedder.max_padding)
    vectors = one.embed(texts)
    assert one._session.get_session_options().intra_op_num_threads == 1
    assert embedder._session.get_session_options().intra_op_num_threads == 0  # ONNX Runtime's default
    assert np.allclose(vectors, embedder.embed(texts), atol=1e-5)
    ollama = get_embedder(Settings(embedding_model="ollama:nomic-embed-text"))
    assert single_threaded(ollama) is ollama  # its threads are the server's


def test_vector_store_returns_the_nearest_keys(tmp_path: Path, embedder):
    store = VectorStore(tmp_path / "chroma")
    texts = ["A small cat is sleeping on the rug.", "Stock markets fell sharply after the interest rate decision.",
             "HNSW is a graph index for approximate nearest neighbour search.",
             "Lisbon is the capital city of Portugal."]
    keys = [vector_key(t) for t in texts]
    store.upsert(keys, embedder.embed(texts))
    assert store.count() == 4 and keys[0] == vector_key(texts[0]) != vector_key(texts[0] + " ")
    query = embedder.embed(["a kitten napping on a carpet"])[0]
    (hits,) = store.nearest([query], 2)
    assert hits[0][0] == keys[0] and len(hits) == 2 and hits[0][1] > hits[1][1]
    assert store.nearest([embedder.embed(["vector search graph"])[0]], 1)[0][0][0] == keys[2]
    assert len(store.nearest([query], 50)[0]) == 4
    assert store.existing([keys[0], "nope"]) == {keys[0]}
    again = store.get([keys[0], keys[0]])
    assert list(again) == [keys[0]] and abs(float(again[keys[0]] @ embedder.embed([texts[0]])[0]) - 1) < 1e-4
    store.delete([keys[1]])
    assert store.count() == 3 and store.existing(keys) == {keys[0], keys[2], keys[3]}


def test_nearest_answers_hundreds_of_queries_in_batches(tmp_path: Path):
    store = VectorStore(tmp_path / "chroma")
    vectors = np.random.default_rng(0).normal(size=(400, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.upsert([f"k{i:03d}" for i in range(400)], vectors)
    found = store.nearest(list(vectors) * 2, 160)  # 800 queries of 160 results: several calls
    assert len(found) == 800 and all(len(rows) == 160 for rows in found)
    assert [rows[0][0] for rows in found] == [f"k{i:03d}" for i in range(400)] * 2


def test_vector_store_writes_its_index_rarely_yet_another_process_sees_every_vector(tmp_path: Path, embedder):
    import chromadb
    from chromadb.api.client import SharedSystemClient

    old = chromadb.PersistentClient(path=str(tmp_path / "chroma"))  # a bank made before sync_threshold was set
    old.get_or_create_collection(COLLECTION, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
    assert old.get_collection(COLLECTION).configuration_json["hnsw"]["sync_threshold"] == 1000
    SharedSystemClient.clear_system_cache()

    store = VectorStore(tmp_path / "chroma")
    assert store.collection.configuration_json["hnsw"]["sync_threshold"] == HNSW["sync_threshold"] > 1500
    texts = [f"note number {i}" for i in range(1500)]  # more than Chroma's default, fewer than ours
    store.upsert([f"n{i}" for i in range(1500)], embedder.embed(texts))
    probe = ("import sys; from smb_core.stores.vectors import VectorStore; from smb_core.embed import MiniLMEmbedder; "
             "s = VectorStore(sys.argv[1]); "
             "print(s.count(), s.nearest([MiniLMEmbedder().embed(['note number 1499'])[0]], 1)[0][0][0])")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "chroma")], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["1500", "n1499"]


def test_vector_store_opens_a_bank_made_before_sync_threshold_every_time(tmp_path: Path):
    """Opening such a bank updates its collection; that update used to fail now and then (about 1 in 25
    opens) with "database is locked" when the collection had been fetched with get_or_create."""
    import shutil

    import chromadb
    from chromadb.api.client import SharedSystemClient

    chromadb.PersistentClient(path=str(tmp_path / "old")).get_or_create_collection(
        COLLECTION, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
    SharedSystemClient.clear_system_cache()
    for attempt in range(100):
        shutil.copytree(tmp_path / "old", tmp_path / f"copy{attempt}")
        store = VectorStore(tmp_path / f"copy{attempt}")
        assert store.collection.configuration_json["hnsw"]["sync_threshold"] == HNSW["sync_threshold"]
        store.reload()


def test_vector_store_persists_and_upserts_without_duplicates(tmp_path: Path, embedder):
    store = VectorStore(tmp_path / "chroma")
    assert store.nearest([embedder.embed(["x"])[0]], 3) == [[]]
    vectors = embedder.embed(["one", "two"])
    store.upsert(["a", "b"], vectors)
    store.upsert(["a", "b", "b"], np.stack([vectors[0], vectors[0], vectors[1]]))  # a repeated key: the first
    store.reload()
    reopened = VectorStore(tmp_path / "chroma")
    assert reopened.count() == 2
    assert reopened.existing(["a", "b", "c"]) == {"a", "b"}
    assert float(reopened.get(["b"])["b"] @ vectors[0]) > 0.9999
