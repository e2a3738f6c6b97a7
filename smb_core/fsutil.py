"""Atomic file writes: write a temp file in the same folder, then rename it over the target.

A rename is atomic, so readers and crashed writers never leave a torn file. `durable=True` also
fsyncs (for small files whose loss matters, like logs); object files skip it because DuckDB, which
is written last and fsyncs its own log, is the commit record and a re-run rewrites anything missing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, durable: bool = False) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, durable: bool = False) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)
