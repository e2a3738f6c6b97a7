"""The agent interface, `smb_core.query`, on a real bank built from a small multi-hop corpus."""

import json
import re
from pathlib import Path

import pytest

from smb_core.bank import LayerZeroImmutableError
from smb_core.cli import main as smb
from smb_core.model import Claim, Concept, Contradiction, Edge, ModelError, Status, stable_id
from smb_core.query import MemoryBank
from smb_core.stores.graph import GraphStore, multi_hop_over
from tests.conftest import extracted_bank

CORPUS = {
    "aurora.md": "# The Aurora Index\n\nThe Aurora index is a disk-resident graph index in Lumen DB. "
    "Tomas Varga designed the Aurora index between 2019 and 2021.\n",
    "varga.md": "# Tomas Varga\n\nTomas Varga is a Hungarian engineer. Tomas Varga was born in Debrecen in 1984. "
    "He studied mathematics in Budapest.\n",
    "lumen.md": "# Lumen DB\n\nLumen DB is an open source vector database. Lumen Labs released Lumen DB 1.0 in 2019.\n",
    "okafor.md": "# Mara Okafor\n\nMara Okafor founded Lumen Labs in Lisbon in 2017. She was born in Lagos.\n",
    "weather.md": "# Lisbon weather\n\nLisbon has mild winters and hot, dry summers. Rain falls mostly in winter.\n",
}


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory) -> Path:
    return extracted_bank(tmp_path_factory.mktemp("query"), CORPUS)


def test_recall_documents_follows_a_multi_hop_question(bank_dir: Path) -> None:
    with MemoryBank.open(bank_dir) as bank:
        hits = bank.recall_documents("Where was the designer of the Aurora index born?", k=3)
    assert [h.path for h in hits][:2] == ["aurora.md", "varga.md"]
    assert hits[0].score >= hits[1].score >= hits[2].score


def test_recall_hits_carry_sources_spans_and_graph_paths(bank_dir: Path) -> None:
    with MemoryBank.open(bank_dir) as bank:
        hits = bank.recall("Who designed the Aurora index?", k=5)
        text = bank.source_text(hits[0].source.id)
    top = hits[0]
    assert "Tomas Varga designed the Aurora index" in top.object.text()
    assert top.source.path == "aurora.md" and top.source.title == "The Aurora Index"
    span = top.source.span
    assert text[span.start : span.end].startswith("Tomas Varga designed")
    assert all(h.source is not None for h in hits)
    bridged = [h for h in MemoryBank.open(bank_dir).recall("Where was the designer of the Aurora index born?", k=10)
               if h.source.path == "varga.md"]
    assert bridged and any(p and p[0] != p[-1] for h in bridged for p in h.paths)


def test_search_filters_by_type(bank_dir: Path) -> None:
    with MemoryBank.open(bank_dir) as bank:
        hits = bank.search("vector database", k=3, type="claim")
    assert hits and all(h.object.type.value == "claim" for h in hits)
    assert "vector database" in hits[0].object.text()


def test_get_list_sources_and_graph(bank_dir: Path) -> None:
    with MemoryBank.open(bank_dir) as bank:
        assert len(bank.sources()) == len(CORPUS)
        entities = bank.list(type="entity", limit=1000)
        varga = next(e for e in entities if e.title == "Tomas Varga" and "document-subject" not in e.tags)
        assert bank.get(varga.id) == varga
        assert bank.list(type="claim", layer=1, status="active", limit=2) and bank.list(layer=6) == []
        neighbours = bank.neighbors(varga.id)
        assert neighbours and {n["edge_type"] for n in neighbours} <= {"references", "related_to", "extends",
                                                                       "derives_from", "contains"}
        assert all(n["edge_type"] == "references" for n in bank.neighbors(varga.id, edge_type="references"))
        paths = bank.multi_hop(varga.id, max_hops=2)
        assert paths and all(p[0] == varga.id and 2 <= len(p) <= 3 for p in paths)
        graph = bank._bank.graph  # the networkx graph: the same hops as DuckDB's edge table gives
        assert paths == graph.multi_hop(varga.id, max_hops=2) and len(paths) > len(neighbours)
        assert bank.multi_hop(varga.id, 3, "references") == graph.multi_hop(varga.id, 3, "references")
        assert sorted(map(str, neighbours)) == sorted(map(str, graph.neighbors(varga.id)))
        roots = [varga.id, paths[0][-1], "no-such-node"]  # several roots, one query per hop for all of them
        with bank._bank.reading() as db:
            together = multi_hop_over(db.edges_touching, roots, max_hops=2, limit=5)
        assert together == {root: graph.multi_hop(root, max_hops=2, limit=5) for root in roots}
        assert len(together[varga.id]) == 5 and together["no-such-node"] == []
        far = paths[-1][-1]
        assert bank.path(varga.id, far)[0] == varga.id and bank.path(varga.id, far)[-1] == far
        undirected = graph.ensure_loaded().to_undirected(as_view=True)
        others = sorted(n for n, t in graph.ensure_loaded().nodes(data="type") if t in ("entity", "concept"))[:40]
        for other in others:  # a shortest path over DuckDB's edge table, as long as networkx's, along real edges
            found = bank.path(varga.id, other)
            assert len(found) == len(graph.path(varga.id, other)), other
            assert all(undirected.has_edge(x, y) for x, y in zip(found, found[1:]))
            assert found == [] or (found[0], found[-1]) == (varga.id, other)
        assert any(len(bank.path(varga.id, other)) > 3 for other in others)
        assert bank.path(varga.id, varga.id) == [varga.id] and bank.path(varga.id, "no-such-node") == []
        assert varga.id in bank.nodes_by_type("entity")
        for node_type in ("concept", "entity", "claim", "insight", "narrative", "abstraction"):  # as the graph has them
            assert bank.nodes_by_type(node_type) == graph.nodes_by_type(node_type), node_type
        stats = bank.graph_stats()
        assert GraphStore(graph.directory).stats() == graph.stats()  # computed in SQL without loading it
        assert stats["nodes"] > 10 and stats["edges"] > 10 and set(stats["node_types"]) <= {
            "concept", "entity", "claim", "insight", "narrative", "abstraction"}
        with pytest.raises(ModelError):
            bank.nodes_by_type("document")
        with pytest.raises(ModelError):
            bank.recall("x", edge_type="likes")


def test_read_only_handle_refuses_writes(bank_dir: Path) -> None:
    with MemoryBank.open(bank_dir) as bank:
        with pytest.raises(PermissionError):
            bank.create(Concept(id="con-x", title="x"))


def test_agent_writes_are_consistent_and_visible(tmp_path: Path, bank_dir: Path) -> None:
    import shutil

    path = tmp_path / "bank"
    shutil.copytree(bank_dir, path)
    with MemoryBank.open(path, read_only=False, agent="tester") as bank:
        note = bank.remember("Priya Raman prefers disk-resident indexes for billion-scale search.",
                             title="Meeting note", tags=["meeting"])
        created = bank.create(Concept(id=stable_id("con", "agent", "disk"), title="disk-resident index"))
        updated = bank.update(created.id, description="An index whose graph lives on SSD.")
        edge = bank.link(created.id, bank.list(type="entity", limit=1)[0].id, "related_to")
        deprecated = bank.deprecate(created.id, "superseded by the canonical concept")
        assert deprecated.status == Status.DEPRECATED and bank.root == path.resolve()
        with pytest.raises(ModelError):
            bank.update(created.id, id="other")
        with pytest.raises(KeyError):
            bank.link(created.id, "missing-id", "related_to")
        with pytest.raises(ModelError):
            bank.link(created.id, created.id, "likes")
        with pytest.raises(LayerZeroImmutableError):
            bank._bank.write([bank.sources()[0]])
    assert isinstance(edge, Edge)
    with MemoryBank.open(path) as reader:  # another handle sees every write
        assert reader.get(created.id).status == Status.DEPRECATED
        assert reader.get(created.id).status_reason == "superseded by the canonical concept"
        assert reader.get(created.id).description == updated.description
        assert reader.get(created.id).run_id == "agent:tester"
        assert any(s.id == note.id and s.provenance == "agent:tester" for s in reader.sources())
        hits = reader.recall("Which indexes does Priya Raman prefer?", k=3)
        assert hits[0].source.id == note.id
        assert reader._bank.status()["consistent"]


def test_cached_claim_vectors_follow_writes_from_another_handle(tmp_path: Path, bank_dir: Path, monkeypatch) -> None:
    """The hop's per-document claim vectors are kept between questions; a write by anyone (here another
    handle) must make the next question see the document's claims as they are now, and the cache
    stays within its size."""
    import shutil

    from smb_core.recall import engine as recall_engine

    path = tmp_path / "bank"
    shutil.copytree(bank_dir, path)
    monkeypatch.setattr(recall_engine, "CLAIM_CACHE_DOCUMENTS", 2)
    with MemoryBank.open(path) as reader, MemoryBank.open(path, read_only=False) as writer:
        by_path = {s.path: s.id for s in reader.sources()}
        aurora, others = by_path["aurora.md"], [by_path["varga.md"], by_path["lumen.md"]]
        question = reader._bank.embedder.embed(["Which company maintains the Aurora index?"])[0]
        with reader._bank.reading() as db:
            assert reader._engine._claim_vectors(db, others).keys() == set(others)
            before = reader._engine._claim_vectors(db, [aurora])[aurora]
            score_before = reader._engine._document_similarity(db, [aurora], question)[aurora]
        assert len(before) >= 1 and list(reader._engine._claims) == [others[1], aurora]  # the oldest went
        statement = "Lumen Labs maintains the Aurora index."
        writer._bank.write([Claim(id=stable_id("clm", "test", "aurora-maintainer"), title=statement,
                                  statement=statement, subject="the Aurora index", source_ids=[aurora])])
        with reader._bank.reading() as db:
            after = reader._engine._claim_vectors(db, [aurora])[aurora]
            score_after = reader._engine._document_similarity(db, [aurora], question)[aurora]
    assert len(after) == len(before) + 1 and score_after > score_before


def test_contradictions_are_shown_on_hits(tmp_path: Path, bank_dir: Path) -> None:
    import shutil

    path = tmp_path / "bank"
    shutil.copytree(bank_dir, path)
    with MemoryBank.open(path, read_only=False) as bank:
        claim = next(c for c in bank.list(type="claim", limit=100) if "born in Debrecen" in c.text())
        other = Claim(id=stable_id("clm", "test", "szeged"), title="Tomas Varga was born in Szeged.",
                      statement="Tomas Varga was born in Szeged.", source_ids=[claim.source_ids[0]])
        bank.create(other)
        contradiction = Contradiction(id=stable_id("ctr", claim.id, other.id), title="birthplace of Tomas Varga",
                                      claim_ids=[claim.id, other.id], derived_from=[claim.id, other.id],
                                      attribute="place")
        bank.create(contradiction)
        hits = bank.recall("Where was Tomas Varga born?", k=5)
        listed = bank.contradictions()
    disputed = [h for h in hits if h.object.id == claim.id]
    assert disputed and disputed[0].disputed and disputed[0].contradictions[0].id == contradiction.id
    assert listed[0]["id"] == contradiction.id and {s["id"] for s in listed[0]["sides"]} == {claim.id, other.id}


def test_cli_recall_json(bank_dir: Path, capsys) -> None:
    assert smb(["recall", "Where was the designer of the Aurora index born?", "--bank", str(bank_dir),
                "--documents", "--json", "--k", "2"]) == 0
    documents = json.loads(capsys.readouterr().out)
    assert [d["path"] for d in documents] == ["aurora.md", "varga.md"]
    assert set(documents[0]) == {"id", "path", "title", "score"}
    assert smb(["recall", "Who designed the Aurora index?", "--bank", str(bank_dir), "--json", "--k", "3"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert set(hits[0]) == {"id", "type", "title", "text", "score", "confidence", "source", "paths", "contradictions",
                            "disputed", "disputed_by"}
    assert set(hits[0]["source"]) == {"id", "path", "title", "span"}


def test_agent_writes_cannot_replace_dangle_or_bypass_a_contradictions_lifecycle(tmp_path: Path,
                                                                                 bank_dir: Path) -> None:
    import shutil

    from smb_core.model import Insight

    path = tmp_path / "bank"
    shutil.copytree(bank_dir, path)
    with MemoryBank.open(path, read_only=False) as bank:
        claim, other = [c for c in bank.list(type="claim", limit=100) if "Varga" in c.text()][:2]
        contradiction = bank.create(Contradiction(id="ctr-test", title="a dispute", claim_ids=[claim.id, other.id],
                                                  derived_from=[claim.id, other.id]))
        source = bank.sources()[0].id
        refused = {
            "already exists (a contradiction)": lambda: bank.create(Insight(id="ctr-test", title="a replacement")),
            "clm-nope": lambda: bank.create(Contradiction(id="ctr-x", title="x", claim_ids=[claim.id, "clm-nope"])),
            "names 1 id(s) that are not in the bank: nope": lambda: bank.create(
                Claim(id="clm-x", title="x", statement="x", derived_from=["nope"], source_ids=[source])),
            "src-nope": lambda: bank.create(Claim(id="clm-y", title="y", statement="y", source_ids=["src-nope"])),
            "Input should be 'open', 'explained' or 'superseded'": lambda: bank.update("ctr-test", resolution="maybe"),
            "never deprecated": lambda: bank.update("ctr-test", status="deprecated"),
            "keeps its sides": lambda: bank.update("ctr-test", claim_ids=[claim.id]),
            "is not a contradiction (it is a claim)": lambda: bank.resolve(claim.id, "explained", "x"),
            "not in the bank: gone": lambda: bank.update(claim.id, derived_from=["gone"]),
        }
        for message, attempt in refused.items():
            with pytest.raises(ModelError, match=re.escape(message)):
                attempt()
        with pytest.raises(LayerZeroImmutableError, match="layer-0 document"):
            bank.update(source, title="x")
        with pytest.raises(KeyError, match="no memory object ctr-missing"):
            bank.resolve("ctr-missing", "explained", "x")
        assert bank.get("ctr-x") is None and bank.get("clm-x") is None and bank.get("clm-y") is None
        assert bank.get("ctr-test") == contradiction and [c["id"] for c in bank.contradictions()] == ["ctr-test"]
        assert bank.resolve("ctr-test", "explained", "two dates for two events").resolution == "explained"
        assert bank.update(claim.id, derived_from=[other.id]).derived_from == [other.id]  # existing ids are fine
        assert bank._bank.status()["consistent"]


def test_reads_refuse_unknown_filters_empty_questions_and_k_below_one(bank_dir: Path) -> None:
    from smb_core.query import QueryError

    with MemoryBank.open(bank_dir) as bank:
        for attempt, message in [
            (lambda: bank.list(type="bogus"), "unknown memory type 'bogus'; allowed: concept, "),
            (lambda: bank.list(status="bogus"), "unknown status 'bogus'; allowed: active, "),
            (lambda: bank.search("index", type="bogus"), "unknown memory type"),
            (lambda: bank.recall("index", types=["claim", "bogus"]), "unknown memory type 'bogus'"),
            (lambda: bank.contradictions(resolution="bogus"), "unknown resolution 'bogus'"),
        ]:
            with pytest.raises(ModelError, match=message):
                attempt()
        for attempt, message in [(lambda: bank.recall("  "), "empty"), (lambda: bank.search(""), "empty"),
                                 (lambda: bank.recall_documents(""), "empty"),
                                 (lambda: bank.recall("index", k=-3), "k must be at least 1, got -3")]:
            with pytest.raises(QueryError, match=message):
                attempt()
        assert bank.list(type="claim", status="active", limit=2) and bank.recall("index", types=["claim"], k=2)


def test_cli_says_what_is_wrong_without_a_traceback_or_a_new_bank(tmp_path: Path, bank_dir: Path, capsys,
                                                                  monkeypatch) -> None:
    from smb_core.settings import get_settings

    missing = tmp_path / "no-bank-here"
    for argv in (["status"], ["evolve"], ["recall", "x"], ["resolve", "ctr-x", "--as", "open", "--because", "x"]):
        assert smb([*argv, "--bank", str(missing)]) == 1
        assert f"no memory bank at {missing}" in capsys.readouterr().err
    assert not missing.exists()
    assert smb(["recall", "", "--bank", str(bank_dir)]) == 1
    assert capsys.readouterr().err == "error: the question is empty\n"
    assert smb(["resolve", "ctr-missing", "--as", "explained", "--because", "x", "--bank", str(bank_dir)]) == 1
    assert capsys.readouterr().err == "error: no memory object ctr-missing\n"
    monkeypatch.setenv("SMB_LLM", "bogus")
    get_settings.cache_clear()
    try:
        assert smb(["status", "--bank", str(bank_dir)]) == 1
        assert capsys.readouterr().err.startswith("error: setting SMB_LLM: Input should be 'none' or 'ollama'")
    finally:
        get_settings.cache_clear()
