"""A readers-writer lock between processes, on one lock file, with bounded waiting.

DuckDB allows one read-write process per file and Chroma's embedded client is not safe across
processes, so every bank operation holds this lock for its duration: many readers at once, or one
writer. Operations are short (a batch, a query), so waiting is bounded and `BankBusyError` says so.

Writers go first. flock alone lets readers whose sessions overlap (an agent asking question after
question, two agents at once) keep the shared lock held for ever: at 50,000 documents an evolution
cycle's writer gave up after 60 s beside a loop of recalls. So a writer takes a second lock file, the
queue, before it waits for the readers to leave, and a reader passes through the queue before it takes
its shared lock: once a writer waits, new readers wait behind it.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path


class BankBusyError(TimeoutError):
    """The bank stayed locked by another process for longer than the configured timeout."""


class BankLock:
    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._mode: int | None = None
        self._depth = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._hold(fcntl.LOCK_SH):
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._hold(fcntl.LOCK_EX):
            yield

    @contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        if self._depth:  # re-entrant inside one process; a shared hold cannot be upgraded
            if mode == fcntl.LOCK_EX and self._mode != fcntl.LOCK_EX:
                raise RuntimeError("cannot take the bank's write lock while holding its read lock")
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._acquire(mode)
        try:
            yield
        finally:
            self._release()

    @property
    def queue_path(self) -> Path:
        return self.path.with_name(self.path.name + ".queue")

    def _acquire(self, mode: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.timeout
        queue = os.open(self.queue_path, os.O_RDWR | os.O_CREAT, 0o644)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._wait(queue, fcntl.LOCK_EX, deadline, mode)  # a waiting writer holds it: readers queue behind
            self._wait(fd, mode, deadline, mode)
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.close(queue)  # (closing releases it)
        self._fd, self._mode, self._depth = fd, mode, 1

    def _wait(self, fd: int, lock: int, deadline: float, mode: int) -> None:
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, lock | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    kind = "write" if mode == fcntl.LOCK_EX else "read"
                    raise BankBusyError(
                        f"memory bank {self.path.parent} is busy: no {kind} lock after {self.timeout:.0f}s "
                        f"(another process is writing; raise SMB_LOCK_TIMEOUT_SECONDS to wait longer)"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    def _release(self) -> None:
        self._depth = 0
        fd, self._fd, self._mode = self._fd, None, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def held_for_writing(lock_file: Path) -> bool:
    """Whether some process holds `lock_file` exclusively (a `BankLock` writer), without waiting or
    taking it: a reader that keeps the bank's DuckDB file open lets go when this says so."""
    try:
        fd = os.open(lock_file, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
