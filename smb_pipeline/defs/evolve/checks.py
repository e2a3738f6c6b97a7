"""Checks on layers 2-3: contradictions never disappear, no dangling ids, merges resolve."""

import dagster as dg

from smb_core.integrity import contradiction_counts, dangling_references, unresolved_merges
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
    """Every merged object points to an active canonical object."""
    return _result(unresolved_merges(bank.open()), 1, "merges")
