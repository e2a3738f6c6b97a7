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
