"""Layer 2 for one cycle: merge duplicates, split overloaded concepts, then, when due, the global passes
(taxonomy, clusters, communities)."""

from __future__ import annotations

from smb_core.bank import Bank
from smb_core.evolve import communities, merge, split, taxonomy
from smb_core.evolve.cycle import (
    GLOBAL_PASSES_SKIPPED, Cycle, PhaseResult, digest_line, new_object_ids, retire_stale, sources_since_global_passes,
)


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    merged, new_mentions = _merge_new_mentions(bank, cycle)
    touched = {i for i, kind in merged.canonical_ids.items() if kind == "canonical_concept"}
    grown_since = sources_since_global_passes(bank, cycle)
    if cycle.global_passes:  # also the concepts that grew only in the cycles that skipped them
        touched.update(split.concepts_grown_by(bank, grown_since))
    subs, split_heads, senses = [], 0, 0  # subs: the first few senses, for the digest
    for made, updated, split_edges in split.split_batches(bank, cycle, sorted(touched),
                                                          grown_since=None if cycle.global_passes else grown_since):
        bank.write(made, split_edges, run_id=cycle.run_id)  # a batch at a time: a stopped run keeps them
        bank.update_objects(updated)
        subs += made[:6 - len(subs)]
        split_heads, senses = split_heads + len({e.head for e in split_edges}), senses + len(made)
    kinds, clusters, found, retired, repaired, unsupported = [], [], [], 0, 0, 0
    if cycle.global_passes:
        repaired = merge.repair_member_lists(bank, cycle)
        unsupported = merge.retire_unsupported(bank, cycle)
        kinds, kind_edges = taxonomy.build_taxonomy(bank, cycle)
        bank.write(kinds, kind_edges, run_id=cycle.run_id)
        clusters, cluster_edges = taxonomy.build_clusters(bank, cycle)
        bank.write(clusters, cluster_edges, run_id=cycle.run_id)
        found, edges = communities.detect(bank, cycle)
        bank.write(found, edges, run_id=cycle.run_id)
        retired = retire_stale(bank, cycle, "cluster", clusters) + retire_stale(bank, cycle, "community", found)
    else:
        result.summary.append(GLOBAL_PASSES_SKIPPED)
    result.counts = {
        "new_entities_and_concepts": new_mentions,
        "merge_groups": merged.groups,
        "merged": merged.merged_members,
        "canonical_absorbed": merged.absorbed,
        "absorptions_repointed": merged.repointed,
        "redirected_edges": merged.redirected_edges,
        "split": split_heads,
        "senses": senses,
        "global_passes": int(cycle.global_passes),
    }
    if cycle.global_passes:  # a skipped pass has no counts (not zeros that would read as "none left")
        result.counts.update(taxonomy_nodes=len(kinds), clusters=len(clusters), communities=len(found),
                             groupings_superseded=retired, member_lists_repaired=repaired,
                             canonical_no_longer_named=unsupported)
    result.summary += [digest_line(bank, "sense", s) for s in subs]
    result.summary += [digest_line(bank, "merged", o, f" ← {', '.join(o.aliases[:5])}") for o in merged.shown]
    result.summary += [digest_line(bank, "community", c, f" ({len(c.members)} members)") for c in found[:10]]
    return result


def _merge_new_mentions(bank: Bank, cycle: Cycle) -> tuple[merge.MergeResult, int]:
    """Merge the cycle's new entities and concepts; also how many there were. Their ids (millions in a
    first cycle over a large corpus) are not kept past the merge."""
    new_ids = new_object_ids(bank, cycle, ("entity", "concept"))
    return merge.merge(bank, cycle, new_ids), len(new_ids)
