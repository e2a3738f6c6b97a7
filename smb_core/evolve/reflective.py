"""Layer 3 for one cycle: contradictions between claims (each with a research question), insights
(bridges, knowledge gaps, well-supported claims; see `insights`), and
confidence upkeep: reinforcement by new independent sources, decay, and dispute flags (see `confidence`)."""

from __future__ import annotations

import json

from smb_core.bank import Bank
from smb_core.evolve import confidence
from smb_core.evolve.contradictions import find_contradictions
from smb_core.evolve.cycle import (
    GLOBAL_PASSES_SKIPPED, Cycle, PhaseResult, digest_line, new_object_ids, retire_stale,
)
from smb_core.evolve.insights import KINDS, find_insights, write_insights


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    claims = new_object_ids(bank, cycle, ("claim",))
    found = find_contradictions(bank, claims, run_id=cycle.run_id)
    bank.write([*found.contradictions, *found.questions], found.edges, run_id=cycle.run_id)
    insights = []
    if cycle.global_passes:  # bridges between communities change only when the communities do
        insights, edges = find_insights(bank, cycle)
        write_insights(bank, insights, edges, cycle.run_id)
        for kind in KINDS:
            retire_stale(bank, cycle, "insight", insights, kind=kind)
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
                     **({f"insights_{kind}": sum(i.kind == kind for i in insights) for kind in KINDS}
                        if cycle.global_passes else {}),
                     "global_passes": int(cycle.global_passes),
                     "supporting_restatements": len(supports), "deprecated_by_decay": len(decayed),
                     "newly_disputed": disputed, "disputes_cleared": cleared}
    result.summary += [digest_line(bank, "contradiction", c) for c in found.contradictions[:10]]
    result.summary += [digest_line(bank, "insight", i) for i in insights[:10]]
    return result

