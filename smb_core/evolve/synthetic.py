"""Layer 4 for one cycle: abstractions and meta-concepts (`abstractions`), syntheses (`syntheses`) and
discovered relationships (`discovery`). Abstractions, meta-concepts and discoveries are global passes,
run when the cycle's `global_passes` says so; what a global pass no longer produces is superseded, not
deleted."""

from __future__ import annotations

from collections import Counter

from smb_core.bank import Bank
from smb_core.evolve import communities, discovery
from smb_core.evolve.abstractions import build_abstractions, build_meta_concepts, load_groupings
from smb_core.evolve.cycle import (
    GLOBAL_PASSES_SKIPPED, Cycle, PhaseResult, digest_line, retire_stale, unchanged_ids,
)
from smb_core.evolve.syntheses import build_syntheses, still_valid


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    abstractions, metas, found, retired = [], [], [], 0
    if cycle.global_passes:  # abstractions and discoveries follow the layer-2 groupings and the whole graph
        graph = communities.cooccurrence_graph(bank, cycle=cycle.key)
        groupings = load_groupings(bank)
        abstractions, edges = build_abstractions(bank, cycle, graph, groupings)
        metas, meta_edges = build_meta_concepts(bank, cycle, groupings)
        bank.write([*abstractions, *metas], [*edges, *meta_edges], run_id=cycle.run_id)
        retired = (retire_stale(bank, cycle, "abstraction", abstractions, kind="abstraction")
                   + retire_stale(bank, cycle, "abstraction", metas, kind="meta_concept"))
        found = discovery.discover(bank, cycle, graph)
        bank.write(found, run_id=cycle.run_id)
        kept = {r.id for r in found}
        retired += retire_stale(bank, cycle, "discovered_relationship",
                                [*found, *(r for r in discovery.still_valid(bank) if r.id not in kept)])
    else:
        result.summary.append(GLOBAL_PASSES_SKIPPED)
    syntheses, syn_edges = build_syntheses(bank, cycle)
    same = unchanged_ids(bank, syntheses)
    bank.write([s for s in syntheses if s.id not in same], [e for e in syn_edges if e.head not in same],
               run_id=cycle.run_id)
    retired += retire_stale(bank, cycle, "synthesis", syntheses, keep=still_valid(bank))
    result.counts = {
        "syntheses": len(syntheses),
        "syntheses_llm": sum(s.method == "llm" for s in syntheses),
        "synthesis_statements": sum(len(s.statements) for s in syntheses),
        "layer4_superseded": retired,
        "global_passes": int(cycle.global_passes),
    }
    if cycle.global_passes:  # a skipped pass has no counts (not zeros that would read as "none left")
        levels = Counter(a.level for a in abstractions)
        result.counts.update({
            "abstractions": len(abstractions),
            **{f"abstractions_level_{level}": n for level, n in sorted(levels.items())},
            "meta_concepts": len(metas),
            "discovered_relationships": len(found),
        })
    if same:
        result.summary.append(f"{len(same)} syntheses already said the same; not rewritten.")
    result.summary += [digest_line(bank, f"abstraction (level {a.level})", a) for a in abstractions[:8]]
    result.summary += [digest_line(bank, "meta-concept", m) for m in metas[:5]]
    result.summary += [digest_line(bank, "synthesis", s) for s in syntheses[:10]]
    result.summary += [digest_line(bank, "discovered", r) for r in found[:10]]
    return result

