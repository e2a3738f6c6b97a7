"""Layers 2-3, one partition per evolution cycle: `semantic` (merge, communities) and `reflective`
(contradictions, research questions, insights). Each cycle works on the documents ingested since
the previous one, plus bounded global passes."""

import dagster as dg

from smb_core.evolve import reflective as reflective_phase
from smb_core.evolve import semantic as semantic_phase
from smb_core.evolve.cycle import open_cycle
from smb_pipeline.defs.ingest.assets import POOL, extracted
from smb_pipeline.defs.partitions import cycles
from smb_pipeline.defs.resources import MemoryBankResource

#: Runs that write the bank carry this tag; the instance's run queue lets one of them run at a time.
WRITER_TAG = {"smb/writer": "bank"}


def _summary(title: str, lines: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md(f"### {title}\n\n" + ("\n".join(lines) or "_no changes_"))


@dg.asset(
    partitions_def=cycles, deps=[extracted], code_version="semantic-1", pool=POOL, group_name="evolve",
    kinds={"networkx", "duckdb"},
)
def semantic(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 2: duplicates across documents merged into canonical entities and concepts (members keep
    a pointer; merges are recorded and can be undone), and graph communities of what is named together."""
    memory = bank.open()
    cycle = open_cycle(memory, context.partition_key, context.run.run_id)
    result = semantic_phase.run(memory, cycle)
    return dg.MaterializeResult(metadata={
        **result.counts,
        "documents_consumed": len(cycle.source_ids),
        "summary": _summary(f"Cycle {cycle.key}: semantic layer", result.summary),
    })


@dg.asset(
    partitions_def=cycles, deps=[semantic], code_version="reflective-1", pool=POOL, group_name="evolve",
    kinds={"duckdb", "chromadb"},
)
def reflective(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 3: contradictions between claims (first-class, never deleted, each with a research
    question) and insights that cite their evidence."""
    memory = bank.open()
    cycle = open_cycle(memory, context.partition_key, context.run.run_id)
    result = reflective_phase.run(memory, cycle)
    return dg.MaterializeResult(metadata={
        **result.counts,
        "summary": _summary(f"Cycle {cycle.key}: reflective layer", result.summary),
    })


evolve_job = dg.define_asset_job(
    "evolve", selection=[semantic, reflective], partitions_def=cycles, tags=WRITER_TAG,
    description="One evolution cycle over the documents ingested since the previous cycle.",
)
