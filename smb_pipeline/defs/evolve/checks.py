"""Checks on layers 2-6: contradictions never disappear, no dangling ids, merges resolve, every
citation resolves, layer 4 rests on at least two objects, dispute flags match open contradictions."""

import dagster as dg

from smb_core.integrity import (
    contradiction_counts, dangling_references, dispute_flag_mismatches, thinly_derived, unresolved_citations,
    member_list_mismatches, unresolved_merges,
)
from smb_pipeline.defs.evolve import assets
from smb_pipeline.defs.ingest.checks import _result
from smb_pipeline.defs.resources import MemoryBankResource


@dg.asset_check(asset=assets.reflective, blocking=True)
def contradictions_never_decrease(bank: MemoryBankResource) -> dg.AssetCheckResult:
    """The number of contradiction objects after each cycle is at least that after the one before."""
    history = contradiction_counts(bank.open())
    drops = [f"{b[0]}: {b[1]} after {a[0]}: {a[1]}" for a, b in zip(history, history[1:]) if b[1] < a[1]]
    return _result(drops, len(history), "cycles")


@dg.asset_check(asset=assets.reflective)
def no_dangling_ids(bank: MemoryBankResource) -> dg.AssetCheckResult:
    """No edge or `derived_from` points to an id that does not exist."""
    return _result(dangling_references(bank.open()), 1, "references")


@dg.asset_check(asset=assets.semantic)
def merged_objects_resolve(bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Every merged object points to an active canonical object, and every canonical object's member list
    names exactly the objects merged into it."""
    store = bank.open()
    return _result(unresolved_merges(store) + member_list_mismatches(store), 1, "merges")


@dg.asset_check(asset=assets.synthetic)
def layer4_citations_resolve(context: dg.AssetCheckExecutionContext,
                             bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Every statement of a synthesis this cycle wrote cites an object (and source span) that exists."""
    return _result(unresolved_citations(bank.open(), layers=(4,), run_id=context.run.run_id), 1, "citations")


@dg.asset_check(asset=assets.synthetic)
def layer4_derives_from_two_or_more(bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Every active layer-4 object has at least two `derived_from` ids."""
    return _result(thinly_derived(bank.open()), 1, "layer-4 objects")


@dg.asset_check(asset=assets.executive)
def layers_5_6_citations_resolve(context: dg.AssetCheckExecutionContext,
                                 bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Timelines, narratives, agenda items and plan steps this cycle wrote cite objects that exist."""
    return _result(unresolved_citations(bank.open(), layers=(5, 6), run_id=context.run.run_id), 1, "citations")


@dg.asset_check(asset=assets.executive)
def dispute_flags_match_open_contradictions(bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Objects flagged as disputed are exactly those an open contradiction reaches through `derived_from`."""
    return _result(dispute_flag_mismatches(bank.open()), 1, "dispute flags")
