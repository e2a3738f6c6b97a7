"""Dagster definitions for the memory bank: thin assets, sensors and checks over `smb_core`."""
