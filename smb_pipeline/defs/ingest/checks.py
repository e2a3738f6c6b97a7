"""Checks on layers 0-1: immutability of sources, four-store consistency, valid front matter."""


import dagster as dg

from smb_core.integrity import front_matter_errors, layer0_hash_mismatches, objects_of_run
from smb_pipeline.defs.ingest import assets
from smb_pipeline.defs.resources import MemoryBankResource


FRONT_MATTER_SAMPLE = 1000


def _result(problems: list[str], checked: int, what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=not problems,
        description=f"{len(problems)} {'problem' if len(problems) == 1 else 'problems'}, the first: {problems[0]}"
        if problems else None,
        metadata={"checked": checked, "problems": len(problems),
                  "details": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems[:50]) or f"all {what} ok")},
    )


@dg.asset_check(asset=assets.source, blocking=True)
def layer0_matches_sha256(bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Every layer-0 copy still has the bytes whose sha256 was recorded: layer 0 is immutable."""
    memory = bank.open()
    problems = layer0_hash_mismatches(memory)
    with memory.reading() as db:
        checked = db.sql("SELECT count(*) FROM sources")[0][0]
    return _result(problems, checked, "layer-0 copies")


@dg.asset_check(asset=assets.extracted)
def layer1_in_all_four_stores(context: dg.AssetCheckExecutionContext, bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Each layer-1 object of this run is a markdown file, a DuckDB row, its text's Chroma vector and a graph node."""
    memory = bank.open()
    ids = objects_of_run(memory, context.run.run_id, layer=1)
    report = memory.check_consistency(ids)
    problems = [f"{kind}: {', '.join(v)}" for kind, v in report.items() if kind.startswith("missing_") and v]
    return _result(problems, report["checked"], "objects")


@dg.asset_check(asset=assets.extracted)
def layer1_front_matter_valid(context: dg.AssetCheckExecutionContext, bank: MemoryBankResource) -> dg.AssetCheckResult:
    """Layer-1 markdown files of this run (all, or an even sample of FRONT_MATTER_SAMPLE for a large
    run) parse and validate against their pydantic models."""
    memory = bank.open()
    ids = objects_of_run(memory, context.run.run_id, layer=1)
    sample = sorted(ids)[:: max(1, len(ids) // FRONT_MATTER_SAMPLE)]  # parsing every file costs more than writing it
    return _result(front_matter_errors(memory, sample), len(sample), "files")
