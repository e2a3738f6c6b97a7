"""Layer 6 for one cycle: the research agenda and the plans derived from it.

The agenda ranks open contradictions and unanswered questions by how much of the bank depends on
them: objects their dispute flags reach (see `confidence.dispute_map`), how central their subjects
are (how many claims reference the same entities and concepts), and how recent their sources are.
Plans turn the top of the agenda into concrete steps; every item and step cites the objects it
comes from, so nothing in this layer is free text without provenance. Each cycle writes a new
agenda and new plans; the previous ones are superseded (kept, and linked with `evolves_into`).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from smb_core.bank import Bank
from smb_core.evolve import confidence
from smb_core.evolve.cycle import Cycle, PhaseResult, digest_line, retire_stale
from smb_core.model import (
    Agenda, AgendaItem, Contradiction, Edge, EdgeType, Insight, Plan, PlanStep, Question, stable_id,
)
from smb_core.stores.metadata import id_filter

AGENDA_SIZE = 25
#: What kind of evidence settles each kind of contradiction the reflective layer finds.
SETTLE_WITH = {
    "date": "a dated primary record (charter, registry entry, release note, archive) stating when it happened",
    "place": "a primary record of the location (registry, official site, contemporary report)",
    "number": "an authoritative figure with its date and unit, to tell an error from a change over time",
    "person_role": "the organisation's or work's own record of who held the role, and when",
    "polarity": "a direct statement from the party concerned, with its date",
    "exclusive_predicate": "a source that states the current state directly, with its date",
}
WEIGHTS = {"dependents": 0.5, "centrality": 0.3, "recency": 0.2}
RECENCY_HALF_LIFE_DAYS = 30.0


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    disputed, cleared = confidence.propagate_disputes(bank)  # layers 4-5 of this cycle are flagged too
    agenda, agenda_edges = build_agenda(bank, cycle)
    plans, plan_edges = build_plans(bank, cycle, agenda)
    previous = _active(bank, "agenda")
    vectors = bank.embed_new_texts([agenda, *plans])  # outside the lock
    with bank.writing():  # the new agenda and plans replace the old ones at once, in one write session
        bank.write([agenda, *plans], [*agenda_edges, *plan_edges], run_id=cycle.run_id, vectors=vectors)
        bank.add_edges([Edge.between(p.id, agenda.id, EdgeType.EVOLVES_INTO) for p in previous if p.id != agenda.id],
                       run_id=cycle.run_id)
        retire_stale(bank, cycle, "agenda", [agenda])
        retire_stale(bank, cycle, "plan", plans)
    result = PhaseResult(counts={"agenda_items": len(agenda.items), "plans": len(plans),
                                 "plan_steps": sum(len(p.steps) for p in plans),
                                 "newly_disputed": disputed, "disputes_cleared": cleared})
    result.summary.append(digest_line(bank, "agenda", agenda, f" ({len(agenda.items)} items)"))
    result.summary += [f"  {i + 1}. {item.reason}" for i, item in enumerate(agenda.items[:5])]
    result.summary += [digest_line(bank, "plan", p, f" ({len(p.steps)} steps)") for p in plans]
    return result


def _active(bank: Bank, type: str) -> list:
    with bank.reading() as db:
        return db.list_objects(type=type, status="active", limit=1000)


# ---- agenda ----------------------------------------------------------------------------------


def build_agenda(bank: Bank, cycle: Cycle) -> tuple[Agenda, list[Edge]]:
    """Open contradictions and unanswered questions, most consequential first."""
    with bank.reading() as db:
        open_ids = [r[0] for r in db.sql("SELECT id FROM objects WHERE type = 'contradiction' AND status = 'active' "
                                          "AND json_extract_string(data, '$.resolution') = 'open' ORDER BY id")]
        question_ids = [r[0] for r in db.sql(
            "SELECT id FROM objects WHERE type = 'question' AND status = 'active' "
            "AND NOT coalesce(json_extract(data, '$.answered')::BOOLEAN, false) ORDER BY id")]
        objects = db.get_objects([*open_ids, *question_ids])
        centrality = _subject_centrality(db, [*open_ids, *question_ids])
        newest = _newest_source(db, [*open_ids, *question_ids])
    dependents: dict[str, int] = {}
    # the stored flags, which `run` has just brought in line with `dispute_map`: reading them is a column
    # scan, recomputing them a recursive query over the whole bank (0.04 against 0.19 s at 6,000 documents)
    for flagged_by in confidence.flagged_now(bank).values():
        for ctr in flagged_by:
            dependents[ctr] = dependents.get(ctr, 0) + 1
    # a question raised by an open contradiction is on the agenda through that contradiction
    still_open = set(open_ids)
    standalone = [q for q in question_ids
                  if not any(a in objects and isinstance(objects[a], Contradiction) for a in objects[q].about)
                  and not still_open.intersection(objects[q].derived_from)]
    candidates = [objects[i] for i in [*open_ids, *standalone]]
    now = datetime.now(timezone.utc)
    max_dep = max([dependents.get(o.id, 0) for o in candidates], default=0)
    max_cen = max([centrality.get(o.id, 0) for o in candidates], default=0)
    scored = []
    for obj in candidates:
        dep, cen = dependents.get(obj.id, 0), centrality.get(obj.id, 0)
        age_days = max(0.0, (now - newest.get(obj.id, obj.created)).total_seconds() / 86400)
        parts = {"dependents": _share(dep, max_dep), "centrality": _share(cen, max_cen),
                 "recency": 0.5 ** (age_days / RECENCY_HALF_LIFE_DAYS)}
        score = round(sum(WEIGHTS[k] * v for k, v in parts.items()), 4)
        scored.append((score, obj, dep, cen))
    scored.sort(key=lambda item: (-item[0], item[1].id))
    items = [AgendaItem(object_id=obj.id, score=score, reason=_reason(obj, dep, cen), settle_with=_settle(obj))
             for score, obj, dep, cen in scored[:AGENDA_SIZE]]
    cited = [i.object_id for i in items]
    agenda = Agenda(
        id=stable_id("agd", cycle.key), title=f"Research agenda after {cycle.key}",
        description=f"{len(candidates)} open contradictions and questions; the {len(items)} that most of the bank "
                    "depends on come first.",
        items=items, derived_from=cited, source_ids=sorted({s for i in cited for s in objects[i].source_ids})[:200],
        run_id=cycle.run_id, tags=[cycle.tag], confidence=1.0, body=_agenda_body(items, objects),
    )
    return agenda, [Edge.between(agenda.id, i, EdgeType.REFERENCES) for i in cited]


def _share(value: int, top: int) -> float:
    return math.log1p(value) / math.log1p(top) if top else 0.0


def _subject_centrality(db, ids: list[str]) -> dict[str, int]:
    """For each contradiction or question: in how many claims the most discussed of its subjects (the
    entities and concepts its claims reference) is named. A dispute about a much-discussed subject
    matters more. Each subject's claims are counted once, however many items name it. Counting the
    claims of all of an item's subjects together joined every item to every claim of a hub: items
    times about 10^5 rows at 50,000 documents."""
    if not ids:
        return {}
    rows = db.sql(
        """
        WITH sides AS (
            SELECT o.id AS item, unnest(CASE WHEN o.type = 'contradiction'
                THEN from_json(json_extract(o.data, '$.claim_ids'), '["VARCHAR"]')
                ELSE from_json(json_extract(o.data, '$.about'), '["VARCHAR"]') END) AS claim
            FROM objects o WHERE o.id IN (SELECT unnest(?::VARCHAR[]))
        ),
        subjects AS (
            SELECT DISTINCT s.item, e.tail AS subject FROM sides s
            JOIN edges e ON e.head = s.claim AND e.edge_type = 'references'
        ),
        named AS (
            SELECT e.tail AS subject, count(DISTINCT e.head) AS claims FROM edges e
            WHERE e.edge_type = 'references' AND e.tail IN (SELECT subject FROM subjects)
            GROUP BY e.tail
        )
        SELECT s.item, max(n.claims) FROM subjects s JOIN named n USING (subject) GROUP BY s.item
        """, [ids])
    return dict(rows)


def _newest_source(db, ids: list[str]) -> dict[str, datetime]:
    if not ids:
        return {}
    where, params = id_filter("o.id", ids)
    rows = db.sql("SELECT o.id, max(s.ingested_at) FROM objects o, unnest(o.source_ids) AS u(sid) "
                  f"JOIN sources s ON s.id = u.sid WHERE {where} GROUP BY o.id", params)
    return {r[0]: r[1] for r in rows if r[1] is not None}


def _reason(obj, dependents: int, centrality: int) -> str:
    what = f"contradiction: {obj.title}" if isinstance(obj, Contradiction) else f"question: {obj.title}"
    return f"{what} ({dependents} objects depend on it; its most discussed subject appears in {centrality} claims)"


def _settle(obj) -> str:
    if isinstance(obj, Contradiction):
        kind = next((t for t in obj.tags if t in SETTLE_WITH), "")
        return SETTLE_WITH.get(kind, "a primary source that states this directly, with its date")
    if isinstance(obj, Question):
        return "a source that answers the question directly, cited with its span"
    return ""


def _agenda_body(items: list[AgendaItem], objects: dict) -> str:
    lines = ["## Most consequential first", ""]
    for n, item in enumerate(items, 1):
        obj = objects[item.object_id]
        lines.append(f"{n}. **{obj.title}** — score {item.score:.2f}  ")
        lines.append(f"   {item.reason}  ")
        lines.append(f"   Settle with: {item.settle_with}. [{obj.id}](../../{obj.path()})")
    return "\n".join(lines) + "\n"


# ---- plans -----------------------------------------------------------------------------------


def build_plans(bank: Bank, cycle: Cycle, agenda: Agenda) -> tuple[list[Plan], list[Edge]]:
    """Next steps: settle the top contradictions (which documents to compare), answer the open
    questions, explore the entities that bridge separate communities, and fill the knowledge gaps."""
    with bank.reading() as db:
        items = db.get_objects([i.object_id for i in agenda.items])
        claims = db.get_objects(sorted({c for o in items.values() if isinstance(o, Contradiction)
                                        for c in o.claim_ids}))
        paths = dict(db.sql("SELECT id, path FROM sources"))
        insights = [o for o in db.list_objects(type="insight", status="active", limit=10_000)
                    if isinstance(o, Insight)]
    settle, answer = [], []
    for item in agenda.items:
        obj = items.get(item.object_id)
        if isinstance(obj, Contradiction):
            sides = [claims[c] for c in obj.claim_ids if c in claims]
            where = " with ".join(f"`{paths.get(c.source_ids[0], c.source_ids[0])}`"
                                  + (f" line {c.source_spans[0].line_start}" if c.source_spans else "")
                                  for c in sides if c.source_ids)
            settle.append(PlanStep(action=f"Compare {where} on {obj.attribute or 'the disputed point'}; find "
                                          f"{item.settle_with}; then resolve `{obj.id}` as explained or superseded.",
                                   cites=[obj.id, *obj.claim_ids]))
        elif isinstance(obj, Question):
            answer.append(PlanStep(action=f"Ask or read to answer: {obj.question}", cites=[obj.id, *obj.about]))
    insights.sort(key=lambda o: (-o.weight, -len(o.source_ids), o.id))  # the strongest (then most widely named) first
    explore = [PlanStep(action=f"{i.description} Read the cited claims side by side.", cites=[i.id, *i.evidence])
               for i in insights if i.kind == "bridge_entity"][:5]
    fill = [PlanStep(action=f"{i.description} Find or write a source that describes it.", cites=[i.id, *i.evidence])
            for i in insights if i.kind == "knowledge_gap"][:5]
    plans, edges = [], []
    for kind, title, steps in (("settle", "Settle the most consequential contradictions", settle[:10]),
                               ("answer", "Answer the open questions", answer[:10]),
                               ("explore", "Explore the bridges between communities", explore),
                               ("fill", "Fill the gaps: things often named and never described", fill)):
        if not steps:
            continue
        cited = list(dict.fromkeys(c for s in steps for c in s.cites))
        plan = Plan(
            id=stable_id("pln", cycle.key, kind), title=title, steps=steps,
            description=f"{len(steps)} steps derived from the research agenda after {cycle.key}.",
            derived_from=[agenda.id, *cited],
            source_ids=agenda.source_ids if kind in ("settle", "answer") else _sources(insights, cited),
            run_id=cycle.run_id, tags=[cycle.tag, kind], confidence=1.0,
            body="\n".join(f"{n}. {s.action}  \n   cites: {', '.join(f'`{c}`' for c in s.cites)}"
                           for n, s in enumerate(steps, 1)) + "\n",
        )
        plans.append(plan)
        edges.append(Edge.between(plan.id, agenda.id, EdgeType.DERIVES_FROM))
        edges.extend(Edge.between(plan.id, c, EdgeType.REFERENCES) for c in cited[:50])
    return plans, edges


def _sources(insights: list[Insight], cited: list[str]) -> list[str]:
    """The documents behind the insights a plan cites."""
    wanted = set(cited)
    return sorted({s for i in insights if i.id in wanted for s in i.source_ids})
