"""Confidence over time on a real bank: decay to deprecation, reinforcement by independent sources,
and dispute flags that follow a contradiction through everything derived from its claims."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.evolve import confidence, merge
from smb_core.evolve.cycle import finish_cycle, new_object_ids, open_cycle
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.model import Claim, Contradiction, Narrative, Relationship, Status, Synthesis, stable_id, utcnow
from smb_core.query import MemoryBank
from smb_core.settings import Settings
from smb_core.stores.metadata import MetadataStore
from tests.conftest import write_doc


def _claim(name: str, text: str, **fields) -> Claim:
    return Claim(id=stable_id("clm", name), title=text, statement=text, source_ids=["src-x"], **fields)


def test_confidence_halves_every_half_life_and_contradictions_never_decay() -> None:
    now = utcnow()
    claim = _claim("a", "Lumen Labs was founded in 2017.", confidence=0.8, reinforced_at=now - timedelta(days=60))
    assert confidence.effective_confidence(claim, 30, now) == pytest.approx(0.2)
    assert confidence.effective_confidence(claim, 0, now) == 0.8  # half-life 0 turns decay off
    ctr = Contradiction(id="ctr-1", title="t", claim_ids=["a", "b"], confidence=0.8, created=now - timedelta(days=900))
    assert confidence.effective_confidence(ctr, 30, now) == 0.8


def test_knowledge_without_new_sources_is_deprecated_not_deleted(tmp_path: Path) -> None:
    bank = Bank(settings=Settings(memory_bank_dir=tmp_path / "bank", confidence_half_life_days=30,
                                  confidence_floor=0.05))
    bank.init()
    created = utcnow() - timedelta(days=400)  # long enough ago to have decayed, were it not for reinforcement
    old = _claim("old", "Lumen Labs had 12 employees.", confidence=0.6, created=created,
                 reinforced_at=utcnow() - timedelta(days=150))
    recent = _claim("recent", "Lumen Labs has 80 employees.", confidence=0.6, created=created,
                    reinforced_at=utcnow() - timedelta(days=60))
    young = _claim("young", "Lumen Labs is hiring.", confidence=0.01)  # below the floor from the start
    bank.write([old, recent, young])
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    assert confidence.deprecate_decayed(bank, cycle) == sorted([old.id, young.id])  # 0.6/32 < 0.05 <= 0.6/4
    with bank.reading() as db:
        found = db.get_objects([old.id, recent.id])
    assert found[old.id].status == Status.DEPRECATED and "decayed below 0.05" in found[old.id].status_reason
    assert found[recent.id].status == Status.ACTIVE
    assert (bank.root / found[old.id].path()).exists()
    assert confidence.deprecate_decayed(bank, cycle) == []  # already marked


def _ingest(bank: Bank, corpus: Path) -> None:
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="test")
    extract_sources(bank, [o.source_id for o in outcomes if o.source_id], get_extractor(bank.settings))


@pytest.mark.parametrize("chunk", [confidence.RESTATEMENT_CHUNK, 1])  # 1: each new claim looked up on its own
def test_a_restatement_in_another_document_reinforces_once(bank: Bank, settings, monkeypatch, chunk: int) -> None:
    monkeypatch.setattr(confidence, "RESTATEMENT_CHUNK", chunk)
    corpus = settings.kbmd_dir
    write_doc(corpus, "history.md", "# History\n\nThe Orvieto Observatory was founded in 1874 by the town council.\n")
    _ingest(bank, corpus)
    finish_cycle(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        original = db.list_objects(type="claim", limit=10)[0]
    write_doc(corpus, "guide.md", "# Guide\n\nThe Orvieto Observatory was founded by the town council in 1874.\n")
    write_doc(corpus, "rival.md", "# Rival account\n\nThe Orvieto Observatory was founded in 1881 by the town council.\n")
    _ingest(bank, corpus)
    cycle = open_cycle(bank, "cycle-00002", "run-2")
    supports = confidence.reinforce(bank, cycle)
    with bank.reading() as db:
        texts = dict(db.sql("SELECT id, text FROM objects WHERE type = 'claim'"))
        after = db.get_object(original.id)
    assert [(texts[e.head], e.tail) for e in supports] == [
        ("The Orvieto Observatory was founded by the town council in 1874.", original.id)]  # 1881 supports nothing
    assert after.confidence > original.confidence and after.reinforced_at is not None
    confidence.reinforce(bank, open_cycle(bank, "cycle-00002", "run-2-again"))
    with bank.reading() as db:
        assert db.get_object(original.id).confidence == after.confidence  # a re-run cycle reinforces nothing twice


def test_a_first_cycle_looks_for_no_restatement_as_every_claim_is_new(bank: Bank, settings, monkeypatch) -> None:
    """Two new documents restating each other confirm nothing older, so a first cycle skips the search
    (two million lookups at 50,000 documents); a claim with a source outside the bank's documents
    (an agent's) may be older, and is searched for."""
    corpus = settings.kbmd_dir
    write_doc(corpus, "history.md", "# History\n\nThe Orvieto Observatory was founded in 1874 by the town council.\n")
    write_doc(corpus, "guide.md", "# Guide\n\nThe Orvieto Observatory was founded by the town council in 1874.\n")
    _ingest(bank, corpus)
    searched = []
    real_nearest = bank.nearest
    monkeypatch.setattr(bank, "nearest", lambda *args, **kwargs: searched.append(1) or real_nearest(*args, **kwargs))
    assert confidence.reinforce(bank, open_cycle(bank, "cycle-00001", "run-1")) == [] and searched == []
    text = "The Orvieto Observatory was founded in 1874 by the council of the town."
    agent = Claim(id=stable_id("clm", "agent"), title=text, statement=text, source_ids=["note-agent-1"])
    bank.write([agent])
    supports = confidence.reinforce(bank, open_cycle(bank, "cycle-00001", "run-1b"))
    assert searched and {e.tail for e in supports} == {agent.id} and len(supports) == 2


def test_a_thing_a_new_document_names_again_is_reinforced_and_one_it_does_not_name_is_not(bank: Bank, settings) -> None:
    corpus = settings.kbmd_dir
    for name, year in (("one", 2017), ("two", 2018)):
        write_doc(corpus, f"{name}.md", f"# Note {name}\n\nMara Okafor met Ivo Brandt in Lisbon in {year}.\n")
    _ingest(bank, corpus)
    first = open_cycle(bank, "cycle-00001", "run-1")
    merge.merge(bank, first, new_object_ids(bank, first, ("entity", "concept")))
    finish_cycle(bank, first)
    with bank.reading() as db:
        canonical = {o.title: o for o in db.list_objects(type="canonical_entity", limit=100)}
    assert {"Mara Okafor", "Lisbon"} <= canonical.keys()
    write_doc(corpus, "three.md", "# Note three\n\nMara Okafor opened an office in Porto.\n")
    _ingest(bank, corpus)
    second = open_cycle(bank, "cycle-00002", "run-2")
    merge.merge(bank, second, new_object_ids(bank, second, ("entity", "concept")))
    confidence.reinforce(bank, second)
    with bank.reading() as db:
        after = {t: db.get_object(o.id) for t, o in canonical.items()}
    assert after["Mara Okafor"].confidence > canonical["Mara Okafor"].confidence
    assert after["Mara Okafor"].reinforced_at is not None
    assert after["Lisbon"].confidence == canonical["Lisbon"].confidence  # not named by the new document


def test_disputes_follow_derivations_and_clear_when_resolved(tmp_path: Path) -> None:
    settings = Settings(memory_bank_dir=tmp_path / "bank")
    with MemoryBank.open(settings.memory_bank_dir, read_only=False, settings=settings) as bank:
        a = _claim("a", "The Orvieto Observatory was founded in 1874.")
        b = _claim("b", "The Orvieto Observatory was founded in 1881.")
        c = _claim("c", "The Orvieto Observatory has a 40 cm refractor.")
        synthesis = Synthesis(id="syn-1", title="The Orvieto Observatory", derived_from=[a.id, c.id])
        story = Narrative(id="nar-1", title="How the observatory grew", derived_from=[synthesis.id])
        unrelated = Synthesis(id="syn-2", title="Telescopes", derived_from=[c.id])
        same_sentence = Relationship(id="rel-1", title="observatory founded 1874", head=c.id, tail=b.id,
                                     evidence=a.statement, source_ids=a.source_ids)
        bank._bank.write([a, b, c, same_sentence])  # as extraction writes them (source "src-x" is not in this bank)
        for obj in (synthesis, story, unrelated):
            bank.create(obj)
        ctr = bank.create(Contradiction(id="ctr-1", title="founding year", claim_ids=[a.id, b.id],
                                        derived_from=[a.id, b.id], attribute="date"))
        flagged = {o.id: o.disputed_by for o in (bank.get(i) for i in (a.id, b.id, c.id, "syn-1", "nar-1", "syn-2",
                                                                       "rel-1"))}
        hit = next(h for h in bank.recall("How did the Orvieto Observatory grow?", k=20) if h.object.id == "nar-1")
        assert hit.disputed and [x.id for x in hit.contradictions] == [ctr.id]
        assert hit.as_json()["disputed_by"] == [ctr.id]
        bank.resolve(ctr.id, "explained", "1874 is the charter, 1881 the opening.")
        cleared = [bank.get(i).disputed_by for i in (a.id, b.id, "syn-1", "nar-1")]
        assert bank.get(ctr.id).resolution == "explained"  # kept, never deleted
    assert flagged == {a.id: [ctr.id], b.id: [ctr.id], c.id: [], "syn-1": [ctr.id], "nar-1": [ctr.id], "syn-2": [],
                       "rel-1": [ctr.id]}
    assert cleared == [[], [], [], []]


def _logo_contradiction(tmp_path: Path) -> tuple[Settings, Claim, Claim]:
    """A bank with two claims and an open contradiction between them."""
    settings = Settings(memory_bank_dir=tmp_path / "bank")
    with MemoryBank.open(settings.memory_bank_dir, read_only=False, settings=settings) as bank:
        a, b = _claim("a", "The logo is blue."), _claim("b", "The logo is green.")
        bank._bank.write([a, b])  # as extraction writes claims (their source "src-x" is not in this bank)
        bank.create(Contradiction(id="ctr-logo", title="logo colour", claim_ids=[a.id, b.id], derived_from=[a.id, b.id]))
    return settings, a, b


def test_cli_resolve_clears_flags_and_rejects_what_is_not_a_contradiction(tmp_path: Path, capsys) -> None:
    from smb_core.cli import main

    settings, a, b = _logo_contradiction(tmp_path)
    with MemoryBank.open(settings.memory_bank_dir, settings=settings) as bank:
        assert bank.get(a.id).disputed_by == ["ctr-logo"]
    bank_dir = str(settings.memory_bank_dir)
    assert main(["resolve", a.id, "--as", "explained", "--because", "x", "--bank", bank_dir]) == 1
    assert f"{a.id} is not a contradiction" in capsys.readouterr().err
    assert main(["resolve", "ctr-logo", "--as", "superseded", "--because", "rebranded in 2020", "--bank", bank_dir]) == 0
    with MemoryBank.open(settings.memory_bank_dir, settings=settings) as bank:
        assert bank.get(a.id).disputed_by == [] and bank.get("ctr-logo").resolution == "superseded"


def test_a_bank_written_before_the_disputed_by_column_keeps_its_flags(tmp_path: Path) -> None:
    """Flags are read from their own column; a bank that only had them in the JSON gets the column
    filled when it is next opened for writing, so no flag is lost and nothing is rewritten."""
    import duckdb

    from smb_core.stores import metadata

    settings, a, b = _logo_contradiction(tmp_path)
    con = duckdb.connect(str(settings.memory_bank_dir / "metadata.duckdb"))
    for (index,) in con.execute("SELECT index_name FROM duckdb_indexes() WHERE table_name = 'objects'").fetchall():
        con.execute(f"DROP INDEX {index}")  # DuckDB drops no column of an indexed table; the schema makes them again
    con.execute("ALTER TABLE objects DROP COLUMN disputed_by")  # the schema before the column existed
    con.close()
    metadata._SCHEMA_READY.clear()  # as in a new process
    bank = Bank(settings=settings)
    bank.init()
    assert confidence.flagged_now(bank) == {a.id: ["ctr-logo"], b.id: ["ctr-logo"]}
    assert confidence.propagate_disputes(bank) == (0, 0)


def test_a_cycle_killed_while_recording_a_reinforcement_raises_the_object_once_on_rerun(
        bank: Bank, settings, monkeypatch) -> None:
    corpus = settings.kbmd_dir
    write_doc(corpus, "history.md", "# History\n\nThe Orvieto Observatory was founded in 1874 by the town council.\n")
    _ingest(bank, corpus)
    finish_cycle(bank, open_cycle(bank, "cycle-00001", "run-1"))
    write_doc(corpus, "guide.md", "# Guide\n\nThe Orvieto Observatory was founded by the town council in 1874.\n")
    _ingest(bank, corpus)
    with bank.reading() as db:
        original = next(o for o in db.list_objects(type="claim", limit=10) if "in 1874 by" in o.statement)
    real_insert = MetadataStore.insert_rows

    def dies_recording(self, table, *args, **kwargs):
        if table == "reinforcements":
            raise RuntimeError("killed before the reinforcement was recorded (injected)")
        return real_insert(self, table, *args, **kwargs)

    monkeypatch.setattr(MetadataStore, "insert_rows", dies_recording)
    with pytest.raises(RuntimeError, match="injected"):
        confidence.reinforce(bank, open_cycle(bank, "cycle-00002", "run-2"))
    with bank.reading() as db:
        assert db.get_object(original.id).confidence == original.confidence  # not raised without its record
    monkeypatch.setattr(MetadataStore, "insert_rows", real_insert)
    confidence.reinforce(bank, open_cycle(bank, "cycle-00002", "run-2"))
    with bank.reading() as db:
        raised = db.get_object(original.id).confidence
        recorded = db.sql("SELECT before, after FROM reinforcements WHERE object_id = ?", [original.id])
    assert recorded == [(pytest.approx(original.confidence, abs=1e-3), raised)]
    assert raised == pytest.approx(confidence.reinforced(original.confidence, 1), abs=1e-3)  # once, not twice

