"""Layers 0 and 1: `source` stores immutable document versions, `extracted` turns them into objects.

Both are partitioned by document and take many partitions per run (a sensor or `smb ingest` asks
for key ranges), so thousands of new files need a few runs, not thousands.
"""


from collections import Counter
from collections.abc import Iterator

import dagster as dg

from smb_core.ingest import extract_sources, files_for_partitions, get_extractor, ingest_sources
from smb_pipeline.defs.partitions import documents
from smb_pipeline.defs.resources import MemoryBankResource

#: Backfills launched from the UI are split into runs of at most this many documents.
BACKFILL = dg.BackfillPolicy.multi_run(max_partitions_per_run=1000)
#: Runs that write the bank share one Dagster pool (limit 1 in the instance config `smb` writes).
#: Rows of preview in a run's metadata (copied onto each partition's event, so kept short).
PREVIEW_ROWS = 3
POOL = "smb_bank"


@dg.asset(
    partitions_def=documents,
    backfill_policy=BACKFILL,
    code_version="source-1",
    pool=POOL,
    group_name="ingest",
    kinds={"markdown", "duckdb"},
)
def source(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> Iterator[dg.AssetObservation |
                                                                                   dg.MaterializeResult]:
    """Layer 0: an immutable, content-hashed copy of each document. A changed file becomes a new
    version and the old one is kept (marked superseded). Bad files are rejected with their reason;
    a run in which every file is rejected fails with those reasons."""
    # A generator, so the rejection observations are recorded even when the run then fails
    # (events logged with `context.log_event` are dropped when the asset raises).
    memory = bank.open()
    files = files_for_partitions(bank.corpus_dir, list(context.partition_keys))
    missing = [key for key, f in files.items() if f is None]
    outcomes = ingest_sources(memory, [f for f in files.values() if f is not None], bank.corpus_dir,
                              context.run.run_id)
    rejected = [o for o in outcomes if o.status == "rejected"]
    for outcome in rejected:
        context.log.error(f"rejected {outcome.path}: {outcome.reason}")
        yield dg.AssetObservation(
            asset_key=context.asset_key, partition=outcome.partition_key,
            metadata={"path": outcome.path, "rejected": outcome.reason},
        )
    for key in missing:
        context.log.warning(f"partition {key}: its file is no longer in {bank.corpus_dir}; earlier versions stay")
    if outcomes and len(rejected) == len(outcomes):
        raise dg.Failure(
            description="every document in this run was rejected: "
            + "; ".join(f"{o.path}: {o.reason}" for o in rejected),
            metadata={"rejected": dg.MetadataValue.json({o.path: o.reason for o in rejected})},
        )
    statuses = Counter(o.status for o in outcomes)
    # Dagster copies a range run's metadata onto every partition's materialization event: keep it small
    # (a 50-row table on each of 600 events cost a fifth of the ingest time).
    table = "\n".join(
        f"| `{o.path}` | {o.status} | {o.version or ''} | {(o.sha256 or '')[:12]} | {o.reason} |"
        for o in outcomes[:PREVIEW_ROWS]
    )
    yield dg.MaterializeResult(metadata={
        "documents": len(outcomes),
        **{f"status_{k}": v for k, v in sorted(statuses.items())},
        "missing_files": len(missing),
        "documents_preview": dg.MetadataValue.md(
            "| path | status | version | sha256 | reason |\n|---|---|---|---|---|\n" + table
        ),
    })


@dg.asset(
    partitions_def=documents,
    backfill_policy=BACKFILL,
    deps=[source],
    code_version="extracted-1",
    pool=POOL,
    group_name="ingest",
    kinds={"spacy", "chromadb", "duckdb"},
    automation_condition=dg.AutomationCondition.eager(),
)
def extracted(context: dg.AssetExecutionContext, bank: MemoryBankResource) -> dg.MaterializeResult:
    """Layer 1: entities, concepts, claims and relationships of each document's current version,
    written to markdown, DuckDB, Chroma and the graph with shared ids and their source spans."""
    memory = bank.open()
    keys = list(context.partition_keys)
    with memory.reading() as db:
        source_ids = db.active_source_ids_for_partitions(keys)
    extractor = get_extractor(memory.settings)
    summary = extract_sources(memory, source_ids, extractor, run_id=context.run.run_id)
    context.log.info(f"extracted {summary.documents} documents ({summary.skipped} already extracted)")
    return dg.MaterializeResult(metadata={
        "documents": summary.documents,
        "already_extracted": summary.skipped,
        "superseded_not_found_again": summary.superseded,
        **{f"count_{k}": v for k, v in sorted(summary.counts.items())},
        "extractors": dg.MetadataValue.json(dict(summary.extractors)),
        "preview": dg.MetadataValue.md("\n".join(summary.preview[:PREVIEW_ROWS]) or "_nothing new_"),
    })


ingest_job = dg.define_asset_job(
    "ingest", selection=[source, extracted], partitions_def=documents, tags={"smb/writer": "bank"},
    description="Layers 0-1 for a range of documents (what the sensor and `smb ingest` launch).",
)
