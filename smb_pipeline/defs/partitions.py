"""Partitions: one per source document (layers 0-1)."""

import dagster as dg

#: One key per corpus file, derived from its relative path (`smb_core.corpus.partition_key`):
#: stable for a path, readable, and free of commas, spaces and slashes.
documents = dg.DynamicPartitionsDefinition(name="documents")

#: One key per evolution cycle (`cycle-00001`, ...). Dynamic rather than time-based because cycles
#: start on a schedule *or* when enough new documents arrived; each key is added when its cycle is
#: started, so the UI lists exactly the cycles that ran, each with its own metadata. What a cycle
#: consumed is recorded in the bank (`cycle_sources`), so re-materializing a cycle is idempotent.
cycles = dg.DynamicPartitionsDefinition(name="cycles")
