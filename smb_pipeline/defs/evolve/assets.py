"""Layers 2-6, one partition per evolution cycle, materialized in order by the `evolve` job:
semantic -> reflective -> synthetic -> narrative -> executive. Each cycle works on the documents
ingested since the previous one, plus bounded global passes; each asset is a thin call into
`smb_core.evolve` and reports the phase's counts and a markdown digest as partition metadata."""

from collections.abc import Callable

import dagster as dg

from smb_core.bank import Bank
from smb_core.evolve import executive as executive_phase
from smb_core.evolve import narrative as narrative_phase
from smb_core.evolve import reflective as reflective_phase
from smb_core.evolve import semantic as semantic_phase
from smb_core.evolve import synthetic as synthetic_phase
from smb_core.evolve.cycle import Cycle, PhaseResult, finish_cycle, finish_layer, layers_done, open_cycle
from smb_core.heap import frozen_heap
from smb_pipeline.defs.ingest.assets import POOL, extracted
from smb_pipeline.defs.partitions import cycles
from smb_pipeline.defs.resources import MemoryBankResource

#: Runs that write the bank carry this tag; the instance's run queue lets one of them run at a time.
WRITER_TAG = {"smb/writer": "bank"}


def _run_phase(context: dg.AssetExecutionContext, bank: MemoryBankResource, title: str,
               phase: Callable[[Bank, Cycle], PhaseResult]) -> tuple[Bank, Cycle, dg.MaterializeResult]:
    memory = bank.open()
    cycle = open_cycle(memory, context.partition_key, context.run.run_id)
    with frozen_heap():  # what lived before the phase is not scanned again at each of its full collections
        result = phase(memory, cycle)
    if context.asset_key != executive.key:  # the last layer finishes the cycle itself
        finish_layer(memory, cycle, context.asset_key.to_user_string())
    digest = f"### Cycle {cycle.key}: {title}\n\n" + ("\n".join(result.summary) or "_no changes_")
    return memory, cycle, dg.MaterializeResult(metadata={**result.counts, "summary": dg.MetadataValue.md(digest)})


def _layer(name: str, dep, code_version: str, kinds: set[str]):
    return dict(name=name, partitions_def=cycles, deps=[dep], code_version=code_version, pool=POOL,
                group_name="evolve", kinds=kinds)


@dg.asset(**_layer("semantic", extracted, "semantic-2", {"networkx", "duckdb"}))
def semantic(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 2: duplicates across documents merged into canonical entities and concepts (members keep
    a pointer; merges are recorded and can be undone), overloaded concepts split into senses, taxonomy,
    embedding clusters and graph communities."""
    memory, cycle, result = _run_phase(context, bank, "semantic layer", semantic_phase.run)
    result.metadata["documents_consumed"] = len(cycle.source_ids)
    return result


@dg.asset(**_layer("reflective", semantic, "reflective-3", {"duckdb", "chromadb"}))
def reflective(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 3: contradictions between claims (first-class, never deleted, each with a research
    question) and insights that cite their evidence."""
    return _run_phase(context, bank, "reflective layer", reflective_phase.run)[2]


@dg.asset(**_layer("synthetic", reflective, "synthetic-2", {"networkx", "duckdb"}))
def synthetic(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 4: abstractions over communities and taxonomy, syntheses of claims from three or more
    documents (every statement cited), and relationships no single document states."""
    return _run_phase(context, bank, "synthetic layer", synthetic_phase.run)[2]


@dg.asset(**_layer("narrative", synthetic, "narrative-1", {"duckdb"}))
def narrative(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 5: timelines of dated events, narratives of how topics developed, and this cycle's
    record of what changed in the bank."""
    return _run_phase(context, bank, "narrative layer", narrative_phase.run)[2]


@dg.asset(**_layer("executive", narrative, "executive-1", {"duckdb"}))
def executive(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 6: confidence decay and dispute flags brought up to date, the research agenda ranked by
    how much of the bank depends on each open question, and plans citing it. Ends the cycle."""
    memory, cycle, result = _run_phase(context, bank, "executive layer", executive_phase.run)
    finish_cycle(memory, cycle)
    return result


#: The cycle's layers in the order the job runs them.
LAYERS = [semantic, reflective, synthetic, narrative, executive]


def layers_to_run(bank: Bank, key: str) -> list[dg.AssetKey]:
    """The layers a run of cycle `key` must materialize: all of them, except that a cycle whose last run
    died resumes at its first layer not done (those before it stand; redoing them could take an hour)."""
    done = layers_done(bank, key)
    first = next((n for n, layer in enumerate(LAYERS) if layer.key.to_user_string() not in done), len(LAYERS) - 1)
    return [layer.key for layer in LAYERS[first:]]


evolve_job = dg.define_asset_job(
    "evolve", selection=LAYERS, partitions_def=cycles,
    tags=WRITER_TAG, description="One evolution cycle over the documents ingested since the previous cycle.",
)
