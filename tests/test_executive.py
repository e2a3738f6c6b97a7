"""Layer 6 on a real bank: the agenda ranks what most of the bank depends on first, plans cite it,
every citation resolves, and a new cycle supersedes the previous agenda without deleting it."""

from __future__ import annotations

from smb_core.bank import Bank
from smb_core.evolve import executive
from smb_core.evolve.cycle import open_cycle
from smb_core.integrity import dispute_flag_mismatches, unresolved_citations
from smb_core.model import (
    Agenda, CitedStatement, Claim, Contradiction, Edge, EdgeType, Entity, Insight, Plan, Question, SourceSpan, Status,
    Synthesis, stable_id,
)


def _claim(name: str, text: str, source: str) -> Claim:
    return Claim(id=stable_id("clm", name), title=text, statement=text, source_ids=[source])


def _dispute(bank: Bank, name: str, a: Claim, b: Claim, dependents: int, kind: str) -> Contradiction:
    ctr = Contradiction(id=stable_id("ctr", name), title=f"Conflicting {name}", claim_ids=[a.id, b.id],
                        derived_from=[a.id, b.id], attribute=name, tags=[kind])
    derived = [Synthesis(id=stable_id("syn", name, str(i)), title=f"{name} synthesis {i}",
                         derived_from=[a.id, stable_id("clm", "other")]) for i in range(dependents)]
    question = Question(id=stable_id("qst", ctr.id), title=f"Which {name}?", question=f"Which {name} is right?",
                        about=[a.id, b.id, ctr.id], derived_from=[ctr.id])
    bank.write([a, b, ctr, question, *derived], [Edge.between(ctr.id, a.id, EdgeType.CONTRADICTS),
                                                 Edge.between(ctr.id, b.id, EdgeType.CONTRADICTS)])
    return ctr


def _setup(bank: Bank) -> tuple[Contradiction, Contradiction, Question]:
    bank.write([_claim("other", "Lumen Labs is in Lisbon.", "src-c")])
    minor = _dispute(bank, "colour", _claim("c1", "The logo is blue.", "src-a"),
                     _claim("c2", "The logo is green.", "src-b"), dependents=0, kind="polarity")
    major = _dispute(bank, "founding year", _claim("f1", "Lumen Labs was founded in 2017.", "src-a"),
                     _claim("f2", "Lumen Labs was founded in 2018.", "src-b"), dependents=4, kind="date")
    okafor = Entity(id=stable_id("ent", "okafor"), title="Mara Okafor", source_ids=["src-a"])
    open_question = Question(id=stable_id("qst", "ask"), title="Who funded the Berlin office?",
                             question="Who funded the Berlin office?", about=[okafor.id], derived_from=[okafor.id])
    bank.write([okafor, open_question])
    return minor, major, open_question


def test_agenda_ranks_by_dependents_and_plans_cite_it(bank: Bank) -> None:
    minor, major, open_question = _setup(bank)
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    result = executive.run(bank, cycle)
    with bank.reading() as db:
        agenda = db.list_objects(type="agenda", status="active")[0]
        plans = {p.tags[1]: p for p in db.list_objects(type="plan", status="active")}
    assert isinstance(agenda, Agenda) and result.counts["agenda_items"] == 3
    order = [i.object_id for i in agenda.items]
    assert order.index(major.id) < order.index(minor.id)  # 4 syntheses depend on the founding year
    assert open_question.id in order and stable_id("qst", major.id) not in order  # on the agenda via its contradiction
    top = agenda.items[order.index(major.id)]
    assert "dated primary record" in top.settle_with and "objects depend on it" in top.reason
    assert isinstance(plans["settle"], Plan) and plans["settle"].steps[0].cites[0] == major.id
    assert plans["answer"].steps[0].cites[0] == open_question.id
    assert all(p.derived_from[0] == agenda.id for p in plans.values())
    assert unresolved_citations(bank) == [] and dispute_flag_mismatches(bank) == []


def test_an_items_centrality_is_how_many_claims_name_its_most_discussed_subject(bank: Bank) -> None:
    minor, major, _ = _setup(bank)
    lisbon = Entity(id=stable_id("ent", "lisbon"), title="Lisbon")
    logo = Entity(id=stable_id("ent", "logo"), title="logo")
    naming = [_claim(f"n{i}", f"Lisbon note {i}.", "src-d") for i in range(5)]
    founding = [stable_id("clm", "f1"), stable_id("clm", "f2")]
    bank.write([lisbon, logo, *naming],
               [Edge.between(c.id, lisbon.id, EdgeType.REFERENCES) for c in naming]
               + [Edge.between(c, lisbon.id, EdgeType.REFERENCES) for c in founding]  # 7 claims name Lisbon
               + [Edge.between(c, logo.id, EdgeType.REFERENCES) for c in founding]  # 2 the logo (the same 2)
               + [Edge.between(stable_id("clm", "c1"), logo.id, EdgeType.REFERENCES)])  # and 1 more: 3
    with bank.reading() as db:
        assert executive._subject_centrality(db, [major.id, minor.id]) == {major.id: 7, minor.id: 3}


def test_a_new_cycle_supersedes_the_agenda_and_reruns_change_nothing(bank: Bank) -> None:
    _setup(bank)
    executive.run(bank, open_cycle(bank, "cycle-00001", "run-1"))
    executive.run(bank, open_cycle(bank, "cycle-00001", "run-1b"))  # the same cycle again
    with bank.reading() as db:
        assert db.sql("SELECT count(*) FROM objects WHERE type = 'agenda'")[0][0] == 1
    executive.run(bank, open_cycle(bank, "cycle-00002", "run-2"))
    with bank.reading() as db:
        agendas = {a.id: a for a in db.list_objects(type="agenda", limit=10)}
        links = db.sql("SELECT head, tail FROM edges WHERE edge_type = 'evolves_into'")
    first, second = stable_id("agd", "cycle-00001"), stable_id("agd", "cycle-00002")
    assert agendas[first].status == Status.SUPERSEDED and agendas[second].status == Status.ACTIVE
    assert (first, second) in links


def test_integrity_finds_a_citation_to_nothing(bank: Bank) -> None:
    _setup(bank)
    executive.run(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        plan = db.list_objects(type="plan", status="active")[0]
    plan.steps[0].cites.append("clm-does-not-exist")
    bank.update_objects([plan])
    assert unresolved_citations(bank) == [f"{plan.id} cites clm-does-not-exist"]
    assert unresolved_citations(bank, layers=(6,)) == [f"{plan.id} cites clm-does-not-exist"]
    assert unresolved_citations(bank, layers=(4,)) == []  # each check looks at its own layers
    assert unresolved_citations(bank, run_id="run-1") == [f"{plan.id} cites clm-does-not-exist"]
    assert unresolved_citations(bank, run_id="run-2") == []  # a later cycle's check: what that run wrote
    span = SourceSpan(source_id="src-missing", start=0, end=10, line_start=1, line_end=1)
    cited = CitedStatement(text="Lumen Labs is in Lisbon.", object_id=stable_id("clm", "other"), span=span)
    synthesis = Synthesis(id=stable_id("syn", "spans"), title="Spans", derived_from=[stable_id("clm", "other")],
                          statements=[cited])
    bank.write([synthesis])
    assert unresolved_citations(bank, layers=(4,)) == [f"{synthesis.id} cites source src-missing"]


def test_plans_take_the_strongest_insights_first(bank: Bank) -> None:
    """A gap named by 9 documents comes before one named by 4, however many of them each cites."""
    _setup(bank)
    weak = Insight(id=stable_id("ins", "weak"), kind="knowledge_gap", title="Nothing here describes Weak",
                   description="Weak is named in 4 documents.", weight=4, source_ids=["src-a", "src-b", "src-c"])
    strong = Insight(id=stable_id("ins", "strong"), kind="knowledge_gap", title="Nothing here describes Strong",
                     description="Strong is named in 9 documents.", weight=9, source_ids=["src-a"])
    bank.write([weak, strong])
    executive.run(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        fill = next(p for p in db.list_objects(type="plan", status="active") if "fill" in p.tags)
    assert [s.cites[0] for s in fill.steps] == [strong.id, weak.id]
