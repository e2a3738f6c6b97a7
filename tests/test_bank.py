"""The write path across the four stores: shared ids, idempotent re-runs, crash recovery, layer-0 versions."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import duckdb
import numpy as np
import pytest

from smb_core.bank import Bank, LayerZeroImmutableError
from smb_core import bank_check, ingest
from smb_core.corpus import scan
from smb_core.extract.nlp import NLPExtractor
from smb_core.ingest import extract_sources, ingest_sources
from smb_core.integrity import front_matter_errors, layer0_hash_mismatches, objects_of_run
from smb_core.model import (
    CanonicalEntity, Claim, Concept, Edge, EdgeType, Entity, EntityKind, Insight, Relationship, SourceDocument,
    SourceSpan, Status, from_markdown, stable_id,
)
from smb_core.settings import Settings
from smb_core.stores import metadata
from smb_core.stores.metadata import MetadataStore
from smb_core.stores.vectors import vector_key
from tests.conftest import write_doc

SPAN = SourceSpan(source_id="src-1", start=0, end=11, line_start=1, line_end=1)


def _objects() -> tuple[list, list[Edge]]:
    entity = Entity(id="ent-okafor", title="Mara Okafor", entity_kind=EntityKind.PERSON, source_ids=["src-1"],
                    source_spans=[SPAN], aliases=["Okafor"])
    concept = Concept(id="con-vector-index", title="vector index", source_ids=["src-1"])
    claim = Claim(id="clm-founded", title="Okafor founded Lumen Labs", statement="Mara Okafor founded Lumen Labs.",
                  subject="Mara Okafor", predicate="found", object="Lumen Labs", source_ids=["src-1"],
                  derived_from=["ent-okafor"], source_spans=[SPAN])
    rel = Relationship(id="rel-okafor-index", title="Okafor explains vector index", head="ent-okafor",
                       tail="con-vector-index", edge_type="explains", evidence="Okafor explains vector indexes.",
                       source_ids=["src-1"])
    return [entity, concept, claim, rel], [Edge.between("clm-founded", "ent-okafor", "references")]


def _counts(bank: Bank) -> dict:
    graph = bank.graph.ensure_loaded()
    with bank.reading() as db:
        counts = {t: db.sql(f"SELECT count(*) FROM {t}")[0][0]
                  for t in ("objects", "edges", "spans", "names", "lex_units", "lex_postings", "sources",
                            "extractions", "rejections")}
        counts["texts"] = db.sql("SELECT count(DISTINCT embedding_id) FROM objects")[0][0]
    return {**counts, "markdown": bank.markdown.count(), "chroma": bank.vectors.count(),
            "graph_nodes": graph.number_of_nodes(), "graph_edges": graph.number_of_edges()}


# ---- one write, four stores -------------------------------------------------------------------


def test_written_objects_are_in_all_four_stores_with_shared_ids(bank: Bank):
    objects, edges = _objects()
    bank.write(objects, edges, run_id="run-1")
    ids = [o.id for o in objects]

    for obj in objects:  # markdown
        stored = from_markdown((bank.root / obj.path()).read_text(encoding="utf-8"))
        assert stored == obj
        assert stored.embedding_id == vector_key(obj.text()) and stored.run_id == "run-1"
        assert stored.graph_node_id == (None if isinstance(obj, Relationship) else obj.id)
    assert (bank.root / "layer-1/relationships/rel-okafor-index.md").is_file()

    with bank.reading() as db:  # DuckDB
        rows = db.sql("SELECT id, embedding_id, graph_node_id, file_path, run_id FROM objects ORDER BY id")
        edge_rows = db.sql("SELECT id, head, tail, edge_type, object_id FROM edges ORDER BY id")
    assert rows == sorted((o.id, vector_key(o.text()), None if isinstance(o, Relationship) else o.id, o.path(), "run-1")
                          for o in objects)
    assert edge_rows == sorted([
        ("rel-okafor-index", "ent-okafor", "con-vector-index", "explains", "rel-okafor-index"),
        (edges[0].id, "clm-founded", "ent-okafor", "references", None),
    ])

    keys = {vector_key(o.text()) for o in objects}  # Chroma: a vector per text, found as its objects
    assert bank.vectors.existing(sorted(keys)) == keys and bank.vectors.count() == 4
    (hits,) = bank.nearest([bank.embedder.embed(["Who founded Lumen Labs?"])[0]], 1, with_source=True)
    assert [(h[0], h[2]) for h in hits] == [("clm-founded", "src-1")]

    graph = bank.graph.ensure_loaded()  # graph: typed nodes; the relationship is an edge keyed by its id
    assert sorted(graph.nodes) == ["clm-founded", "con-vector-index", "ent-okafor"]
    assert graph.nodes["ent-okafor"]["type"] == "entity" and graph.nodes["clm-founded"]["type"] == "claim"
    assert graph.edges["ent-okafor", "con-vector-index", "rel-okafor-index"]["edge_type"] == "explains"
    assert graph.edges["clm-founded", "ent-okafor", edges[0].id]["edge_type"] == "references"

    report = bank.check_consistency()
    assert report["consistent"] is True
    assert (report["markdown_files"], report["duckdb_rows"], report["chroma_vectors"]) == (4, 4, 4)
    assert (report["graph_edges"], report["duckdb_edges"]) == (2, 2)
    assert bank.check_consistency(ids)["consistent"] is True


def test_a_check_of_new_objects_reads_the_graph_log_and_still_finds_a_lost_node(bank: Bank):
    objects, edges = _objects()
    bank.write(objects, edges)
    ids = [o.id for o in objects]
    fresh = Bank(settings=bank.settings)  # another process: it has not read the graph
    assert fresh.check_consistency(ids)["consistent"] is True
    assert not fresh.graph._loaded  # its nodes were found at the end of the graph's log

    bank.graph.compact()  # all are now in the snapshot only; then one node is lost from it
    snapshot, damaged = bank.graph.snapshot_path, bank.graph.snapshot_path.with_name("damaged.parquet")
    duckdb.execute(f"COPY (SELECT * FROM read_parquet('{snapshot}') "
                   f"WHERE 'ent-okafor' NOT IN (head, coalesce(tail, ''))) TO '{damaged}' (FORMAT parquet)")
    damaged.replace(snapshot)
    report = Bank(settings=bank.settings).check_consistency(ids)
    assert report["consistent"] is False and report["missing_graph_nodes"] == ["ent-okafor"]



def test_the_whole_bank_check_reads_a_batch_at_a_time_and_names_every_missing_piece(bank: Bank, monkeypatch):
    monkeypatch.setattr(bank_check, "BATCH", 1)  # one object a batch: what is found must add up
    objects, edges = _objects()
    bank.write(objects, edges)
    bank.graph.compact()
    report = Bank(settings=bank.settings).check_consistency()  # a process that has not read the graph
    assert report["consistent"] is True and report["checked"] == 4
    assert (report["graph_nodes"], report["graph_edges"], report["distinct_texts"]) == (3, 2, 4)

    (bank.root / "layer-1/concepts/con-vector-index.md").unlink()
    (bank.root / "layer-1/relationships/rel-okafor-index.md").unlink()
    bank.vectors.collection.delete(ids=[vector_key(objects[2].text())])  # the claim's vector
    snapshot, damaged = bank.graph.snapshot_path, bank.graph.snapshot_path.with_name("damaged.parquet")
    duckdb.execute(f"COPY (SELECT * FROM read_parquet('{snapshot}') "
                   f"WHERE 'ent-okafor' NOT IN (head, coalesce(tail, ''))) TO '{damaged}' (FORMAT parquet)")
    damaged.replace(snapshot)
    for loaded in (False, True):
        checker = Bank(settings=bank.settings)
        if loaded:
            checker.graph.ensure_loaded()
        report = checker.check_consistency()
        assert report["consistent"] is False and report["checked"] == 4, loaded
        assert sorted(report["missing_markdown"]) == ["con-vector-index", "rel-okafor-index"]
        assert report["missing_vectors"] == ["clm-founded"] and report["missing_graph_nodes"] == ["ent-okafor"]
        assert (report["graph_nodes"], report["graph_edges"], report["duckdb_edges"]) == (2, 0, 2)


def test_a_writer_goes_on_during_a_whole_bank_check_and_what_it_changed_is_not_reported_missing(bank: Bank,
                                                                                                  monkeypatch):
    objects, edges = _objects()
    bank.write(objects, edges)
    writer = Bank(settings=bank.settings.model_copy(update={"lock_timeout_seconds": 1.0}))  # another process
    monkeypatch.setattr(bank_check, "BATCH", 1)
    checked_keys, existing, shared, sessions = [], bank.vectors.existing, bank.lock.shared, []

    @contextmanager
    def writing_between_batches():  # before each of the check's first two batches a writer goes first
        sessions.append(1)
        if len(sessions) == 2:  # (the first hold was the listing's)
            with writer.reading() as db:
                retitled = db.get_object("con-vector-index")
            retitled.title = "vector search index"  # its old text's vector goes
            writer.update_objects([retitled])
        if len(sessions) == 3:
            writer.write([Concept(id="con-new", title="graph database", source_ids=["src-1"])])
        with shared():
            yield

    monkeypatch.setattr(bank.lock, "shared", writing_between_batches)
    monkeypatch.setattr(bank.vectors, "existing", lambda keys: checked_keys.extend(keys) or existing(keys))
    report = bank.check_consistency()
    assert report["changed_during_check"] is True and report["checked"] == 4  # the objects as listed
    assert vector_key("vector index") in checked_keys  # the listed text, whose vector had gone: checked again
    assert report["consistent"] is True and report["missing_vectors"] == []
    assert report["markdown_files"] == 5  # counted after the writer: shown, not compared
    assert Bank(settings=bank.settings).check_consistency()["changed_during_check"] is False

def test_rewriting_the_same_objects_does_not_duplicate(bank: Bank):
    objects, edges = _objects()
    bank.write(objects, edges)
    first = _counts(bank)
    again, again_edges = _objects()
    bank.write(again, again_edges)
    bank.write(again, again_edges)
    assert _counts(bank) == first
    assert first["objects"] == 4 and first["graph_nodes"] == 3 and first["graph_edges"] == 2
    assert bank.check_consistency()["consistent"] is True


def test_the_same_id_twice_in_one_write_keeps_the_last_everywhere(bank: Bank):
    bank.write([Concept(id="con-dup", title="first wording"), Concept(id="con-dup", title="vector quantization")])
    assert bank.check_consistency()["consistent"] is True
    counts = _counts(bank)
    assert (counts["objects"], counts["markdown"], counts["chroma"], counts["graph_nodes"]) == (1, 1, 1, 1)
    assert from_markdown((bank.root / "layer-1/concepts/con-dup.md").read_text()).title == "vector quantization"
    with bank.reading() as db:
        assert db.get_object("con-dup").title == "vector quantization"
    stored = bank.vectors_of(["con-dup"])["con-dup"]
    assert float(stored @ bank.embedder.embed(["vector quantization"])[0]) > 0.999
    assert bank.graph.ensure_loaded().nodes["con-dup"]["title"] == "vector quantization"


def test_a_crash_before_duckdb_is_repaired_by_rerunning_the_write(bank: Bank, monkeypatch):
    original = MetadataStore.upsert_objects
    calls = []

    def dies_once(self, objects):
        calls.append(len(objects))
        if len(calls) == 1:
            raise RuntimeError("killed before the DuckDB commit (injected)")
        return original(self, objects)

    monkeypatch.setattr(MetadataStore, "upsert_objects", dies_once)
    objects, edges = _objects()
    with pytest.raises(RuntimeError, match="injected"):
        bank.write(objects, edges)

    # markdown, Chroma and the graph were written; DuckDB (the commit record) was not
    assert bank.markdown.count() == 4 and bank.vectors.count() == 4
    assert bank.graph.ensure_loaded().number_of_nodes() == 3
    broken = bank.check_consistency()
    assert broken["consistent"] is False and broken["duckdb_rows"] == 0 and broken["markdown_files"] == 4

    objects, edges = _objects()
    bank.write(objects, edges)
    counts = _counts(bank)
    assert bank.check_consistency()["consistent"] is True
    assert (counts["objects"], counts["markdown"], counts["chroma"]) == (4, 4, 4)
    assert (counts["graph_nodes"], counts["graph_edges"], counts["edges"]) == (3, 2, 2)
    assert calls == [4, 4]


def test_a_crash_during_extraction_is_repaired_by_rerunning_it(bank: Bank, monkeypatch):
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "okafor.md", "# Mara Okafor\n\nMara Okafor founded Lumen Labs in Lisbon in 2017.\n"
                                   "She hired Tomas Varga in Berlin.\n")
    (outcome,) = ingest_sources(bank, scan(corpus), corpus)
    original = MetadataStore.upsert_objects
    state = {"died": False}

    def dies_once(self, objects):
        if not state["died"]:
            state["died"] = True
            raise RuntimeError("killed mid-extraction (injected)")
        return original(self, objects)

    monkeypatch.setattr(MetadataStore, "upsert_objects", dies_once)
    with pytest.raises(RuntimeError, match="injected"):
        extract_sources(bank, [outcome.source_id], NLPExtractor())
    assert _counts(bank)["extractions"] == 0  # not recorded as done, so a re-run extracts again

    summary = extract_sources(bank, [outcome.source_id], NLPExtractor())
    assert summary.documents == 1 and summary.skipped == 0
    counts = _counts(bank)
    assert counts["objects"] == sum(summary.counts.values()) == counts["markdown"] - 1
    assert counts["chroma"] == counts["texts"] < counts["objects"]  # a relationship shares its sentence's vector
    assert bank.check_consistency()["consistent"] is True
    assert extract_sources(bank, [outcome.source_id], NLPExtractor()).skipped == 1
    assert _counts(bank) == counts


def test_an_embedding_failure_in_the_background_stops_extraction_after_the_batches_before_it(bank: Bank,
                                                                                             monkeypatch):
    corpus = bank.settings.kbmd_dir
    for i in range(5):
        write_doc(corpus, f"note-{i}.md", f"# Note {i}\n\nAda Lovelace wrote note {i} in London.\n")
    ids = [o.source_id for o in ingest_sources(bank, scan(corpus), corpus)]
    original, calls = type(bank.embedder).embed, []

    def fails_on_second_batch(self, texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("embedder died (injected)")
        return original(self, texts)

    monkeypatch.setattr(type(bank.embedder), "embed", fails_on_second_batch)
    with pytest.raises(RuntimeError, match="injected"):
        extract_sources(bank, ids, NLPExtractor(), batch_size=2)
    with bank.reading() as db:
        done = bank.extracted_sources(db, ids, NLPExtractor.version)
    assert done == set(ids[:2])  # the first batch is stored; nothing of the failed one or after it
    assert bank.check_consistency()["consistent"] is True

    summary = extract_sources(bank, ids, NLPExtractor(), batch_size=2)
    assert (summary.documents, summary.skipped) == (3, 2)
    assert bank.check_consistency()["consistent"] is True


def test_a_write_failure_in_the_background_stops_extraction_after_the_batches_before_it(bank: Bank,
                                                                                         monkeypatch):
    """Batches are written by a writer thread while the next one is parsed; a failed write surfaces and
    nothing after it is written, so a re-run extracts exactly what is missing."""
    corpus = bank.settings.kbmd_dir
    for i in range(7):
        write_doc(corpus, f"note-{i}.md", f"# Note {i}\n\nAda Lovelace wrote note {i} in London.\n")
    ids = [o.source_id for o in ingest_sources(bank, scan(corpus), corpus)]
    original, calls = MetadataStore.upsert_objects, []

    def dies_on_second_write(self, objects):
        calls.append(len(objects))
        if len(calls) == 2:
            raise RuntimeError("writer died (injected)")
        return original(self, objects)

    monkeypatch.setattr(MetadataStore, "upsert_objects", dies_on_second_write)
    monkeypatch.setattr(ingest, "SOURCE_BATCHES_PER_READ", 2)  # source records read in three rounds
    with pytest.raises(RuntimeError, match="injected"):
        extract_sources(bank, ids, NLPExtractor(), batch_size=1)
    with bank.reading() as db:
        assert bank.extracted_sources(db, ids, NLPExtractor.version) == {ids[0]}

    monkeypatch.setattr(MetadataStore, "upsert_objects", original)
    summary = extract_sources(bank, ids, NLPExtractor(), batch_size=1)
    assert (summary.documents, summary.skipped) == (6, 1)
    with bank.reading() as db:
        assert bank.extracted_sources(db, ids, NLPExtractor.version) == set(ids)
    assert bank.check_consistency()["consistent"] is True


def test_extracting_again_with_a_newer_extractor_supersedes_what_it_no_longer_finds(bank: Bank):
    """An older extractor read a section heading as a place, the current one does not: extracted again, the
    document keeps that object superseded (saying why), not active beside the new objects; what an agent
    wrote about the document is left alone."""
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "vesta.md", "# Vesta Group\n\nVesta Group is a shipping company.\n\n## Background\n\n"
                                  "Vesta Group started in Oslo in 1999.\n")
    (outcome,) = ingest_sources(bank, scan(corpus), corpus)
    source = outcome.source_id
    assert extract_sources(bank, [source], NLPExtractor(), run_id="run-1").superseded == 0
    with bank.reading() as db:
        current = [r[0] for r in db.sql("SELECT id FROM objects WHERE layer = 1")]
    heading = Entity(id=stable_id("ent", source, "background"), title="Background", entity_kind=EntityKind.PLACE,
                     source_ids=[source], run_id="run-1")
    named = next(i for i in current if i.startswith("ent-"))
    located = Relationship(id=stable_id("rel", source, "background"), title="Vesta Group located in Background",
                           head=named, tail=heading.id, edge_type="related_to", source_ids=[source], run_id="run-1")
    agents = Claim(id="clm-agent", title="Vesta Group owns ships", statement="Vesta Group owns ships.",
                   subject="Vesta Group", source_ids=[source], run_id="agent:tester")
    bank.write([heading, located, agents])
    assert bank.graph.ensure_loaded().has_edge(named, heading.id, located.id)
    with bank.writing() as db:  # as if an older extractor had made them
        db.con.execute("UPDATE extractions SET version = 'nlp-0'")

    summary = extract_sources(bank, [source], NLPExtractor(), run_id="run-2")
    assert (summary.documents, summary.superseded) == (1, 2)
    with bank.reading() as db:
        found = db.get_objects([heading.id, located.id, agents.id, *current])
    assert found[heading.id].status is Status.SUPERSEDED and found[heading.id].run_id == "run-2"
    assert found[located.id].status is Status.SUPERSEDED  # and no longer an edge of the graph:
    assert not bank.graph.ensure_loaded().has_edge(named, heading.id, located.id)
    assert found[heading.id].status_reason == f"not extracted again by {NLPExtractor.version}"
    assert [i for i in [agents.id, *current] if found[i].status is not Status.ACTIVE] == []
    assert bank.markdown.read(found[heading.id].path()).status is Status.SUPERSEDED
    assert bank.check_consistency()["consistent"] is True
    assert extract_sources(bank, [source], NLPExtractor()).skipped == 1


def test_extracting_again_keeps_what_evolution_set_on_the_objects_found_again(bank: Bank):
    """A newer extractor refreshes what was read from the text; it must not undo merges. Before, every
    merged member came back active (with no `merged_into`), and the next cycle's checks failed."""
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "vesta.md", "# Vesta Group\n\nVesta Group is a shipping company in Oslo.\n")
    (outcome,) = ingest_sources(bank, scan(corpus), corpus)
    extract_sources(bank, [outcome.source_id], NLPExtractor(), run_id="run-1")
    with bank.reading() as db:
        objects = db.get_objects([r[0] for r in db.sql("SELECT id FROM objects WHERE layer = 1")])
    oslo = next(o for o in objects.values() if o.title == "Oslo")
    claim = next(o for o in objects.values() if isinstance(o, Claim))
    canonical = CanonicalEntity(id="cen-oslo", title="Oslo", entity_kind=EntityKind.PLACE, members=[oslo.id],
                                source_ids=[outcome.source_id])
    bank.write([canonical])
    oslo.status, oslo.merged_into, oslo.status_reason = Status.MERGED, canonical.id, "merged into cen-oslo"
    claim.confidence, claim.disputed_by = 0.91, ["ctr-somewhere"]
    vesta = next(o for o in objects.values() if o.title == "Vesta Group")
    vesta.description, vesta.run_id = "A shipping company (the agent's words).", "agent:tester"
    bank.update_objects([oslo, claim, vesta])
    with bank.writing() as db:  # as if an older extractor had made them
        db.con.execute("UPDATE extractions SET version = 'nlp-0'")

    summary = extract_sources(bank, [outcome.source_id], NLPExtractor(), run_id="run-2")
    assert (summary.documents, summary.superseded) == (1, 0)
    with bank.reading() as db:
        again = db.get_objects(list(objects))
    assert (again[oslo.id].status, again[oslo.id].merged_into) == (Status.MERGED, canonical.id)
    assert (again[claim.id].confidence, again[claim.id].disputed_by) == (0.91, ["ctr-somewhere"])
    assert again[claim.id].created == objects[claim.id].created and again[claim.id].run_id == "run-2"
    assert again[vesta.id].model_dump() == vesta.model_dump()  # what an agent changed stays as it left it
    assert {o.status for i, o in again.items() if i != oslo.id} == {Status.ACTIVE}


# ---- layer 0 is immutable ---------------------------------------------------------------------


def _source(body: str, doc_id: str = "src-fixed") -> SourceDocument:
    import hashlib

    return SourceDocument(id=doc_id, path="a.md", partition_key="a-12345678",
                          sha256=hashlib.sha256(body.encode()).hexdigest(), version=1, title="A",
                          bytes=len(body), body=body)


class _LayerZeroNote(Concept):
    layer: ClassVar[int] = 0


def test_write_of_a_layer_zero_memory_object_is_refused(bank: Bank):
    with pytest.raises(LayerZeroImmutableError, match="add_source"):
        bank.write([Concept(id="con-ok", title="fine"), _LayerZeroNote(id="con-l0", title="layer zero")])
    assert _counts(bank)["objects"] == 0 and bank.markdown.count() == 0 and bank.vectors.count() == 0


def test_write_of_a_source_document_is_refused_as_layer_zero(bank: Bank):
    with pytest.raises(LayerZeroImmutableError):
        bank.write([_source("# A\n\ntext\n")])


def test_layer_zero_content_of_an_existing_id_cannot_change(bank: Bank):
    bank.add_source(_source("# A\n\noriginal\n"))
    bank.add_source(_source("# A\n\noriginal\n"))  # same content again: a no-op
    with pytest.raises(LayerZeroImmutableError, match="src-fixed already exists with other content"):
        bank.add_source(_source("# A\n\nchanged\n"))
    with bank.reading() as db:
        (doc,) = db.sources()
    assert bank.read_source_text(doc) == "# A\n\noriginal\n"
    assert _counts(bank)["sources"] == 1
    assert layer0_hash_mismatches(bank) == []


def test_tampering_with_a_layer_zero_copy_is_detected(bank: Bank):
    bank.add_source(_source("# A\n\noriginal\n"))
    path = bank.root / "layer-0/source/src-fixed.md"
    path.write_text(path.read_text().replace("original", "edited by hand"))
    (problem,) = layer0_hash_mismatches(bank)
    assert problem.startswith("a.md v1:") and "does not match sha256" in problem
    path.write_text("---\nid: src-fixed\n# A\n\noriginal\n")  # its front matter never closes
    (problem,) = layer0_hash_mismatches(bank)
    assert "is damaged" in problem and "no closing '---'" in problem
    path.unlink()
    (problem,) = layer0_hash_mismatches(bank)
    assert "is missing" in problem


def test_broken_object_files_are_reported(bank: Bank):
    objects, edges = _objects()
    bank.write(objects, edges)
    assert front_matter_errors(bank, [o.id for o in objects]) == []
    (bank.root / "layer-1/concepts/con-vector-index.md").write_text("---\nid: [broken\n---\n")
    (error,) = front_matter_errors(bank, [o.id for o in objects])
    assert error.startswith("layer-1/concepts/con-vector-index.md:") and "not valid YAML" in error


def test_objects_of_run_for_the_layer_one_checks(bank: Bank):
    objects, edges = _objects()
    bank.write(objects, edges, run_id="run-1")
    bank.write([Insight(id="ins-1", title="an insight")], run_id="run-2")
    ids = {o.id for o in objects}
    assert set(objects_of_run(bank, "run-1", layer=1)) == ids
    assert objects_of_run(bank, "run-2", layer=1) != []  # a run that wrote no layer-1 object: a sample
    assert set(objects_of_run(bank, "run-2", layer=1)) == ids
    assert len(objects_of_run(bank, "nothing", layer=1, sample=2)) == 2
    assert objects_of_run(bank, "run-2", layer=3) == ["ins-1"]


# ---- versions ---------------------------------------------------------------------------------

V1 = "# Lumen Labs\n\nMara Okafor founded Lumen Labs in Lisbon in 2017.\nLumen Labs builds vector databases.\n"
V2 = "# Lumen Labs\n\nMara Okafor founded Lumen Labs in Porto in 2018.\nLumen Labs builds search engines.\n"


def _ingest(bank: Bank, run_id: str):
    corpus = bank.settings.kbmd_dir
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id=run_id)
    fresh = [o.source_id for o in outcomes if o.status in ("new", "new_version")]
    summary = extract_sources(bank, fresh, NLPExtractor(), run_id=run_id)
    return outcomes, summary


def _objects_of(bank: Bank, source_id: str) -> dict:
    with bank.reading() as db:
        return db.get_objects(db.object_ids_for_sources([source_id]))


def test_a_changed_file_becomes_version_two_and_version_one_is_kept_superseded(bank: Bank):
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "lumen.md", V1)
    (first,), summary1 = _ingest(bank, "run-1")
    assert (first.status, first.version) == ("new", 1)
    v1_objects = _objects_of(bank, first.source_id)
    assert len(v1_objects) == sum(summary1.counts.values()) > 0

    write_doc(corpus, "lumen.md", V2)
    (second,), summary2 = _ingest(bank, "run-2")
    assert (second.status, second.version) == ("new_version", 2)
    assert second.source_id != first.source_id

    with bank.reading() as db:
        versions = db.sources_for_partition(first.partition_key)
    assert [(d.version, d.status, d.supersedes) for d in versions] == [
        (1, Status.SUPERSEDED, None), (2, Status.ACTIVE, first.source_id)]
    assert bank.read_source_text(versions[0]) == V1 and bank.read_source_text(versions[1]) == V2

    old = _objects_of(bank, first.source_id)
    assert set(old) == set(v1_objects)  # version 1's layer-1 objects stay ...
    assert {o.status for o in old.values()} == {Status.SUPERSEDED}  # ... marked superseded in every store
    for obj in old.values():
        assert from_markdown((bank.root / obj.path()).read_text()).status is Status.SUPERSEDED
    keys = {o.embedding_id for o in old.values()}  # their texts' vectors stay
    assert bank.vectors.existing(sorted(keys)) == keys
    graph = bank.graph.ensure_loaded()
    assert {graph.nodes[i]["status"] for i, o in old.items() if o.graph_node_id} == {"superseded"}
    old_relationships = [o for o in old.values() if isinstance(o, Relationship)]
    assert old_relationships and not any(graph.has_edge(o.head, o.tail, o.id) for o in old_relationships)

    new = _objects_of(bank, second.source_id)
    assert len(new) == sum(summary2.counts.values()) > 0
    assert {o.status for o in new.values()} == {Status.ACTIVE}
    assert not set(new) & set(old)
    with bank.reading() as db:
        assert sum(db.count_by_type(status="active").values()) == len(new)
    assert bank.check_consistency()["consistent"] is True
    assert bank.status()["documents"] == 1 and bank.status()["versions"] == 2


def test_an_unchanged_file_ingested_again_is_a_no_op(bank: Bank):
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "lumen.md", V1)
    (first,), _ = _ingest(bank, "run-1")
    before = _counts(bank)
    generation = (bank.root / ".generation").read_text()
    (path,) = scan(corpus)
    path.path.touch()  # a new mtime, same bytes
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="run-2")
    assert [(o.status, o.source_id, o.version) for o in outcomes] == [("unchanged", first.source_id, 1)]
    summary = extract_sources(bank, [first.source_id], NLPExtractor(), run_id="run-2")
    assert (summary.documents, summary.skipped) == (0, 1)
    assert _counts(bank) == before
    assert int((bank.root / ".generation").read_text()) >= int(generation)
    with bank.reading() as db:
        assert db.sql("SELECT count(*) FROM objects WHERE run_id = 'run-2'")[0][0] == 0


def test_reverting_a_file_to_earlier_content_is_a_third_version(bank: Bank):
    corpus = bank.settings.kbmd_dir
    for text in (V1, V2, V1):
        write_doc(corpus, "lumen.md", text)
        _ingest(bank, "run")
    with bank.reading() as db:
        versions = db.sources_for_partition(scan(corpus)[0].partition_key)
    assert [(d.version, d.status) for d in versions] == [
        (1, Status.SUPERSEDED), (2, Status.SUPERSEDED), (3, Status.ACTIVE)]
    assert len({d.id for d in versions}) == 3
    assert versions[2].supersedes == versions[1].id and versions[2].sha256 == versions[0].sha256
    active = _objects_of(bank, versions[2].id)
    assert active and {o.status for o in active.values()} == {Status.ACTIVE}
    assert {o.status for o in _objects_of(bank, versions[0].id).values()} == {Status.SUPERSEDED}
    assert bank.check_consistency()["consistent"] is True
    assert layer0_hash_mismatches(bank) == []


@pytest.mark.parametrize("where", ["before superseding", "while superseding"])
def test_a_crash_between_new_version_and_superseding_is_repaired_by_rerunning(bank: Bank, monkeypatch, where):
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "lumen.md", V1)
    (first,), _ = _ingest(bank, "run-1")
    write_doc(corpus, "lumen.md", V2)
    # The states a run killed there left before a write session was one transaction (banks written then
    # may hold them): before, the new version stored and the old one still active; while, the old
    # version's row marked superseded but its objects' rows not (the first object write of this run).
    cls, name = (Bank, "supersede_sources") if where == "before superseding" else (MetadataStore, "upsert_objects")
    original = getattr(cls, name)
    state = {"skipped": False}

    def skipped_once(self, *args):
        if not state["skipped"]:
            state["skipped"] = True
            return None
        return original(self, *args)

    monkeypatch.setattr(cls, name, skipped_once)
    ingest_sources(bank, scan(corpus), corpus, run_id="run-2")
    assert state["skipped"]
    with bank.reading() as db:
        assert db.sql("SELECT count(*) FROM objects WHERE status = 'active'")[0][0] > 0  # left half-done

    outcomes, _ = _ingest(bank, "run-3")
    assert [o.status for o in outcomes] == ["unchanged"]
    with bank.reading() as db:
        versions = db.sources_for_partition(first.partition_key)
    assert [(d.version, d.status) for d in versions] == [(1, Status.SUPERSEDED), (2, Status.ACTIVE)]
    assert {o.status for o in _objects_of(bank, first.source_id).values()} == {Status.SUPERSEDED}
    extract_sources(bank, [versions[1].id], NLPExtractor(), run_id="run-3")
    assert {o.status for o in _objects_of(bank, versions[1].id).values()} == {Status.ACTIVE}
    assert bank.check_consistency()["consistent"] is True


def test_bad_files_are_rejected_with_their_reason_and_good_ones_ingested(bank: Bank):
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "good.md", V1)
    (corpus / "empty.md").write_bytes(b"")
    (corpus / "latin.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    outcomes = {o.path: o for o in ingest_sources(bank, scan(corpus), corpus, run_id="run-1")}
    assert outcomes["good.md"].status == "new"
    assert (outcomes["empty.md"].status, outcomes["empty.md"].reason) == ("rejected", "file is empty")
    assert outcomes["latin.md"].status == "rejected" and "not valid UTF-8" in outcomes["latin.md"].reason
    with bank.reading() as db:
        assert db.sql("SELECT path, reason, run_id FROM rejections ORDER BY path") == [
            ("empty.md", "file is empty", "run-1"), ("latin.md", outcomes["latin.md"].reason, "run-1")]
        assert [d.path for d in db.sources()] == ["good.md"]
    assert bank.status()["rejected"] == 2


def test_source_ids_are_deterministic(bank: Bank):
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "lumen.md", V1)
    (outcome,) = ingest_sources(bank, scan(corpus), corpus)
    other = Bank(settings=bank.settings.model_copy(update={"memory_bank_dir": bank.root.parent / "bank2"}))
    (again,) = ingest_sources(other, scan(corpus), corpus)
    assert again.source_id == outcome.source_id and again.source_id.startswith("src-")
    assert outcome.source_id in {stable_id("src", "lumen.md", outcome.sha256),
                                 stable_id("src", "lumen.md", outcome.sha256, "1")}


def test_duckdb_sessions_use_the_configured_memory_limit(tmp_path: Path) -> None:
    bank = Bank(settings=Settings(memory_bank_dir=tmp_path / "bank", kbmd_dir=tmp_path / "kbmd",
                                  duckdb_memory_limit="300MB"))
    bank.init()
    with bank.reading() as db:
        limit = db.sql("SELECT current_setting('memory_limit')")[0][0]
    with bank.writing() as db:
        assert db.sql("SELECT current_setting('memory_limit')")[0][0] == limit
    assert limit.startswith(("286", "300"))  # DuckDB reports it in MiB/MB ("286.1 MiB")


def test_a_read_or_write_session_over_the_memory_limit_names_the_setting_to_raise(tmp_path: Path) -> None:
    bank = Bank(settings=Settings(memory_bank_dir=tmp_path / "bank", kbmd_dir=tmp_path / "kbmd",
                                  duckdb_memory_limit="20MB"))
    bank.init()
    with pytest.raises(duckdb.OutOfMemoryException, match="SMB_DUCKDB_MEMORY_LIMIT"), bank.reading() as db:
        db.sql("SELECT list(range) FROM range(20000000)")  # one 160 MB list: more than 20 MB
    with pytest.raises(duckdb.OutOfMemoryException, match="SMB_DUCKDB_MEMORY_LIMIT"), bank.writing() as db:
        db.con.execute("CREATE TABLE big AS SELECT list(range) AS l FROM range(20000000)")
    # the failed session left the bank as it was (read with the default limit: this process's DuckDB may
    # hold more than 20 MB for other banks its tests read, and then cannot be set to it)
    with Bank(settings=bank.settings.model_copy(update={"duckdb_memory_limit": "2GB"})).reading() as db:
        assert db.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'big'") == [(0,)]


# ---- one vector per distinct text ---------------------------------------------------------------


def _entity(object_id: str, name: str, source: str) -> Entity:
    return Entity(id=object_id, title=name, entity_kind=EntityKind.PLACE, source_ids=[source])


def test_objects_with_the_same_text_share_one_vector_until_a_text_changes(bank: Bank):
    bank.write([_entity("ent-lisbon-1", "Lisbon", "src-1"), _entity("ent-lisbon-2", "Lisbon", "src-2"),
                _entity("ent-berlin", "Berlin", "src-3")])
    key = vector_key("Lisbon")
    assert bank.vectors.count() == 2 and bank.vectors.existing([key]) == {key}
    with bank.reading() as db:
        first, second = db.get_object("ent-lisbon-1"), db.get_object("ent-lisbon-2")
    assert first.embedding_id == second.embedding_id == key
    vectors = bank.vectors_of(["ent-lisbon-1", "ent-lisbon-2", "ent-berlin"])
    assert float(vectors["ent-lisbon-1"] @ vectors["ent-lisbon-2"]) > 0.9999

    first.status = Status.MERGED  # a status change keeps the vector
    bank.update_objects([first])
    assert bank.vectors.count() == 2 and bank.check_consistency()["consistent"] is True

    first.title = "Lisboa"  # the text changed: its own vector; Lisbon's stays for the other object
    bank.update_objects([first])
    assert bank.vectors.count() == 3 and bank.vectors.existing([key]) == {key}
    second.title = "Lisboa"  # nobody says "Lisbon" any more: its vector goes
    bank.update_objects([second])
    assert bank.vectors.count() == 2 and bank.vectors.existing([key]) == set()
    assert bank.vectors_of(["ent-lisbon-2"])["ent-lisbon-2"] @ bank.embedder.embed(["Lisboa"])[0] > 0.9999
    assert bank.check_consistency()["consistent"] is True


def test_a_write_session_commits_its_writes_together_or_not_at_all(bank: Bank):
    bank.write([_entity("ent-lisbon-1", "Lisbon", "src-1"), _entity("ent-berlin", "Berlin", "src-3")])
    with bank.reading() as db:
        lisbon = db.get_object("ent-lisbon-1")
    lisbon.title = "Lisboa"
    with pytest.raises(RuntimeError, match="injected"), bank.writing():
        bank.update_objects([lisbon])  # a new text, so "Lisbon" would lose its vector
        bank.write([_entity("ent-oslo", "Oslo", "src-4")])
        raise RuntimeError("killed before the session ended (injected)")
    with bank.reading() as db:  # DuckDB (the commit record) kept neither write
        assert db.get_object("ent-lisbon-1").title == "Lisbon" and db.get_object("ent-oslo") is None
    assert bank.vectors.existing([vector_key("Lisbon")]) == {vector_key("Lisbon")}  # still its object's vector
    assert bank.check_consistency()["missing_vectors"] == []

    with bank.reading() as db:  # the same writes re-run, from what the bank holds: now both land,
        lisbon = db.get_object("ent-lisbon-1")  # and the vector no object uses any more goes
    lisbon.title = "Lisboa"
    with bank.writing():
        bank.update_objects([lisbon])
        bank.write([_entity("ent-oslo", "Oslo", "src-4")])
    with bank.reading() as db:
        assert db.get_object("ent-lisbon-1").title == "Lisboa" and db.get_object("ent-oslo") is not None
    assert bank.vectors.existing([vector_key("Lisbon")]) == set()
    assert bank.check_consistency()["consistent"] is True


def test_writing_embeds_only_the_texts_whose_vector_is_not_stored_yet(bank: Bank, monkeypatch):
    bank.write([_entity("ent-lisbon-1", "Lisbon", "src-1"), _entity("ent-berlin", "Berlin", "src-3")])
    embedded: list[str] = []
    real_embed = bank.embedder.embed
    monkeypatch.setattr(bank.embedder, "embed", lambda texts: embedded.extend(texts) or real_embed(texts))
    rewritten = _entity("ent-lisbon-1", "Lisbon", "src-1")
    rewritten.aliases = ["Lisboa"]  # a rewrite that keeps the text (as a canonical object given members)
    bank.write([rewritten, _entity("ent-lisbon-2", "Lisbon", "src-2"), _entity("ent-oslo", "Oslo", "src-4")])
    assert embedded == ["Oslo"]
    vectors = bank.vectors_of(["ent-lisbon-1", "ent-lisbon-2", "ent-oslo"])
    assert float(vectors["ent-lisbon-2"] @ real_embed(["Lisbon"])[0]) > 0.9999
    assert float(vectors["ent-oslo"] @ real_embed(["Oslo"])[0]) > 0.9999
    assert bank.vectors.count() == 3 and bank.check_consistency()["consistent"] is True


def test_vectors_embedded_before_a_session_are_checked_again_inside_it(bank: Bank, monkeypatch):
    """A cycle embeds the texts Chroma lacks before it takes the lock, then writes inside its session
    with those vectors. A vector it saw as stored may be gone by then (another writer deleted it when
    its last object changed text): write embeds that text under the lock, so no object is left
    pointing at no vector, and embeds nothing else again."""
    bank.write([_entity("ent-lisbon", "Lisbon", "src-1")])
    objects = [_entity("ent-lisbon-2", "Lisbon", "src-2"), _entity("ent-oslo", "Oslo", "src-3")]
    vectors = bank.embed_new_texts(objects)
    assert list(vectors) == [vector_key("Oslo")]
    bank.vectors.delete([vector_key("Lisbon")])  # between the embedding and the session
    embedded: list[str] = []
    real_embed = bank.embedder.embed
    monkeypatch.setattr(bank.embedder, "embed", lambda texts: embedded.extend(texts) or real_embed(texts))
    with bank.writing():
        bank.write(objects, vectors=vectors)
    assert embedded == ["Lisbon"]
    assert float(bank.vectors_of(["ent-lisbon"])["ent-lisbon"] @ real_embed(["Lisbon"])[0]) > 0.9999
    assert bank.vectors.count() == 2 and bank.check_consistency()["consistent"] is True


def test_writing_nothing_opens_no_write_session(bank: Bank, monkeypatch):
    bank.write([_entity("ent-oslo", "Oslo", "src-4"), _entity("ent-bergen", "Bergen", "src-5")])
    sessions: list[int] = []
    real_writing = type(bank).writing
    monkeypatch.setattr(type(bank), "writing", lambda self: sessions.append(1) or real_writing(self))
    bank.update_objects([])
    bank.add_edges([])
    bank.remove_edges([])
    assert sessions == []
    bank.add_edges([Edge.between("ent-oslo", "ent-bergen", EdgeType.RELATED_TO)])
    assert sessions == [1]


def test_nearest_expands_each_text_to_its_objects_within_the_filters(bank: Bank):
    bank.write([_entity(f"ent-paris-{n}", "Paris", f"src-{n}") for n in range(5)]
               + [_entity("ent-paris-tx", "Paris, Texas", "src-9"), _entity("ent-oslo", "Oslo", "src-8"),
                  Concept(id="con-paris", title="Paris", source_ids=["src-7"])])
    query = bank.embedder.embed(["Paris"])[0]
    (hits,) = bank.nearest([query], 3, prefix="ent-", with_source=True)
    assert hits == [(f"ent-paris-{n}", pytest.approx(1.0, abs=1e-4), f"src-{n}") for n in range(3)]
    (hits,) = bank.nearest([query], 3, types=("concept",))
    assert [h[0] for h in hits] == ["con-paris"]
    (hits,) = bank.nearest([query], 2, prefix="ent-", below=1 - 1e-5)  # the same text left out
    assert [h[0] for h in hits][0] == "ent-paris-tx" and "ent-paris-0" not in [h[0] for h in hits]

    with bank.reading() as db:
        stale = [db.get_object(f"ent-paris-{n}") for n in range(5)]
    for obj in stale:
        obj.status = Status.SUPERSEDED
    bank.update_objects(stale)
    (hits,) = bank.nearest([query], 2, prefix="ent-", statuses=("active",))
    assert [h[0] for h in hits] == ["ent-paris-tx", "ent-oslo"]


def test_a_bank_with_one_vector_per_object_is_rekeyed_once(bank: Bank):
    from smb_core import bank as bank_module
    from smb_core.stores.vectors import LEGACY_COLLECTION

    objects, edges = _objects()
    bank.write(objects, edges)
    marker = np.zeros(384, dtype=np.float32)
    marker[7] = 1.0  # the old collection's vector of the claim: copied, not embedded again
    legacy = bank.vectors.client.create_collection(LEGACY_COLLECTION, embedding_function=None)
    legacy.add(ids=[o.id for o in objects],
               embeddings=[marker if o.id == "clm-founded" else bank.embedder.embed([o.text()])[0] for o in objects])
    with bank.writing() as db:  # as such a bank stored them: embedding_id = the object's id
        for obj in objects:
            obj.embedding_id = obj.id
            bank.markdown.write(obj)
        db.upsert_objects(objects)
    bank.vectors.client.delete_collection("smb-texts")
    bank.vectors.reload()
    bank_module._VECTORS_CHECKED.clear()

    upgraded = Bank(settings=bank.settings)
    assert upgraded.check_consistency()["consistent"] is True
    with upgraded.reading() as db:
        rows = dict(db.sql("SELECT id, embedding_id FROM objects"))
    assert rows == {o.id: vector_key(o.text()) for o in objects}

    assert from_markdown((bank.root / "layer-1/claims/clm-founded.md").read_text()).embedding_id == rows["clm-founded"]
    assert float(upgraded.vectors_of(["clm-founded"])["clm-founded"] @ marker) > 0.9999
    assert LEGACY_COLLECTION not in {c.name for c in upgraded.vectors.client.list_collections()}


def test_nearest_finds_a_rare_type_beyond_the_index_neighbourhood_by_exact_search(bank: Bank):
    notes = [Concept(id=f"con-note-{n:03d}", title=f"meeting note {n}", source_ids=["src-1"]) for n in range(80)]
    insight = Insight(id="ins-revenue", title="Quarterly revenue grew", description="", source_ids=["src-2"])
    bank.write([*notes, insight])
    query = bank.embedder.embed(["meeting note 5"])[0]
    (hits,) = bank.nearest([query], 1, types=("insight",), over=1)  # 64 nearest texts are all notes
    assert [h[0] for h in hits] == ["ins-revenue"]
    (hits,) = bank.nearest([query], 1, types=("insight",), statuses=("superseded",), over=1)
    assert hits == []


def test_nearest_in_blocks_of_queries_answers_as_all_at_once(bank: Bank, monkeypatch):
    """A global pass asks for the neighbours of every canonical concept: `nearest` looks them up a
    block at a time (bounded memory), with the same answers, including those found only by widening
    the search or by exact search."""
    from smb_core import bank as bank_module

    notes = [Concept(id=f"con-note-{n:03d}", title=f"meeting note {n}", source_ids=[f"src-{n % 7}"]) for n in range(80)]
    insight = Insight(id="ins-revenue", title="Quarterly revenue grew", description="", source_ids=["src-2"])
    bank.write([*notes, insight])
    queries = bank.embedder.embed([f"meeting note {n}" for n in range(0, 80, 3)] + ["revenue"])
    asks = [dict(k=3, prefix="con-"), dict(k=1, types=("insight",), over=1), dict(k=2, types=("concept",), over=1),
            dict(k=4, below=0.99, with_source=True)]
    whole = [bank.nearest(queries, **ask) for ask in asks]
    monkeypatch.setattr(bank_module, "NEAREST_BLOCK", 4)
    bank._expansions.clear()
    assert [bank.nearest(queries, **ask) for ask in asks] == whole
    assert all(hits == [("ins-revenue", pytest.approx(hits[0][1]))] for hits in whole[1])  # by exact search


def test_an_objects_table_without_the_source_column_gets_it_filled_in(tmp_path: Path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))  # the objects table as banks before the column wrote it
    con.execute("CREATE TABLE objects (id VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, layer INTEGER NOT NULL, "
                "status VARCHAR NOT NULL, title VARCHAR, text VARCHAR, confidence DOUBLE, created TIMESTAMPTZ, "
                "modified TIMESTAMPTZ, embedding_id VARCHAR, graph_node_id VARCHAR, run_id VARCHAR, file_path VARCHAR, "
                "source_ids VARCHAR[], tags VARCHAR[], derived_from VARCHAR[], disputed_by VARCHAR[], data JSON)")
    con.execute("CREATE INDEX objects_type ON objects (type)")
    con.execute("INSERT INTO objects (id, type, layer, status, source_ids, data) VALUES "
                "('clm-a', 'claim', 1, 'active', ['src-2', 'src-3'], '{}'), "
                "('ins-b', 'insight', 3, 'active', [], '{}')")
    con.close()
    store = MetadataStore(path).connect()
    try:
        assert store.sql("SELECT id, source FROM objects ORDER BY id") == [("clm-a", "src-2"), ("ins-b", "")]
    finally:
        store.close()


def test_nearest_sees_what_another_process_changed_since_it_last_asked(bank: Bank):
    bank.write([_entity("ent-porto-1", "Porto", "src-1"), _entity("ent-porto-2", "Porto", "src-2")])
    query = bank.embedder.embed(["Porto"])[0]
    reader = Bank(settings=bank.settings)  # another process
    assert [h[0] for h in reader.nearest([query], 2, statuses=("active",))[0]] == ["ent-porto-1", "ent-porto-2"]
    with bank.reading() as db:
        gone = db.get_object("ent-porto-1")
    gone.status = Status.SUPERSEDED
    bank.update_objects([gone])
    assert [h[0] for h in reader.nearest([query], 2, statuses=("active",))[0]] == ["ent-porto-2"]
    with reader.writing():  # inside its own write session it reads DuckDB afresh
        hits = reader.nearest([query], 2, statuses=("superseded",))[0]
    assert [h[0] for h in hits] == ["ent-porto-1"]


def test_only_documents_get_bm25_postings(bank: Bank, settings):
    write_doc(settings.kbmd_dir, "okafor.md", "# Okafor\n\nAda Okafor founded Lumen Labs in Lisbon in 2019.\n")
    (outcome,) = ingest_sources(bank, scan(settings.kbmd_dir), settings.kbmd_dir)
    assert extract_sources(bank, [outcome.source_id], NLPExtractor()).documents == 1
    bank.write([_entity("ent-paris", "Paris", "src-1")])
    with bank.reading() as db:
        kinds = db.sql("SELECT DISTINCT u.kind FROM lex_postings p JOIN lex_units u ON u.unit = p.unit")
        objects = db.sql("SELECT count(*) FROM objects")[0][0]
    assert kinds == [("source",)] and objects > 4


def test_an_older_bank_loses_its_object_postings_and_unused_indexes(tmp_path: Path):
    path = tmp_path / "old.duckdb"
    MetadataStore(path).connect().close()
    con = duckdb.connect(str(path))  # as banks before: postings of objects too, and four more indexes
    con.execute("INSERT INTO lex_units VALUES ('src-1', 'source', 2), ('clm-1', 'claim', 2), ('ent-1', 'entity', 1)")
    con.execute("INSERT INTO lex_postings VALUES ('lisbon', 'src-1', 1), ('okafor', 'src-1', 1), "
                "('lisbon', 'clm-1', 1), ('okafor', 'clm-1', 1), ('okafor', 'ent-1', 1)")
    for name, table, column in [("spans_object", "spans", "object_id"), ("names_object", "names", "object_id"),
                                ("lex_term", "lex_postings", "term"), ("lex_unit", "lex_postings", "unit")]:
        con.execute(f"CREATE INDEX {name} ON {table} ({column})")
    con.close()
    metadata._SCHEMA_READY.clear()  # as in a new process
    store = MetadataStore(path).connect()
    try:
        postings = store.sql("SELECT unit, term FROM lex_postings ORDER BY ALL")
        assert postings == [("src-1", "lisbon"), ("src-1", "okafor")]
        assert store.sql("SELECT unit FROM lex_units") == [("src-1",)]
        assert store.sql("SELECT index_name FROM duckdb_indexes() WHERE index_name IN "
                         "('spans_object', 'names_object', 'lex_term', 'lex_unit')") == []
    finally:
        store.close()


def test_a_bank_refuses_an_embedder_other_than_the_one_its_vectors_come_from(bank: Bank, settings: Settings,
                                                                             capsys) -> None:
    from smb_core.bank import EmbedderMismatchError
    from smb_core.cli import main as smb
    from smb_core.embed import MiniLMEmbedder

    with bank.reading() as db:  # the fixture's first write session recorded it
        assert db.sql("SELECT value FROM meta WHERE key = 'embedder'") == [(MiniLMEmbedder.name,)]
    other = Bank(settings=settings.model_copy(update={"embedding_model": "ollama:nomic-embed-text"}))
    for session in (other.reading, other.writing):  # refused before anything is embedded or written
        with pytest.raises(EmbedderMismatchError, match="come from the embedder 'all-MiniLM-L6-v2-onnx-int8', but "
                                                        "SMB_EMBEDDING_MODEL selects 'ollama:nomic-embed-text'"):
            with session():
                pass
    with Bank(settings=settings.model_copy(update={"embedding_model": "minilm-int8"})).reading():
        pass  # the default's short name is the same embedder
    assert smb(["status", "--bank", str(settings.memory_bank_dir)]) == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SMB_EMBEDDING_MODEL", "ollama:nomic-embed-text")
        from smb_core.settings import get_settings

        get_settings.cache_clear()
        try:
            assert smb(["status", "--bank", str(settings.memory_bank_dir)]) == 1
        finally:
            get_settings.cache_clear()
    assert "error: the vectors of the bank at" in capsys.readouterr().err
