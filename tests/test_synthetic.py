"""Layer 4 on real stores: syntheses cite claims from three or more documents, abstractions generalise
(in words no document uses), relationships no document states are discovered through the graph, re-runs
change nothing, and the LLM path keeps only statements whose citations hold."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.evolve import abstractions, reflective, semantic, synthetic
from smb_core.evolve.syntheses import build_syntheses
from smb_core.evolve.cycle import open_cycle
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.integrity import dangling_references
from smb_core.model import Abstraction, Claim, stable_id
from smb_core.settings import Settings
from tests.conftest import write_doc
from tests.fake_ollama import CHAT_MODEL, fake_ollama  # noqa: F401

DOCS = {
    "founding.md": "# Lumen Labs founding\n\nMara Okafor founded Lumen Labs in Lisbon in 2017. "
    "Lumen Labs builds the vector database Lumen DB.\n",
    "funding.md": "# Funding\n\nLumen Labs raised a seed round from Northwind Capital in 2018. "
    "Mara Okafor led the negotiation for Lumen Labs.\n",
    "berlin.md": "# Berlin office\n\nLumen Labs opened an office in Berlin in 2021. "
    "The storage team of Lumen Labs works in Berlin.\n",
    "awards.md": "# Awards\n\nLumen Labs won the Open Source Award in 2022. Mara Okafor accepted the award in Lisbon.\n",
    "indexes.md": "# Index types\n\nThe team compared the graph index, the flat index and the inverted index. "
    "The graph index is fast. The flat index is exact. The inverted index is compact. An index needs memory.\n",
    "ada.md": "# Ada Quill\n\nAda Quill works with Bram Holt on compilers.\n",
    "cleo.md": "# Cleo Marsh\n\nCleo Marsh works with Bram Holt on databases.\n",
}


def _ingest(bank: Bank, corpus: Path) -> None:
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="test")
    extract_sources(bank, [o.source_id for o in outcomes if o.source_id], get_extractor(bank.settings), "test")


def _evolve(bank: Bank, key: str = "cycle-00001", run_id: str = "run-1"):
    cycle = open_cycle(bank, key, run_id)
    semantic.run(bank, cycle)
    reflective.run(bank, cycle)
    return cycle, synthetic.run(bank, cycle)


@pytest.fixture(scope="module")
def evolved(tmp_path_factory) -> tuple[Bank, object, object, dict[str, str]]:
    root = tmp_path_factory.mktemp("synthetic")
    settings = Settings(memory_bank_dir=root / "bank", kbmd_dir=root / "kbmd", lock_timeout_seconds=20)
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    bank = Bank(settings=settings)
    bank.init()
    _ingest(bank, settings.kbmd_dir)
    cycle, result = _evolve(bank)
    with bank.reading() as db:
        texts = {d.id: bank.read_source_text(d) for d in db.sources()}
    return bank, cycle, result, texts


def _active(bank: Bank, type_: str) -> list:
    with bank.reading() as db:
        return db.list_objects(type=type_, status="active", limit=10_000)


def test_synthesis_cites_claims_from_three_documents(evolved) -> None:
    bank, _, result, _ = evolved
    syntheses = _active(bank, "synthesis")
    assert result.counts["syntheses"] == len(syntheses) >= 1
    lumen = next(s for s in syntheses if s.title == "Synthesis: Lumen Labs")
    with bank.reading() as db:
        claims = db.get_objects([s.object_id for s in lumen.statements])
    assert len(claims) == len(lumen.statements) >= 3
    assert all(isinstance(c, Claim) for c in claims.values())
    assert len({c.source_ids[0] for c in claims.values()}) >= 3
    for statement in lumen.statements:
        claim = claims[statement.object_id]
        assert statement.text == claim.statement
        assert statement.span == claim.source_spans[0]
        assert f"- {statement.text} [{claim.id}](../../layer-1/claims/{claim.id}.md)" in lumen.body
    assert lumen.method == "extractive" and lumen.theme in lumen.derived_from
    assert set(lumen.source_ids) == {c.source_ids[0] for c in claims.values()}
    assert lumen.tags == ["cycle:cycle-00001"] and lumen.run_id == "run-1"


def test_abstraction_generalises_in_words_no_document_uses(evolved) -> None:
    bank, _, result, texts = evolved
    abstractions = [a for a in _active(bank, "abstraction") if a.kind == "abstraction"]
    assert result.counts["abstractions"] == len(abstractions) >= 1
    family = next(a for a in abstractions if a.title.startswith("Index family"))
    assert family.level == 1 and len(family.members) >= 3
    assert all(family.title not in text and family.description not in text for text in texts.values())
    with bank.reading() as db:
        edges = set(db.sql("SELECT tail, edge_type FROM edges WHERE head = ?", [family.id]))
        members = db.get_objects(family.members)
    assert {(m, "contains") for m in family.members} <= edges
    assert (family.derived_from[0], "derives_from") in edges
    assert all(m.title.endswith("index") for m in members.values())
    for a in _active(bank, "abstraction"):
        assert len(a.derived_from) >= 2 and a.source_ids and a.run_id == "run-1"


def test_higher_level_abstraction_joins_linked_abstractions(evolved) -> None:
    _, cycle, _, _ = evolved
    def abstraction(name: str, members: list[str]) -> Abstraction:
        return Abstraction(id=stable_id("abs", name), title=f"{name} family: {', '.join(members)}",
                           members=members, derived_from=[f"tax-{name}", *members])

    lower = [abstraction("a", ["x1", "x2", "x3"]), abstraction("b", ["y1", "y2", "y3"]),
             abstraction("c", ["z1", "z2", "z3"])]
    graph = nx.Graph()
    graph.add_weighted_edges_from([("x1", "y1", 5), ("x2", "y2", 4), ("x1", "x2", 1), ("z1", "z2", 3)])
    leaves = {a.id: set(a.members) for a in lower}
    things = {m: abstractions.Thing(m, m.upper(), "concept", "", [f"src-{m}"]) for a in lower for m in a.members}
    higher = abstractions._lift(cycle, lower, leaves, graph, things, level=2)
    assert len(higher) == 1  # a and b are tied by co-occurrence; c stands apart
    assert higher[0].level == 2 and sorted(higher[0].members) == sorted([lower[0].id, lower[1].id])
    assert higher[0].derived_from == higher[0].members and "src-x1" in higher[0].source_ids


def test_discovered_relationship_that_no_document_states(evolved) -> None:
    bank, _, result, texts = evolved
    found = _active(bank, "discovered_relationship")
    assert result.counts["discovered_relationships"] == len(found) >= 1
    with bank.reading() as db:
        titles = {r.id: (db.get_object(r.head).title, db.get_object(r.tail).title) for r in found}
        rel = next(r for r in found if set(titles[r.id]) == {"Ada Quill", "Cleo Marsh"})
        via = db.get_object(rel.evidence_path[1])
        edge = db.sql("SELECT head, tail, edge_type FROM edges WHERE id = ?", [rel.id])
    assert via.title == "Bram Holt" and rel.evidence_path[0] == rel.head and rel.evidence_path[-1] == rel.tail
    assert rel.derived_from == rel.evidence_path and rel.method in ("bridge", "shared_neighbours")
    assert edge == [(rel.head, rel.tail, "related_to")]
    assert not any("Ada Quill" in text and "Cleo Marsh" in text for text in texts.values())
    assert bank.graph.ensure_loaded().has_edge(rel.head, rel.tail)


def test_rerunning_the_cycle_changes_nothing(evolved) -> None:
    bank, _, result, _ = evolved
    before = bank.status()
    with bank.reading() as db:
        layer4 = sorted(db.sql("SELECT id, status FROM objects WHERE layer = 4"))
    cycle = open_cycle(bank, "cycle-00001", "run-2")
    again = synthetic.run(bank, cycle)
    with bank.reading() as db:
        assert sorted(db.sql("SELECT id, status FROM objects WHERE layer = 4")) == layer4
        # the same syntheses again: not rewritten (nor re-embedded), so they keep the run that made them
        assert {r[0] for r in db.sql("SELECT run_id FROM objects WHERE type = 'synthesis'")} == {"run-1"}
    assert again.counts == result.counts
    assert f"{result.counts['syntheses']} syntheses already said the same; not rewritten." in again.summary
    after = bank.status()
    assert after["types"] == before["types"] and after["consistent"]
    assert dangling_references(bank) == []


def _llm_bank(bank: Bank, fake) -> Bank:
    settings = bank.settings.model_copy(update={"llm": "ollama", "ollama_host": fake.url, "ollama_model": CHAT_MODEL,
                                                "ollama_timeout_seconds": 5})
    return Bank(settings=settings)


def test_llm_synthesis_keeps_only_statements_whose_citations_hold(evolved, fake_ollama) -> None:
    bank, cycle, _, _ = evolved

    def answer(body: dict) -> dict:
        claims = re.findall(r"^\[(clm-[0-9a-f]+)\] (.+)$", body["messages"][-1]["content"], re.MULTILINE)
        statements = [{"text": f"In short, {text[0].lower()}{text[1:]}", "cites": [cid]} for cid, text in claims]
        statements.append({"text": "The moon is made of green cheese.", "cites": [claims[0][0]]})
        statements.append({"text": claims[1][1], "cites": ["clm-0000000000000000"]})
        return {"statements": statements}

    fake_ollama.chat_handler = answer
    syntheses, _ = build_syntheses(_llm_bank(bank, fake_ollama), cycle)
    lumen = next(s for s in syntheses if s.title == "Synthesis: Lumen Labs")
    prompt = next(b for b in fake_ollama.bodies("/api/chat") if "Theme: Lumen Labs" in b["messages"][-1]["content"])
    offered = re.findall(r"^\[(clm-[0-9a-f]+)\]", prompt["messages"][-1]["content"], re.MULTILINE)
    assert lumen.method == "llm"
    assert len(lumen.statements) == len(offered)  # the cheese and the made-up citation are gone
    assert all(s.text.startswith("In short, ") and s.object_id in offered for s in lumen.statements)
    assert "cheese" not in lumen.body and "clm-0000000000000000" not in lumen.body


def test_llm_failure_falls_back_to_extractive(evolved, fake_ollama) -> None:
    bank, cycle, _, _ = evolved
    fake_ollama.fail_next(100, status=500)
    syntheses, _ = build_syntheses(_llm_bank(bank, fake_ollama), cycle)
    assert syntheses and all(s.method == "extractive" for s in syntheses)
    assert len(fake_ollama.bodies("/api/chat")) == 3  # one theme's retries, then no more calls this cycle


@pytest.mark.slow
def test_sample_corpus_gives_sensible_layer4(tmp_path: Path, sample_corpus: Path) -> None:
    settings = Settings(memory_bank_dir=tmp_path / "bank", kbmd_dir=sample_corpus)
    bank = Bank(settings=settings)
    bank.init()
    _ingest(bank, sample_corpus)
    _, result = _evolve(bank)
    counts = result.counts
    assert counts["syntheses"] >= 5 and counts["abstractions"] >= 3 and counts["discovered_relationships"] >= 10
    with bank.reading() as db:
        texts = [bank.read_source_text(d) for d in db.sources()]
        layer4 = db.sql("SELECT id, type, title, derived_from FROM objects WHERE layer = 4")
    assert all(len(derived) >= 2 for _, _, _, derived in layer4)
    assert not any(title in text for _, type_, title, _ in layer4 if type_ == "abstraction" for text in texts)
    files = list((bank.root / "layer-4").rglob("*.md"))
    assert len(files) == len(layer4)
    assert bank.check_consistency()["consistent"]



def test_between_global_passes_only_themes_the_cycle_touched_are_synthesised(evolved) -> None:
    from smb_core.evolve.cycle import Cycle

    bank, _, _, _ = evolved
    with bank.reading() as db:
        berlin = [d.id for d in db.sources() if d.path == "berlin.md"]  # names Lumen Labs, not Mara Okafor
    untouched = build_syntheses(bank, Cycle("cycle-00009", "run-9", [], 9, global_passes=False))[0]
    touched = build_syntheses(bank, Cycle("cycle-00009", "run-9", berlin, 9, global_passes=False))[0]
    refreshed = build_syntheses(bank, Cycle("cycle-00009", "run-9", [], 9, global_passes=True))[0]
    assert untouched == []
    assert [s.title for s in touched] == ["Synthesis: Lumen Labs"]
    assert {"Synthesis: Lumen Labs", "Synthesis: Mara Okafor"} <= {s.title for s in refreshed}


def test_coherence_is_the_mean_cosine_of_distinct_members_without_their_matrix() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    vectors = [v for v in rng.normal(size=(50, 384)).astype(np.float32)]
    unit = np.stack(vectors) / np.clip(np.linalg.norm(np.stack(vectors), axis=1, keepdims=True), 1e-12, None)
    pairs = [float(unit[i] @ unit[j]) for i in range(len(vectors)) for j in range(len(vectors)) if i != j]
    assert abstractions._coherence(vectors) == pytest.approx(sum(pairs) / len(pairs), abs=1e-6)
    same = [vectors[0] * 2, vectors[0]]
    assert abstractions._coherence(same) == pytest.approx(1.0, abs=1e-6) and abstractions._coherence(same[:1]) == 1.0


def test_selection_skips_near_duplicates_and_spreads_over_documents(monkeypatch) -> None:
    """Maximal marginal relevance: a restatement of a chosen claim is never chosen beside it, and of two
    equally good claims the one from a document not cited yet comes first."""
    import numpy as np

    from smb_core.evolve import syntheses

    def unit(*values: float) -> np.ndarray:
        v = np.array(values, dtype=np.float32)
        return v / np.linalg.norm(v)

    def chosen(sources: dict[str, str], vectors: dict[str, np.ndarray]) -> list[str]:
        candidates = [syntheses.Candidate(i, f"Claim {i}.", "Lumen Labs", source) for i, source in sources.items()]
        return [c.id for c in syntheses._select(candidates, vectors, ["Lumen Labs"])]

    restated = {"a": unit(1, 0.3, 0.3), "a2": unit(1, 0.31, 0.3), "b": unit(0.3, 1, 0.2), "c": unit(0.3, 0.2, 1)}
    picked = chosen({"a": "doc-1", "a2": "doc-2", "b": "doc-3", "c": "doc-4"}, restated)
    assert len(picked) == 3 and {"b", "c"} <= set(picked)  # cosine of a and a2 above NEAR_DUPLICATE

    # orthogonal: every score ties exactly, so the list order decides, unless a document is cited already
    apart = {"a": unit(1, 0, 0), "b": unit(0, 1, 0), "c": unit(0, 0, 1)}
    assert chosen({"a": "doc-1", "b": "doc-3", "c": "doc-2"}, apart) == ["a", "b", "c"]
    assert chosen({"a": "doc-1", "b": "doc-1", "c": "doc-2"}, apart) == ["a", "c", "b"]

    monkeypatch.setattr(syntheses, "MAX_STATEMENTS", 1)
    assert chosen({"a": "doc-1", "b": "doc-3", "c": "doc-2"}, apart) == ["a"]
