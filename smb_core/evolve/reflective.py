"""Layer 3 for one cycle: contradictions between claims (each with a research question), insights, and
confidence upkeep: reinforcement by new independent sources, decay, and dispute flags (see `confidence`)."""

from __future__ import annotations

import json

from smb_core.bank import Bank
from smb_core.evolve import communities, confidence
from smb_core.evolve.contradictions import find_contradictions
from smb_core.evolve.cycle import (
    GLOBAL_PASSES_SKIPPED, Cycle, PhaseResult, digest_line, new_object_ids, retire_stale,
)
from smb_core.model import Edge, EdgeType, Insight, stable_id


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    claims = new_object_ids(bank, cycle, ("claim",))
    found = find_contradictions(bank, claims, run_id=cycle.run_id)
    bank.write([*found.contradictions, *found.questions], found.edges, run_id=cycle.run_id)
    insights = []
    if cycle.global_passes:  # bridges between communities change only when the communities do
        insights, edges = bridge_insights(bank, cycle)
        bank.write(insights, edges, run_id=cycle.run_id)
        retire_stale(bank, cycle, "insight", insights, kind="bridge_entity")
    else:
        result.summary.append(GLOBAL_PASSES_SKIPPED)
    supports = confidence.reinforce(bank, cycle)
    decayed = confidence.deprecate_decayed(bank, cycle)
    disputed, cleared = confidence.propagate_disputes(bank)
    with bank.reading() as db:
        total = db.sql("SELECT count(*) FROM objects WHERE type = 'contradiction'")[0][0]
    with bank.writing() as db:
        db.con.execute("UPDATE cycles SET counts = ? WHERE key = ?",
                       [json.dumps({"contradictions_total": total}), cycle.key])
    result.counts = {"new_claims": len(claims), "contradictions_new": len(found.contradictions),
                     "contradictions_total": total, "questions": len(found.questions),
                     **({"insights": len(insights)} if cycle.global_passes else {}),
                     "global_passes": int(cycle.global_passes),
                     "supporting_restatements": len(supports), "deprecated_by_decay": len(decayed),
                     "newly_disputed": disputed, "disputes_cleared": cleared}
    result.summary += [digest_line(bank, "contradiction", c) for c in found.contradictions[:10]]
    result.summary += [digest_line(bank, "insight", i) for i in insights[:10]]
    return result


def bridge_insights(bank: Bank, cycle: Cycle) -> tuple[list[Insight], list[Edge]]:
    """Entities that join otherwise separate communities, citing the communities as evidence."""
    graph = communities.cooccurrence_graph(bank)
    with bank.reading() as db:
        found = [c for c in db.list_objects(type="community", status="active", limit=10_000)]
    insights, edges = [], []
    for node, community_ids in communities.bridge_nodes(graph, found):
        title = graph.nodes[node]["title"]
        insight = Insight(
            id=stable_id("ins", "bridge", node), title=f"{title} bridges {len(community_ids)} communities",
            description=f"{title} is named together with members of {len(community_ids)} otherwise separate "
                        f"communities, so it connects those topics.",
            kind="bridge_entity", evidence=community_ids, derived_from=[node, *community_ids],
            run_id=cycle.run_id, confidence=0.6, tags=[cycle.tag],
        )
        insights.append(insight)
        edges.append(Edge.between(insight.id, node, EdgeType.EXPLAINS))
        edges.extend(Edge.between(insight.id, c, EdgeType.REFERENCES) for c in community_ids)
    return insights, edges
