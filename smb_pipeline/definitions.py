"""The code location: everything under `smb_pipeline/defs/` is discovered by Dagster's `dg` loader."""

from pathlib import Path

import dagster as dg

import smb_pipeline.defs


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_defs(defs_root=smb_pipeline.defs, project_root=Path(__file__).resolve().parent.parent)
