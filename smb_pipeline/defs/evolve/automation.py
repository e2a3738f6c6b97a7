"""When cycles run: on a schedule, and early once enough new documents have been ingested."""

import dagster as dg

from smb_core.evolve.cycle import next_cycle_key, pending_source_count
from smb_core.settings import get_settings
from smb_pipeline.defs.evolve.assets import evolve_job, layers_to_run
from smb_pipeline.defs.partitions import cycles
from smb_pipeline.defs.resources import MemoryBankResource


def interval_cron(seconds: int) -> str:
    """A cron string for an interval given in seconds (whole minutes, up to a day)."""
    minutes = max(1, seconds // 60)
    if minutes < 60:
        return f"*/{minutes} * * * *"
    hours = minutes // 60
    if hours < 24:
        return "0 * * * *" if hours == 1 else f"0 */{hours} * * *"
    return "0 0 * * *"


def _start_cycle(instance: dg.DagsterInstance, bank: MemoryBankResource, reason: str) -> dg.RunRequest | None:
    running = instance.get_run_records(dg.RunsFilter(job_name=evolve_job.name, statuses=[
        dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]), limit=1)
    if running:
        return None  # never two cycles at once
    memory = bank.open()
    key = next_cycle_key(memory)
    if not instance.has_dynamic_partition(cycles.name, key):
        instance.add_dynamic_partitions(cycles.name, [key])
    return dg.RunRequest(run_key=None, partition_key=key, asset_selection=layers_to_run(memory, key),
                         tags={"smb/trigger": reason})


@dg.schedule(job=evolve_job, cron_schedule=interval_cron(get_settings().evolution_interval_seconds),
             default_status=dg.DefaultScheduleStatus.RUNNING)
def evolution_schedule(context: dg.ScheduleEvaluationContext, bank: MemoryBankResource):
    """Every SMB_EVOLUTION_INTERVAL_SECONDS: one cycle, if nothing else is evolving the bank."""
    request = _start_cycle(context.instance, bank, "schedule")
    return request if request is not None else dg.SkipReason("a cycle is already running")


@dg.sensor(job=evolve_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def new_documents_sensor(context: dg.SensorEvaluationContext, bank: MemoryBankResource):
    """Starts a cycle early once SMB_EVOLUTION_MIN_NEW_DOCS documents await one."""
    pending = pending_source_count(bank.open())
    needed = bank.settings().evolution_min_new_docs
    if pending < needed:
        return dg.SkipReason(f"{pending} new documents, waiting for {needed}")
    request = _start_cycle(context.instance, bank, f"{pending} new documents")
    return request if request is not None else dg.SkipReason("a cycle is already running")
