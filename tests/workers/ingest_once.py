"""A pipeline process for the concurrency test: one `smb ingest` style Dagster run.

Usage: python -m tests.workers.ingest_once BANK CORPUS
"""

import sys

from smb_core.settings import Settings
from smb_pipeline.runner import run_ingest

if __name__ == "__main__":
    report = run_ingest(Settings(memory_bank_dir=sys.argv[1], kbmd_dir=sys.argv[2]))
    if not report.success:
        print("\n".join(report.failures), file=sys.stderr)
        sys.exit(1)
