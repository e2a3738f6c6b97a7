"""Runs the pipeline's jobs in-process for the CLI, against a persistent Dagster home inside the bank,
so that runs started from the command line show up in the Dagster UI later (`smb ui`)."""

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from smb_core.corpus import contiguous_ranges, scan
from smb_core.fsutil import atomic_write_text
from smb_core.settings import Settings

#: How the instance config `smb` writes begins. A config that starts so is smb's to keep current
#: (new defaults, a moved bank); delete that first line to keep your own edits.
OURS = "# Written by `smb`"

#: Instance settings `smb` needs in every Dagster home (deploy/dagster-postgres.yaml repeats them).
RUN_LIMITS = """\
telemetry:
  enabled: false
concurrency:
  pools:
    default_limit: 1
  # Ingest and evolution runs carry the tag smb/writer: one at a time, so a cycle never races an ingest.
  # (Under `concurrency: runs:`; Dagster refuses `run_queue:` limits next to a `concurrency:` block.)
  runs:
    tag_concurrency_limits:
      - key: smb/writer
        limit: 1
"""


def instance_yaml(home: Path) -> str:
    """smb's dagster.yaml for a home on local SQLite: the run limits, and the event log that writes a
    range run's per-partition events in batches (smb_pipeline/event_log.py; same files as Dagster's)."""
    events = Path(home).resolve() / "history" / "runs"
    return (f"{OURS}; rewritten when its defaults change or the bank moves (delete this line to keep edits).\n"
            f"{RUN_LIMITS}"
            "event_log_storage:\n"
            "  module: smb_pipeline.event_log\n"
            "  class: BatchedSqliteEventLogStorage\n"
            "  config:\n"
            f"    base_dir: {json.dumps(str(events) + os.sep)}\n")


#: Documents per in-process run; each run is one Dagster run with a partition range.
DOCUMENTS_PER_RUN = 5000


def use_compact_planned_events() -> None:
    """Make partition-range runs cheap to record: one "materialization planned" event per asset
    instead of one per partition, and per-partition materialization events written in batches.
    With SQLite run storage, thousands of single-event writes otherwise take minutes."""
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", "1000")


def dagster_home(bank_dir: Path) -> Path:
    """`$DAGSTER_HOME` when it is set (e.g. an instance shared by several machines on PostgreSQL, see
    deploy/dagster-postgres.yaml), else `<bank>/.dagster`; given smb's instance config if it has none
    (or an outdated one that smb wrote)."""
    home = Path(os.environ.get("DAGSTER_HOME") or Path(bank_dir).resolve() / ".dagster")
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    current, wanted = (config.read_text() if config.exists() else None), instance_yaml(home)
    if current is None or (current.startswith(OURS) and current != wanted):
        atomic_write_text(config, wanted, durable=True)
    return home


def instance_for(bank_dir: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(dagster_home(bank_dir)))


#: Tags of a run that `smb` executes in its own process: which process on which machine, so that a later
#: `smb` can tell that the run died with it.
PID_TAG, HOST_TAG = "smb/pid", "smb/host"
UNFINISHED = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]


def process_tags() -> dict[str, str]:
    return {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def release_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Fail the runs `smb` executed in a process of this machine that no longer exists, and free the
    bank's pool slot they held; returns their ids. Dagster frees a step's slot when the step ends, even
    by an exception or SIGTERM, but a process killed outright (SIGKILL, the OOM killer, a power cut)
    leaves its run STARTED and the slot claimed, and every later run on the bank would wait for it
    forever. A run of another machine, or of a live process, is left alone: it may still be working."""
    host, released = socket.gethostname(), []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=UNFINISHED, tags={HOST_TAG: host})):
        run, pid = record.dagster_run, int(record.dagster_run.tags.get(PID_TAG, "0"))
        if pid and not process_alive_since(pid, record.create_timestamp.timestamp()):
            instance.report_run_failed(run, message=f"its process ({pid} on {host}) ended without finishing it; "
                                                    "a later `smb` run freed the bank for the next runs")
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
            released.append(run.run_id)
    return released


def process_alive_since(pid: int, since: float) -> bool:
    """Whether process `pid` exists and started no later than `since` (Unix time): after a restart of
    the machine the pid may belong to another process, which started after the run was made."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    started = _process_start(pid)
    return started is None or started <= since + 1.0


def _process_start(pid: int) -> float | None:
    """When process `pid` started (Unix time), from /proc on Linux; None where that cannot be read."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


@dataclass
class FailedCheck:
    name: str  # asset/check
    description: str
    error: bool  # ERROR severity: the bank is not as it should be (WARN: worth a look)


@dataclass
class RunReport:
    run_ids: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    documents: int = 0  # corpus files scanned
    released: list[str] = field(default_factory=list)  # runs of dead processes failed first (release_dead_runs)
    failed_checks: list[FailedCheck] = field(default_factory=list)  # the runs' asset checks that did not pass
    still_rejected: list[str] = field(default_factory=list)  # rejected before, unchanged: not tried again

    @property
    def success(self) -> bool:
        return not self.failures

    @property
    def errors_found(self) -> bool:
        """A check of ERROR severity failed: the run itself may have succeeded (only blocking checks
        stop it), yet something in the bank is wrong, and a script calling `smb` must hear of it."""
        return any(check.error for check in self.failed_checks)


def run_ingest(settings: Settings, instance: dg.DagsterInstance | None = None,
               log_level: str = "WARNING") -> RunReport:
    """Add a partition per new corpus file and materialize `source` and `extracted` over the files that
    are not wholly in the bank yet (new, changed, or left unfinished by a run that died)."""
    from smb_core.bank import Bank
    from smb_core.ingest import files_to_ingest, get_extractor
    from smb_pipeline.definitions import defs
    from smb_pipeline.defs.ingest.sensors import range_tags
    from smb_pipeline.defs.partitions import documents

    use_compact_planned_events()
    instance = instance or instance_for(settings.memory_bank_dir)
    files = scan(Path(settings.kbmd_dir))
    existing = list(instance.get_dynamic_partitions(documents.name))
    known = set(existing)
    new_keys = [f.partition_key for f in files if f.partition_key not in known]
    if new_keys:
        instance.add_dynamic_partitions(documents.name, new_keys)
    ordered = [*existing, *new_keys]
    pending, still_rejected = files_to_ingest(Bank(settings=settings), files, get_extractor(settings).version)
    wanted = {f.partition_key for f in pending}
    job = defs().resolve_job_def("ingest")
    run_config = _run_config(settings, log_level)
    report = RunReport(documents=len(files), released=release_dead_runs(instance),
                       still_rejected=[f.relative for f in still_rejected])
    for first, last in contiguous_ranges(ordered, wanted, DOCUMENTS_PER_RUN):
        result = job.execute_in_process(
            instance=instance, run_config=run_config, tags=range_tags(first, last) | process_tags(),
            raise_on_error=False,
        )
        report.run_ids.append(result.run_id)
        report.failed_checks.extend(_failed_checks(result))
        if not result.success:
            report.failures.extend(_failure_messages(result))
    return report


def run_evolve(settings: Settings, instance: dg.DagsterInstance | None = None,
               log_level: str = "WARNING") -> tuple[str, RunReport]:
    """Start the next evolution cycle (or resume one whose run died, at its first layer not done) and
    run it in-process; returns the cycle key and the run."""
    from smb_core.bank import Bank
    from smb_core.evolve.cycle import next_cycle_key
    from smb_pipeline.definitions import defs
    from smb_pipeline.defs.evolve.assets import layers_to_run
    from smb_pipeline.defs.partitions import cycles

    use_compact_planned_events()
    instance = instance or instance_for(settings.memory_bank_dir)
    released = release_dead_runs(instance)
    bank = Bank(settings=settings)
    key = next_cycle_key(bank)
    if not instance.has_dynamic_partition(cycles.name, key):
        instance.add_dynamic_partitions(cycles.name, [key])
    result = defs().resolve_job_def("evolve").execute_in_process(
        instance=instance, partition_key=key, asset_selection=layers_to_run(bank, key),
        run_config=_run_config(settings, log_level), tags=process_tags(), raise_on_error=False,
    )
    report = RunReport(run_ids=[result.run_id], released=released, failed_checks=_failed_checks(result))
    if not result.success:
        report.failures.extend(_failure_messages(result))
    return key, report


def _run_config(settings: Settings, log_level: str) -> dict:
    return {
        "resources": {"bank": {"config": {
            "bank_dir": str(Path(settings.memory_bank_dir).resolve()),
            "kbmd_dir": str(Path(settings.kbmd_dir).resolve()),
        }}},
        "loggers": {"console": {"config": {"log_level": log_level}}},
    }


def _failed_checks(result: dg.ExecuteInProcessResult) -> list[FailedCheck]:
    return [FailedCheck(f"{check.asset_key.to_user_string()}/{check.check_name}", check.description or "failed",
                        check.severity == dg.AssetCheckSeverity.ERROR)
            for check in result.get_asset_check_evaluations() if not check.passed]


def _failure_messages(result: dg.ExecuteInProcessResult) -> list[str]:
    messages = []
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error is not None and error.cause is not None:  # Dagster's wrapper says less than its cause
                error = error.cause
            text = error.message.strip() if error else "failed"
            if error is not None and error.cls_name == "Failure":  # ours, with its reason: not Dagster's class path
                text = text.split(": ", 1)[-1]
            messages.append(f"{event.step_key}: {text}")
    return messages or [f"run {result.run_id} failed"]
