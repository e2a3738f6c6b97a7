"""Partitions: one per source document (layers 0-1)."""

import dagster as dg

#: One key per corpus file, derived from its relative path (`smb_core.corpus.partition_key`):
#: stable for a path, readable, and free of commas, spaces and slashes.
documents = dg.DynamicPartitionsDefinition(name="documents")
