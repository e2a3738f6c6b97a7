"""Dagster's SQLite event log, writing a batch of asset events in one statement per database.

A partition-range run records one materialization per document partition. Dagster hands them to
the storage in batches (`DAGSTER_EVENT_BATCH_SIZE`), but its SQLite storage writes them one by one:
two connections, two commits and an asset-row upsert per event, 15 ms each, which was a fifth of
the time to ingest 600 documents. dagster-postgres writes such a batch at once; this does the same
for SQLite, with the same tables and files, so a Dagster home can switch to it and back freely.
It subclasses Dagster's internal storage classes (dagster is pinned to 1.13.x for that reason);
tests/test_event_log.py checks that a range run reads back exactly as with Dagster's own storage.
"""

from collections.abc import Sequence

from dagster._core.events import DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._serdes import ConfigurableClassData

_BATCHED = {DagsterEventType.ASSET_MATERIALIZATION, DagsterEventType.ASSET_OBSERVATION}


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    """SQLite event log storage that stores batches of materializations/observations of one run at once."""

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value) -> "BatchedSqliteEventLogStorage":
        return cls(inst_data=inst_data, **config_value)

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        if not _one_run_one_kind_of_asset_event(events):
            super().store_event_batch(events)
            return
        insert = self.prepare_insert_event_batch(events)
        with self.run_connection(events[0].run_id) as conn:
            conn.execute(insert)
        with self.index_transaction() as conn:
            rows = conn.execute(insert.returning(SqlEventLogStorageTable.c.id)).fetchall()
            # One INSERT assigns ascending ids in the order of its VALUES; RETURNING's order is unspecified.
            event_ids = sorted(row[0] for row in rows)
            self._store_asset_event_tags(conn, events, event_ids)
            last_by_key = {e.get_dagster_event().asset_key: (e, i) for e, i in zip(events, event_ids)}
            for event, event_id in last_by_key.values():
                self._store_asset_event(conn, event, event_id)


def _one_run_one_kind_of_asset_event(events: Sequence[EventLogEntry]) -> bool:
    """What a range run hands over: several materializations (or observations) of assets, one run.
    One kind only, so the last event per asset is the one its asset row must point at."""
    return (len(events) > 1 and len({e.run_id for e in events}) == 1
            and len({e.dagster_event_type for e in events}) == 1
            and all(e.is_dagster_event and e.dagster_event_type in _BATCHED and e.get_dagster_event().asset_key
                    for e in events))
