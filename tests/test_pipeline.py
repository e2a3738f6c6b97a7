"""The Dagster code location on a real (temporary) instance: definitions, the ingest job over a partition
range, rejections as observations, asset checks, and the corpus sensor."""

from __future__ import annotations

import json
import time
import os
from pathlib import Path

import dagster as dg
import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.ingest import files_to_ingest, get_extractor
from smb_core.settings import Settings
from smb_pipeline.definitions import defs
from smb_pipeline.defs.ingest.sensors import kbmd_sensor, range_tags
from smb_pipeline.defs.partitions import documents
from smb_pipeline.defs.resources import MemoryBankResource
from smb_pipeline.runner import run_ingest
from tests.conftest import write_doc

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"

DOCS = {
    "aurora.md": "# The Aurora Index\n\nTomas Varga designed the Aurora index in Berlin in 2019.\n"
                 "The Aurora index does not support online updates.\n",
    "people/mara okafor.md": "---\ntags: [people]\n---\n\n# Mara Okafor\n\nMara Okafor founded Lumen Labs in "
                             "Lisbon in 2017. She hired Tomas Varga.\n",
    "zeta.md": "# Zeta\n\nPriya Raman wrote a paper about vector indexes with Tomas Varga.\n",
}


@pytest.fixture
def instance():
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def corpus(settings: Settings) -> Path:
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    (settings.kbmd_dir / "empty.md").write_bytes(b"")
    return settings.kbmd_dir


def _resource(settings: Settings) -> MemoryBankResource:
    return MemoryBankResource(bank_dir=str(settings.memory_bank_dir), kbmd_dir=str(settings.kbmd_dir))


def _run(settings: Settings, instance, first: str, last: str) -> dg.ExecuteInProcessResult:
    run_config = {
        "resources": {"bank": {"config": {"bank_dir": str(settings.memory_bank_dir),
                                          "kbmd_dir": str(settings.kbmd_dir)}}},
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
    }
    return defs().resolve_job_def("ingest").execute_in_process(
        instance=instance, run_config=run_config, tags=range_tags(first, last), raise_on_error=False)


def _add_partitions(instance, folder: Path) -> list[str]:
    keys = [f.partition_key for f in scan(folder)]
    instance.add_dynamic_partitions(documents.name, keys)
    return keys


def _failures(result: dg.ExecuteInProcessResult) -> list[dg.DagsterEvent]:
    return [e for e in result.all_events if e.is_step_failure]


# ---- definitions ------------------------------------------------------------------------------


def test_definitions_load_with_assets_sensor_checks_and_job():
    definitions = defs()
    dg.Definitions.validate_loadable(definitions)
    graph = definitions.resolve_asset_graph()
    source, extracted = dg.AssetKey("source"), dg.AssetKey("extracted")
    assert {source, extracted} <= graph.get_all_asset_keys()
    assert {(k.asset_key.path[0], k.name) for k in graph.asset_check_keys if k.asset_key in (source, extracted)} == {
        ("source", "layer0_matches_sha256"),
        ("extracted", "layer1_in_all_four_stores"),
        ("extracted", "layer1_front_matter_valid"),
    }
    assert graph.get(extracted).parent_keys == {source}
    assert graph.get(source).partitions_def == documents == graph.get(extracted).partitions_def
    sensor = definitions.resolve_sensor_def("kbmd_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == "ingest"
    job = definitions.resolve_job_def("ingest")
    assert job.partitions_def == documents
    assert set(job.asset_layer.executable_asset_keys) == {source, extracted}
    assert {k.name for k in job.asset_layer.asset_graph.asset_check_keys} >= {
        "layer0_matches_sha256", "layer1_in_all_four_stores", "layer1_front_matter_valid"}


# ---- the ingest job ---------------------------------------------------------------------------


@pytest.mark.slow
def test_ingest_job_over_a_partition_range_stores_good_docs_and_rejects_the_bad_one(settings, corpus, instance):
    tick, _ = _tick(settings, instance, None)  # the sensor adds the partitions and asks for one range run
    _apply(instance, tick)
    keys = list(instance.get_dynamic_partitions(documents.name))
    assert len(keys) == 4
    bad_key = next(f.partition_key for f in scan(corpus) if f.relative == "empty.md")
    (request,) = tick.run_requests
    result = _run(settings, instance, request.tags[RANGE_START], request.tags[RANGE_END])
    assert result.success

    # Dagster: every partition of the range materialized once per asset, the bad one observed as rejected
    for asset in ("source", "extracted"):
        assert sorted(m.partition for m in result.asset_materializations_for_node(asset)) == sorted(keys)
    (observation,) = result.asset_observations_for_node("source")
    assert observation.partition == bad_key
    assert observation.metadata["rejected"].value == "file is empty"
    assert observation.metadata["path"].value == "empty.md"
    meta = result.asset_materializations_for_node("source")[0].metadata
    assert (meta["documents"].value, meta["status_new"].value, meta["status_rejected"].value) == (4, 3, 1)

    # the asset checks ran on this run's objects and passed
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(evaluations) == {"layer0_matches_sha256", "layer1_in_all_four_stores", "layer1_front_matter_valid"}
    assert all(e.passed for e in evaluations.values())
    assert evaluations["layer0_matches_sha256"].metadata["checked"].value == 3
    checked = evaluations["layer1_in_all_four_stores"].metadata["checked"].value

    # the bank: good docs in all four stores, the bad one only as a rejection with its reason
    bank = Bank(settings=settings)
    with bank.reading() as db:
        assert sorted(d.path for d in db.sources()) == sorted(DOCS)
        assert db.sql("SELECT partition_key, path, reason, run_id FROM rejections") == [
            (bad_key, "empty.md", "file is empty", result.run_id)]
        per_source = dict(db.sql("SELECT source_ids[1], count(*) FROM objects GROUP BY 1"))
        run_objects = db.sql("SELECT count(*) FROM objects WHERE run_id = ?", [result.run_id])[0][0]
        entities = {r[0] for r in db.sql("SELECT title FROM objects WHERE type = 'entity'")}
    assert len(per_source) == 3 and all(n > 0 for n in per_source.values())
    assert checked == run_objects == sum(per_source.values())
    assert {"Tomas Varga", "Mara Okafor", "Lisbon", "Priya Raman"} <= entities
    status = bank.status()
    assert status["consistent"] is True
    assert status["documents"] == 3 and status["rejected"] == 1
    assert status["stores"]["markdown"] == status["stores"]["duckdb"] == run_objects
    assert status["stores"]["chroma"] == status["stores"]["texts"] < run_objects

    # the same range again: nothing new, nothing duplicated
    again = _run(settings, instance, keys[0], keys[-1])
    assert again.success, [e.step_failure_data.error.to_string() for e in _failures(again)]
    meta = again.asset_materializations_for_node("source")[0].metadata
    assert (meta["status_unchanged"].value, meta["status_rejected"].value) == (3, 1)
    assert again.asset_materializations_for_node("extracted")[0].metadata["already_extracted"].value == 3
    assert all(e.passed for e in again.get_asset_check_evaluations())
    assert Bank(settings=settings).status()["stores"] == status["stores"]


def test_a_run_where_every_document_is_bad_fails_with_the_reasons(settings, instance):
    (settings.kbmd_dir / "empty.md").write_bytes(b"")
    (settings.kbmd_dir / "latin.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    keys = _add_partitions(instance, settings.kbmd_dir)
    result = _run(settings, instance, keys[0], keys[-1])
    assert not result.success
    (failure,) = _failures(result)
    assert failure.step_key == "source"
    message = failure.step_failure_data.error.message
    assert "every document in this run was rejected" in message
    assert "empty.md: file is empty" in message and "latin.md: not valid UTF-8" in message
    rejected = failure.step_failure_data.user_failure_data.metadata["rejected"].value
    assert rejected == {"empty.md": "file is empty", "latin.md": "not valid UTF-8 (byte 5: b'\\xe9')"}
    # each rejection is still an observation on its partition, and nothing downstream ran
    observed = {o.partition: o.metadata["rejected"].value for o in result.asset_observations_for_node("source")}
    assert observed == {f.partition_key: rejected[f.relative] for f in scan(settings.kbmd_dir)}
    assert result.asset_materializations_for_node("extracted") == []
    with Bank(settings=settings).reading() as db:
        assert db.sources() == []
        assert sorted(r[0] for r in db.sql("SELECT path FROM rejections")) == ["empty.md", "latin.md"]


def test_a_tampered_layer_zero_copy_fails_the_blocking_check_and_stops_extraction(settings, instance):
    write_doc(settings.kbmd_dir, "a.md", DOCS["aurora.md"])
    keys = _add_partitions(instance, settings.kbmd_dir)
    bank = Bank(settings=settings)
    from smb_core.ingest import ingest_sources

    ingest_sources(bank, scan(settings.kbmd_dir), settings.kbmd_dir)  # layer 0 only, outside Dagster
    (copy,) = (settings.memory_bank_dir / "layer-0" / "source").iterdir()
    copy.write_text(copy.read_text().replace("Berlin", "Paris"))
    result = _run(settings, instance, keys[0], keys[-1])
    assert not result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == "layer0_matches_sha256" and evaluation.passed is False
    assert evaluation.metadata["problems"].value == 1
    assert "a.md v1" in evaluation.metadata["details"].value
    assert result.asset_materializations_for_node("extracted") == []
    with bank.reading() as db:
        assert db.count_by_type() == {}


# ---- the sensor -------------------------------------------------------------------------------


def _tick(settings: Settings, instance, cursor: str | None):
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"bank": _resource(settings)})
    result = kbmd_sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result, context.cursor


def _apply(instance, result: dg.SensorResult) -> None:
    """What the sensor daemon does with the tick's dynamic partition requests."""
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def _touch(path: Path, after_ns: int) -> None:
    """Modify a file now (its change time passes the watermark), then let the clock move on."""
    os.utime(path, None)
    assert max(path.stat().st_mtime_ns, path.stat().st_ctime_ns) > after_ns
    time.sleep(0.05)


def test_sensor_adds_partitions_and_requests_ranges_then_only_changes(settings, instance):
    for name in ("a.md", "b.md", "c.md", "d.md"):
        write_doc(settings.kbmd_dir, name, f"# {name}\n\ntext\n")
    files = scan(settings.kbmd_dir)
    keys = [f.partition_key for f in files]
    time.sleep(0.05)  # the files are older than the scan by more than the clock's granularity

    result, cursor = _tick(settings, instance, None)  # first tick: everything is new
    (add,) = result.dynamic_partitions_requests
    assert (add.partitions_def_name, list(add.partition_keys)) == ("documents", keys)
    (request,) = result.run_requests
    assert (request.tags[RANGE_START], request.tags[RANGE_END]) == (keys[0], keys[-1])
    assert json.loads(cursor) == {"changed_ns": max(f.changed_ns for f in files)}
    _apply(instance, result)
    assert list(instance.get_dynamic_partitions("documents")) == keys

    result, next_cursor = _tick(settings, instance, cursor)  # nothing changed: nothing requested
    assert result.run_requests == [] and result.dynamic_partitions_requests == []
    assert next_cursor == cursor

    watermark = json.loads(cursor)["changed_ns"]
    write_doc(settings.kbmd_dir, "b.md", "# b\n\nchanged\n")
    _touch(settings.kbmd_dir / "b.md", watermark)
    _touch(settings.kbmd_dir / "d.md", watermark)
    result, cursor = _tick(settings, instance, cursor)  # modified files: one range per contiguous run
    assert result.dynamic_partitions_requests == []
    assert [(r.tags[RANGE_START], r.tags[RANGE_END]) for r in result.run_requests] == [
        (keys[1], keys[1]), (keys[3], keys[3])]
    assert len({r.run_key for r in result.run_requests}) == 2
    assert json.loads(cursor)["changed_ns"] > watermark

    write_doc(settings.kbmd_dir, "new/e.md", "# e\n")  # a new file: a new partition and a run for it
    time.sleep(0.05)
    new_key = scan(settings.kbmd_dir)[-1].partition_key
    result, cursor = _tick(settings, instance, cursor)
    assert [list(r.partition_keys) for r in result.dynamic_partitions_requests] == [[new_key]]
    assert [(r.tags[RANGE_START], r.tags[RANGE_END]) for r in result.run_requests] == [(new_key, new_key)]
    _apply(instance, result)

    result, _ = _tick(settings, instance, cursor)
    assert result.run_requests == [] and result.dynamic_partitions_requests == []


@pytest.mark.slow
def test_smb_ingest_runs_only_over_files_not_wholly_in_the_bank(settings, corpus, instance):
    files = scan(corpus)
    keys = {f.relative: f.partition_key for f in files}

    def ranges(ok: bool = True) -> list[tuple[str, str]]:
        report = run_ingest(settings, instance=instance)
        assert report.success is ok, report.failures
        runs = [instance.get_run_by_id(run_id) for run_id in report.run_ids]
        return [(run.tags[RANGE_START], run.tags[RANGE_END]) for run in runs]

    assert ranges() == [(files[0].partition_key, files[-1].partition_key)]  # everything is new
    empty = keys["empty.md"]
    assert ranges() == []  # a rejected file that has not changed would be rejected again: not tried
    assert run_ingest(settings, instance=instance).still_rejected == ["empty.md"]
    (corpus / "empty.md").write_text("  \n")
    assert ranges(ok=False) == [(empty, empty)]  # changed, so tried again (and rejected again); the stored are not
    (corpus / "empty.md").unlink()
    assert ranges() == []

    aurora = keys["aurora.md"]
    write_doc(corpus, "aurora.md", DOCS["aurora.md"] + "It was rewritten in 2021.\n")
    assert ranges() == [(aurora, aurora)]  # a changed file: its new version
    bank = Bank(settings=settings)
    with bank.reading() as db:
        assert db.sql("SELECT status FROM sources WHERE partition_key = ? ORDER BY version", [aurora]) == [
            ("superseded",), ("active",)]
    assert ranges() == []

    # what a run that died half-way leaves: a document without its extraction, a superseded version's
    # object still active
    zeta = keys["zeta.md"]
    with bank.writing() as db:
        db.sql("DELETE FROM extractions WHERE source_id IN (SELECT id FROM sources WHERE partition_key = ?)", [zeta])
        db.sql("UPDATE objects SET status = 'active' WHERE id = (SELECT min(o.id) FROM objects o JOIN sources s "
               "ON o.source_ids[1] = s.id WHERE s.partition_key = ? AND s.status = 'superseded')", [aurora])
    version = get_extractor(settings).version
    assert sorted(f.partition_key for f in files_to_ingest(bank, scan(corpus), version)[0]) == sorted([aurora, zeta])
    assert sorted(f.partition_key for f in files_to_ingest(bank, scan(corpus), "another-extractor")[0]) == sorted(
        keys[name] for name in DOCS)  # a new extractor version extracts everything again
    ranges()
    assert files_to_ingest(bank, scan(corpus), version) == ([], [])
