"""The bank's readers-writer lock: bounded waits, and a waiting writer is not starved by readers."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from smb_core.locking import BankBusyError, BankLock


def test_a_writer_shuts_readers_out_and_a_reader_waits_only_as_long_as_its_timeout(tmp_path: Path):
    path = tmp_path / ".lock"
    with BankLock(path).exclusive():
        started = time.monotonic()
        with pytest.raises(BankBusyError, match="no read lock after"), BankLock(path, timeout=0.3).shared():
            pass
        assert time.monotonic() - started < 2
    with BankLock(path, timeout=0.3).shared(), BankLock(path, timeout=0.3).shared():  # readers share it
        pass


def test_a_waiting_writer_gets_in_although_readers_sessions_overlap_without_a_gap(tmp_path: Path):
    path, stop, sessions = tmp_path / ".lock", threading.Event(), []

    def read_in_a_loop(lock: BankLock) -> None:  # an agent asking question after question
        while not stop.is_set():
            with lock.shared():
                sessions.append(1)
                time.sleep(0.02)

    held = BankLock(path)
    with held.shared():  # the two loops start overlapped: at every moment one of them holds the lock
        readers = [threading.Thread(target=read_in_a_loop, args=(BankLock(path, timeout=10),)) for _ in range(2)]
        for reader in readers:
            reader.start()
        time.sleep(0.1)
    try:
        with BankLock(path, timeout=3).exclusive():  # flock alone: BankBusyError after 3 s
            during = len(sessions)
            time.sleep(0.1)
            assert len(sessions) == during  # no reader inside while the writer is
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert len(sessions) > during  # and the readers went on afterwards
