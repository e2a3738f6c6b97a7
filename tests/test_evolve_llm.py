"""The optional LLM in evolution, against a real local HTTP fake of Ollama: it decides borderline merges
and judges contradiction candidates; clear merges never reach it, and a failing server leaves the rules."""

from __future__ import annotations

import json
import re

import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.evolve import llm_judge, merge, reflective, semantic
from smb_core.evolve.contradictions import find_contradictions
from smb_core.evolve.cycle import open_cycle
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.model import Entity, EntityKind, stable_id
from smb_core.settings import Settings
from tests.conftest import canonical_objects, write_doc
from tests.fake_ollama import CHAT_MODEL, FakeOllama


def _with_llm(bank: Bank, fake: FakeOllama) -> Bank:
    """Point the bank's settings at the fake (after any ingest, which thus ran without the LLM)."""
    bank.settings = bank.settings.model_copy(update={"llm": "ollama", "ollama_host": fake.url,
                                                     "ollama_model": CHAT_MODEL, "ollama_timeout_seconds": 5})
    return bank


def _pairs_asked_in(body: dict) -> list[str]:
    """The pairs of one chat request, as the text of each "Pair n:" block."""
    return re.split(r"(?m)^Pair \d+:\n", body["messages"][-1]["content"])[1:]


def _pairs_asked(fake: FakeOllama) -> list[str]:
    return [pair for body in fake.bodies("/api/chat") for pair in _pairs_asked_in(body)]


def _answer_each_pair(decide):
    """A chat handler answering every pair of a request with `decide(pair text)`."""
    return lambda body: {"answers": [decide(pair) for pair in _pairs_asked_in(body)]}


# ---- merges -------------------------------------------------------------------------------------


def _entity(doc: str, name: str, kind: str, context: str) -> Entity:
    return Entity(id=stable_id("ent", doc, name), title=name, entity_kind=EntityKind(kind), source_ids=[doc],
                  description=context)


# Borderline: similar names (0.95) whose vectors (about 0.90) barely clear VECTOR_SIMILAR, no shared context.
# Clear: the same two-word name in two documents.
ENTITIES = [
    _entity("src-a", "Lumen Labs", "organization", "Lumen Labs builds the vector database Lumen DB."),
    _entity("src-b", "Lumen Laboratories", "organization", "Lumen Laboratories raised a seed round in 2018."),
    _entity("src-a", "Mara Okafor", "person", "Mara Okafor founded the company."),
    _entity("src-c", "Mara Okafor", "person", "Mara Okafor led the negotiation."),
]
LABS, LABORATORIES, OKAFOR_A, OKAFOR_C = (e.id for e in ENTITIES)


def _merge_groups(bank: Bank) -> list[list[str]]:
    bank.write(ENTITIES)
    result = merge.merge(bank, open_cycle(bank, "cycle-00001", "run-1"), [e.id for e in ENTITIES])
    return sorted(sorted(c.members) for c in canonical_objects(bank, result))


def test_without_llm_the_rules_merge_the_borderline_pair(bank: Bank) -> None:
    scores = (merge.name_similarity("Lumen Labs", "Lumen Laboratories"), 0.90, 0.0, 0, True, False)
    assert merge.decide(*scores) and merge.is_borderline(*scores)
    assert not merge.is_borderline(1.0, 0.5, 0.0, 0, True, False)  # same two-word name: clear
    assert _merge_groups(bank) == sorted([sorted([LABS, LABORATORIES]), sorted([OKAFOR_A, OKAFOR_C])])


@pytest.mark.parametrize("same", [True, False])
def test_llm_decides_borderline_merges_and_never_sees_clear_ones(bank: Bank, fake_ollama: FakeOllama, same: bool):
    fake_ollama.chat_handler = _answer_each_pair(lambda pair: {"same": same, "reason": f"scripted {same}"})
    groups = _merge_groups(_with_llm(bank, fake_ollama))

    (asked,) = _pairs_asked(fake_ollama)  # one request, one pair: the borderline one
    assert "Lumen Labs" in asked and "Lumen Laboratories" in asked and "organization" in asked
    assert "Okafor" not in asked
    assert sorted([OKAFOR_A, OKAFOR_C]) in groups  # the clear pair is merged by the rules either way
    assert (sorted([LABS, LABORATORIES]) in groups) is same
    (body,) = fake_ollama.bodies("/api/chat")
    assert body["format"] == llm_judge.SameThings.model_json_schema()  # structured output
    with bank.reading() as db:
        signals = {m: json.loads(s) for m, s in db.sql("SELECT member, signals FROM merges")}
    if same:
        assert signals[LABS]["judge"] == "llm" and signals[LABS]["llm_reason"] == "scripted True"
    assert "judge" not in signals[OKAFOR_A]


# ---- contradictions -----------------------------------------------------------------------------

DOC_A = "# Lumen Labs\n\nLumen Labs was founded in 2017 by Mara Okafor. Lumen Labs is a profitable company.\n"
DOC_B = "# The history of Lumen Labs\n\nLumen Labs was founded in 2014 in Lisbon. Lumen Labs has lost money every year.\n"
PROFIT = ("Lumen Labs is a profitable company.", "Lumen Labs has lost money every year.")
FOUNDED = ("Lumen Labs was founded in 2017 by Mara Okafor.", "Lumen Labs was founded in 2014 in Lisbon.")


def _ingest(bank: Bank, docs: dict[str, str]) -> list[str]:
    corpus = bank.settings.kbmd_dir
    for name, text in docs.items():
        write_doc(corpus, name, text)
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="run-1")
    extract_sources(bank, [o.source_id for o in outcomes], get_extractor(bank.settings), run_id="run-1")
    with bank.reading() as db:
        return [c.id for c in db.list_objects(type="claim", limit=1000)]


def _claims_of(found, bank: Bank) -> list[set[str]]:
    with bank.reading() as db:
        return [{db.get_object(i).statement for i in c.claim_ids} for c in found.contradictions]


def test_llm_finds_what_the_rules_miss_and_clears_what_it_judges_compatible(bank: Bank, fake_ollama: FakeOllama):
    claim_ids = _ingest(bank, {"a/lumen.md": DOC_A, "b/lumen-history.md": DOC_B})
    rules_only = find_contradictions(bank, claim_ids, run_id="cycle-1")
    assert _claims_of(rules_only, bank) == [set(FOUNDED)]  # the rules see the dates, not the profit

    def decide(pair: str) -> dict:
        if "profitable" in pair and "lost money" in pair:
            return {"contradiction": True, "kind": "polarity", "attribute": "profitability",
                    "explanation": "profitable vs losing money every year"}
        return {"contradiction": False, "kind": "none", "attribute": "", "explanation": "compatible"}

    fake_ollama.chat_handler = _answer_each_pair(decide)
    found = find_contradictions(_with_llm(bank, fake_ollama), claim_ids, run_id="cycle-1")

    assert _claims_of(found, bank) == [set(PROFIT)]  # the founding pair, judged compatible, is not reported
    (ctr,) = found.contradictions
    assert ctr.tags == ["polarity", "judge:llm"]
    assert ctr.attribute == "profitability" and ctr.explanation == "profitable vs losing money every year"
    asked = _pairs_asked(fake_ollama)
    assert len(asked) == found.pairs_judged == rules_only.pairs_judged
    assert any("2017" in p and "2014" in p for p in asked)
    assert all(p.count('(from "') == 2 for p in asked)  # each statement with its document's title
    assert len(fake_ollama.bodies("/api/chat")) == 1  # all candidate pairs in one batch


# ---- a failing server ---------------------------------------------------------------------------


def test_cycle_completes_on_the_rules_when_the_llm_fails(bank: Bank, fake_ollama: FakeOllama):
    _ingest(bank, {"a/lumen.md": DOC_A, "b/lumen-history.md": DOC_B,
                   "c/funding.md": "# Funding\n\nLumen Laboratories raised a seed round from Northwind Capital.\n"})
    fake_ollama.fail_next(1000, status=500)
    _with_llm(bank, fake_ollama)
    cycle = open_cycle(bank, "cycle-00001", "run-1")

    layer2 = semantic.run(bank, cycle)
    layer3 = reflective.run(bank, cycle)

    assert layer2.counts["merge_groups"] >= 1
    assert layer3.counts["contradictions_new"] == 1
    with bank.reading() as db:
        (ctr,) = db.list_objects(type="contradiction", limit=10)
        signals = [json.loads(s) for (s,) in db.sql("SELECT signals FROM merges")]
    assert ctr.tags == ["date", "judge:rules"]
    assert {s.get("judge") for s in signals} == {None, "rule"}  # clear merges plus the borderline one
    assert all("HTTP 500" in s["llm_error"] for s in signals if s.get("judge"))
    # the first error stops the LLM for the phase: one batch (3 attempts) for merges, one for contradictions
    assert len(fake_ollama.bodies("/api/chat")) == 6
    assert bank.check_consistency()["consistent"]


def test_llm_stays_off_unless_configured(bank: Bank, fake_ollama: FakeOllama) -> None:
    claim_ids = _ingest(bank, {"a/lumen.md": DOC_A, "b/lumen-history.md": DOC_B})
    bank.settings = bank.settings.model_copy(update={"ollama_host": fake_ollama.url})  # llm still "none"
    found = find_contradictions(bank, claim_ids, run_id="cycle-1")
    assert [c.tags for c in found.contradictions] == [["date"]]
    assert fake_ollama.requests == []


def test_judge_batches_within_its_budget_and_stops_at_the_first_error(fake_ollama: FakeOllama) -> None:
    settings = Settings(llm="ollama", ollama_host=fake_ollama.url, ollama_model=CHAT_MODEL, ollama_timeout_seconds=5)
    pairs = [((f"Statement {i}.", "Doc A"), (f"Other statement {i}.", "Doc B")) for i in range(20)]
    no = {"contradiction": False, "kind": "none", "attribute": "", "explanation": "compatible"}
    fake_ollama.chat_handler = _answer_each_pair(lambda pair: no)

    judged = llm_judge.LLMJudge(settings, max_requests=2, batch=8).contradictions(pairs)
    assert [len(_pairs_asked_in(b)) for b in fake_ollama.bodies("/api/chat")] == [8, 8]
    assert [j.answer is not None for j in judged] == [True] * 16 + [False] * 4
    assert "budget" in judged[-1].error

    fake_ollama.requests.clear()
    fake_ollama.fail_next(1000, status=500)
    judged = llm_judge.LLMJudge(settings, batch=8).contradictions(pairs)
    assert len(fake_ollama.bodies("/api/chat")) == 3  # one batch, its 3 attempts; then no more requests
    assert all(j.answer is None and "HTTP 500" in j.error for j in judged)
