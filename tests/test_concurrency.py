"""A Dagster ingest in one process while an agent recalls and writes in another: no errors, nothing lost."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smb_core.query import MemoryBank
from tests.conftest import REPO, write_doc


def _corpus(folder: Path, n: int) -> None:
    for i in range(n):
        write_doc(folder, f"station-{i:02d}.md",
                  f"# Station {i}\n\nDr. Ada Quill founded observatory station {i} in Tromsø in {1990 + i}. "
                  f"The station measures aurora activity with telescope model T{i}.\n\n"
                  f"Station {i} was expanded by the Arctic Science Council in {2000 + i}.\n")


@pytest.mark.slow
def test_pipeline_ingest_and_agent_loop_run_concurrently(tmp_path: Path) -> None:
    bank_dir, corpus = tmp_path / "bank", tmp_path / "kbmd"
    _corpus(corpus, 30)
    MemoryBank.open(bank_dir, read_only=False)  # create the bank so the agent can start at once
    out = tmp_path / "agent.json"
    env_python = sys.executable
    ingest = subprocess.Popen([env_python, "-m", "tests.workers.ingest_once", str(bank_dir), str(corpus)],
                              cwd=REPO, stderr=subprocess.PIPE, text=True)
    agent = subprocess.Popen([env_python, "-m", "tests.workers.agent_loop", str(bank_dir), "25", str(out)],
                             cwd=REPO, stderr=subprocess.PIPE, text=True)
    _, ingest_err = ingest.communicate(timeout=600)
    ingest_finished = time.time()
    _, agent_err = agent.communicate(timeout=600)
    assert ingest.returncode == 0, ingest_err[-3000:]
    assert agent.returncode == 0, agent_err[-3000:]
    result = json.loads(out.read_text())
    assert result["errors"] == []
    assert result["recalls"] == 25
    assert result["started"] < ingest_finished, "the agent must run while the ingest is still running"

    with MemoryBank.open(bank_dir) as bank:
        for object_id in result["created"]:
            assert bank.get(object_id) is not None, f"agent write {object_id} was lost"
        assert len(result["created"]) == 25
        note_ids = {s.id for s in bank.sources() if s.provenance == "agent:looper"}
        assert note_ids == set(result["notes"]) and len(note_ids) == 5
        corpus_docs = [s for s in bank.sources() if s.provenance == "corpus"]
        assert len(corpus_docs) == 30
        first_ingested = min(s.ingested_at for s in corpus_docs).timestamp()
        assert first_ingested < result["finished"], "the ingest must write while the agent is still running"
        status = bank._bank.status()
    assert status["consistent"], status


@pytest.mark.slow
def test_a_run_whose_process_was_killed_does_not_hold_the_bank(tmp_path: Path, sample_corpus: Path) -> None:
    """`smb ingest` killed outright (SIGKILL) inside its step keeps the bank's pool slot: the next run
    fails the dead run, frees the slot and ingests the rest (before, it waited for the slot forever)."""
    import dagster as dg

    from smb_core.corpus import scan
    from smb_pipeline.runner import instance_for

    bank_dir = tmp_path / "bank"
    instance_for(bank_dir).dispose()  # its storage made before two processes open it
    smb = [sys.executable, "-m", "smb_core.cli", "ingest", "--bank", str(bank_dir), "--source", str(sample_corpus)]
    first = subprocess.Popen(smb, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held_by, deadline = [], time.monotonic() + 300
    while not held_by and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
        with instance_for(bank_dir) as instance:
            held_by = [s.run_id for s in instance.event_log_storage.get_concurrency_info("smb_bank").claimed_slots]
    first.kill()
    first.wait()
    assert held_by, "the first ingest never took the bank's pool slot"

    second = subprocess.run(smb, cwd=REPO, capture_output=True, text=True, timeout=180)  # it used to wait forever
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"dagster run {held_by[0]} had stopped with its process" in second.stderr
    with instance_for(bank_dir) as instance:
        assert instance.get_run_by_id(held_by[0]).status == dg.DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("smb_bank").claimed_slots == []
    with MemoryBank.open(bank_dir) as bank:
        status = bank._bank.status()
    assert status["consistent"] and status["documents"] == len(scan(sample_corpus)), status


def test_a_live_process_counts_as_a_runs_process_only_if_it_started_before_the_run() -> None:
    import os

    from smb_pipeline.runner import process_alive_since

    assert process_alive_since(os.getpid(), time.time())  # this process, for a run made now
    assert not process_alive_since(os.getpid(), 0.0)  # a run made before it started: a reused pid
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not process_alive_since(dead.pid, time.time())
