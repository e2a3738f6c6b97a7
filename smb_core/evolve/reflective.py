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
from smb_core.stores.metadata import looked_up_rows


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    new_claims, checked, waiting = _claims_to_check(bank, cycle, bank.settings.contradiction_claims_per_cycle)
    found = find_contradictions(bank, checked, run_id=cycle.run_id)
    verdicts = [*found.contradictions, *found.questions]
    vectors = bank.embed_new_texts(verdicts)  # outside the lock
    with bank.writing() as db:  # the claims leave the backlog in the session that stores their verdicts
        bank.write(verdicts, found.edges, run_id=cycle.run_id, vectors=vectors)
        db.con.execute("DELETE FROM contradiction_backlog WHERE claim_id IN (SELECT unnest(?::VARCHAR[]))",
                       [checked])
    if waiting:
        result.summary.append(f"_{waiting} claims wait for the contradiction check, at most "
                              f"{bank.settings.contradiction_claims_per_cycle} a cycle "
                              f"(SMB_CONTRADICTION_CLAIMS_PER_CYCLE); the next cycles check them._")
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
    result.counts = {"new_claims": new_claims, "claims_checked": len(checked), "claims_waiting": waiting,
                     "contradictions_new": len(found.contradictions),
                     "contradictions_total": total, "questions": len(found.questions),
                     **({f"insights_{kind}": sum(i.kind == kind for i in insights) for kind in KINDS}
                        if cycle.global_passes else {}),
                     "global_passes": int(cycle.global_passes),
                     "supporting_restatements": len(supports), "deprecated_by_decay": len(decayed),
                     "newly_disputed": disputed, "disputes_cleared": cleared}
    result.summary += [digest_line(bank, "contradiction", c) for c in found.contradictions[:10]]
    result.summary += [digest_line(bank, "insight", i) for i in insights[:10]]
    return result


def _claims_to_check(bank: Bank, cycle: Cycle, limit: int) -> tuple[int, list[str], int]:
    """(how many new claims the cycle brought, the claims it checks for contradictions, how many are left
    waiting). The cycle's new claims join a backlog in DuckDB; the cycle takes at most `limit` of it (0:
    all), its own claims first, then the oldest. Checking costs 15-21 ms a claim at 10,000 documents, so a
    first cycle over a large bank would otherwise hold the store for hours, and ingest with it; this way
    each cycle stays bounded and the schedule works through the rest. The new claims' ids (millions in a
    first cycle over a large corpus) are not kept past this."""
    new_claims = new_object_ids(bank, cycle, ("claim",))
    with bank.writing() as db:
        db.con.execute("INSERT OR IGNORE INTO contradiction_backlog SELECT unnest(?::VARCHAR[]), ?",
                       [new_claims, cycle.key])
        # claims merged, split or deprecated while they waited leave the backlog; looked up by id rather
        # than by reading every claim of the bank, which each cycle did however short the backlog
        backlog = [r[0] for r in db.sql("SELECT claim_id FROM contradiction_backlog")]
        live = {r[0] for r in looked_up_rows(db, "objects", "id", backlog, "id, type, status", "id",
                                             "type = 'claim' AND status = 'active'")}
        db.con.execute("DELETE FROM contradiction_backlog WHERE claim_id IN (SELECT unnest(?::VARCHAR[]))",
                       [[c for c in backlog if c not in live]])
        total = db.sql("SELECT count(*) FROM contradiction_backlog")[0][0]
        rows = db.sql("SELECT claim_id FROM contradiction_backlog ORDER BY (cycle = ?) DESC, cycle, claim_id"
                      + (" LIMIT ?" if limit > 0 else ""), [cycle.key, limit] if limit > 0 else [cycle.key])
    return len(new_claims), [r[0] for r in rows], total - len(rows)
