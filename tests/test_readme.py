"""The README's promises, run as a newcomer runs them: its set-up command on the shipped sample, then
its agent example on the bank that command made."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smb_core.cli import main as smb
from smb_core.model import Claim
from smb_core.query import MemoryBank

README = Path(__file__).resolve().parent.parent / "README.md"


@pytest.mark.slow
def test_the_agent_example_runs_on_the_sample_bank_and_evolve_reports_failed_checks(
        sample_corpus: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    bank = tmp_path / "memory-bank"
    assert smb(["ingest", "--source", str(sample_corpus), "--bank", str(bank)]) == 0
    assert smb(["evolve", "--bank", str(bank)]) == 0
    assert "cycle cycle-00001: done" in capsys.readouterr().out

    example = re.search(r"## How an agent reads.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert " from " in printed and " lines " in printed  # hits read from a document say where
    with MemoryBank.open(bank) as reader:
        assert any(s.provenance == "agent:planner" for s in reader.sources())

    # A check of ERROR severity that fails does not stop the cycle, but `smb evolve` must not say "done".
    with MemoryBank.open(bank, read_only=False) as writer:
        source = writer.sources()[0].id
        writer._bank.write([Claim(id="clm-dangling", title="x", statement="x", derived_from=["clm-gone"],
                                  source_ids=[source])])  # what only a bug below the agent API could write
    assert smb(["evolve", "--bank", str(bank)]) == 1
    out, err = capsys.readouterr()
    assert "cycle cycle-00002: done, but checks failed" in out
    assert "error: check reflective/no_dangling_ids failed: 1 problem, the first: derived_from of clm-dangling" in err
