"""Watches the corpus folder and asks for ingest runs over ranges of new or changed documents."""


import json
import time

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from smb_core.corpus import changes_since, contiguous_ranges, scan
from smb_pipeline.defs.ingest import assets
from smb_pipeline.defs.partitions import documents
from smb_pipeline.defs.resources import MemoryBankResource

#: Documents per requested run: large enough to keep runs few, small enough to retry cheaply.
MAX_DOCUMENTS_PER_RUN = 2000


def range_tags(first: str, last: str) -> dict[str, str]:
    """Run tags that make one run materialize the partition range [first, last]."""
    return {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last}


@dg.sensor(job=assets.ingest_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING)
def kbmd_sensor(context: dg.SensorEvaluationContext, bank: MemoryBankResource) -> dg.SensorResult:
    """Scans SMB_KBMD_DIR recursively (`.md`, `.markdown`). The cursor is the newest change time
    seen, so a tick reads only file metadata and the known partitions, never the run history."""
    cursor = json.loads(context.cursor) if context.cursor else {"changed_ns": 0}
    started = time.time_ns()
    files = scan(bank.corpus_dir)
    existing = list(context.instance.get_dynamic_partitions(documents.name))
    changes = changes_since(files, set(existing), cursor.get("changed_ns", 0), scan_started_ns=started)
    new_keys = [f.partition_key for f in changes.new]
    wanted = set(new_keys) | {f.partition_key for f in changes.modified}
    ordered = [*existing, *new_keys]
    requests = [
        dg.RunRequest(run_key=f"{first}..{last}@{changes.watermark_ns}", tags=range_tags(first, last))
        for first, last in contiguous_ranges(ordered, wanted, MAX_DOCUMENTS_PER_RUN)
    ]
    context.update_cursor(json.dumps({"changed_ns": changes.watermark_ns}))
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[documents.build_add_request(new_keys)] if new_keys else [],
    )
