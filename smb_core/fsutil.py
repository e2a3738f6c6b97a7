"""Atomic file writes: write a temp file in the same folder, then rename it over the target.

A rename is atomic, so readers and crashed writers never leave a torn file. `durable=True` also
fsyncs (for small files whose loss matters, like logs); object files skip it because DuckDB, which
is written last and fsyncs its own log, is the commit record and a re-run rewrites anything missing.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

#: Temp names unique within the process (with its pid, across processes): cheaper than mkstemp's
#: random names, which were a third of the cost of writing a small object file.
_TEMP_NUMBERS = itertools.count()
#: Folders known to exist, so that writing thousands of files into one folder does not stat it each time.
_FOLDERS: set[Path] = set()


def atomic_write_bytes(path: Path, data: bytes, durable: bool = False) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never a torn one."""
    if path.parent not in _FOLDERS:
        path.parent.mkdir(parents=True, exist_ok=True)
        _FOLDERS.add(path.parent)
    tmp = f"{path.parent}/.{path.name}.{os.getpid()}-{next(_TEMP_NUMBERS)}.tmp"
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileNotFoundError:  # the folder was removed since: make it again
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, durable: bool = False) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)
