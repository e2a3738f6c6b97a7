"""Layer 2 for one cycle: merge duplicates, then recompute communities (a bounded global pass)."""

from __future__ import annotations

from dataclasses import dataclass, field

from smb_core.bank import Bank
from smb_core.evolve import communities, merge
from smb_core.evolve.cycle import Cycle, new_object_ids


@dataclass
class SemanticResult:
    counts: dict[str, int] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)


def run(bank: Bank, cycle: Cycle) -> SemanticResult:
    result = SemanticResult()
    new_ids = new_object_ids(bank, cycle, ("entity", "concept"))
    merged = merge.merge(bank, cycle, new_ids)
    found, edges = communities.detect(bank, cycle)
    bank.write(found, edges, run_id=cycle.run_id)
    result.counts = {
        "new_entities_and_concepts": len(new_ids),
        "merge_groups": merged.groups,
        "merged": merged.merged_members,
        "redirected_edges": merged.redirected_edges,
        "communities": len(found),
    }
    result.summary += [f"- merged **{o.title}** ← {', '.join(o.aliases[:5])}" for o in merged.canonical[:10]]
    result.summary += [f"- {c.title} ({len(c.members)} members)" for c in found[:10]]
    return result
