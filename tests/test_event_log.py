"""smb's batched SQLite event log reads back exactly like Dagster's own after a partition-range ingest."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqliteEventLogStorage

from smb_core.settings import Settings
from smb_pipeline.event_log import BatchedSqliteEventLogStorage
from smb_pipeline.runner import RUN_LIMITS, instance_yaml, run_ingest
from tests.conftest import write_doc

ASSETS = [dg.AssetKey("source"), dg.AssetKey("extracted")]


def _ingest(tmp_path, name: str, config: str, corpus) -> tuple[dg.DagsterInstance, type]:
    home = tmp_path / name / "home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(config)
    instance = dg.DagsterInstance.from_config(str(home))
    report = run_ingest(Settings(memory_bank_dir=tmp_path / name / "bank", kbmd_dir=corpus), instance=instance)
    assert report.success, report.failures
    return instance, type(instance.event_log_storage)


def _history(instance: dg.DagsterInstance) -> dict:
    """What the UI and automation read: per asset, each partition's materialization and its indexed tags,
    and the asset's latest materialization."""
    history = {}
    for key in ASSETS:
        records = instance.fetch_materializations(key, limit=1000).records
        per_partition = {}
        for record in records:
            tags = instance.get_event_tags_for_asset(key, filter_event_id=record.storage_id)
            # the tags row is the one stored for this very event (ids assigned in the batch's order)
            assert tags == [{"dagster/data_version": record.asset_materialization.tags["dagster/data_version"]}]
            per_partition[record.partition_key] = record.asset_materialization.metadata["documents"].value
        latest = instance.get_latest_materialization_event(key)
        history[key] = (per_partition, sorted(instance.get_materialized_partitions(key)), latest.dagster_event.partition)
    return history


def test_a_range_run_reads_back_the_same_from_the_batched_event_log(tmp_path):
    corpus = tmp_path / "kbmd"
    for i in range(12):
        write_doc(corpus, f"doc-{i:02d}.md", f"# Document {i}\n\nAda Lovelace wrote note {i} in London.\n")
    ours, ours_class = _ingest(tmp_path, "ours", instance_yaml(tmp_path / "ours" / "home"), corpus)
    dagsters, dagsters_class = _ingest(tmp_path, "dagster", RUN_LIMITS, corpus)
    assert ours_class is BatchedSqliteEventLogStorage and dagsters_class is not BatchedSqliteEventLogStorage
    mine, theirs = _history(ours), _history(dagsters)
    assert mine == theirs
    assert len(mine[dg.AssetKey("extracted")][1]) == 12


def _materialization(run_id: str, i: int) -> EventLogEntry:
    event = dg.AssetMaterialization(asset_key="notes", partition=f"p{i}", tags={"dagster/data_version": f"v{i}"})
    return EventLogEntry(
        error_info=None, level="INFO", user_message="", run_id=run_id, timestamp=time.time() + i,
        dagster_event=DagsterEvent(DagsterEventType.ASSET_MATERIALIZATION.value, "ingest",
                                   event_specific_data=StepMaterializationData(event)),
    )


def test_each_event_of_a_batch_keeps_its_own_tags_and_the_last_is_the_latest(tmp_path):
    batched = BatchedSqliteEventLogStorage(base_dir=str(tmp_path / "batched"))
    one_by_one = SqliteEventLogStorage(base_dir=str(tmp_path / "one-by-one"))
    events = [_materialization("run-1", i) for i in range(30)]
    batched.store_event_batch(events)
    for event in events:
        one_by_one.store_event(event)
    key = dg.AssetKey("notes")
    for storage in (batched, one_by_one):
        records = storage.fetch_materializations(key, limit=100).records
        assert sorted(r.partition_key for r in records) == sorted(f"p{i}" for i in range(30))
        for record in records:
            assert storage.get_event_tags_for_asset(key, filter_event_id=record.storage_id) == [
                {"dagster/data_version": f"v{record.partition_key[1:]}"}]
        (entry,) = storage.get_asset_records([key])
        assert entry.asset_entry.last_materialization.dagster_event.partition == "p29"
    assert len(list(Path(tmp_path / "batched").glob("run-1.db"))) == 1  # the run's own shard has them too
    assert len(batched.get_logs_for_run("run-1")) == 30
