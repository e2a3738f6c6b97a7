"""The smb code location with Dagster's Celery executor (dagster-celery): every step of a run (`source`,
`extracted`, the checks, the evolution layers) becomes a Celery task that a `dagster-celery worker`
on any machine picks up. Used by `dagster dev -f`, `dagster job execute -f` or a workspace entry.

The broker and result backend come from CELERY_BROKER_URL and CELERY_RESULT_BACKEND, here and in
deploy/celery-worker.yaml, so runs that sensors and schedules launch need no run config."""

import dagster as dg
from dagster_celery import celery_executor

from smb_pipeline.definitions import defs as smb_defs

executor = celery_executor.configured(
    {"broker": {"env": "CELERY_BROKER_URL"}, "backend": {"env": "CELERY_RESULT_BACKEND"}}, name="smb_celery"
)


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions.merge(smb_defs(), dg.Definitions(executor=executor))
