"""The scale benchmark goes on after a stop: a 50,000-document run takes longer than one sitting."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import smb_pipeline.runner as runner
from smb_core.bank import Bank
from smb_core.settings import Settings

BENCH = Path(__file__).resolve().parent.parent / "bench"

PASSAGES = [
    {"title": f"Harbour {name}", "text": f"Harbour {name} is a port town in Norland. It was founded in {1700 + i * 13} "
                                         f"by the merchant Ada {name}. The town hall of Harbour {name} opened in "
                                         f"{1850 + i * 7}."}
    for i, name in enumerate(["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Gorse", "Hazel", "Ivy",
                                  "Juniper"])
]


class Stopped(BaseException):
    """The run stopping (killed, interrupted) outside the benchmark's control."""


@pytest.fixture(scope="module")
def scale():
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH / "scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_stopped_scale_run_goes_on_from_its_last_finished_slice(scale, tmp_path: Path, monkeypatch):
    settings = Settings(memory_bank_dir=tmp_path / "bank-10", kbmd_dir=tmp_path / "kbmd-10")
    progress = tmp_path / "progress-10.json"
    real_ingest, calls, stop_at = runner.run_ingest, [], [4]

    def ingest_and_maybe_stop(*args, **kwargs):
        calls.append(1)
        report = real_ingest(*args, **kwargs)
        if len(calls) in stop_at:
            raise Stopped  # as if the run were stopped after ingesting, before recording it
        return report

    monkeypatch.setattr(runner, "run_ingest", ingest_and_maybe_stop)
    with pytest.raises(Stopped):
        scale.build(10, settings, PASSAGES, "run_ingest", progress)
    stopped = json.loads(progress.read_text())
    assert [s["slice"] for s in stopped["slices"]] == [0, 1, 2] and stopped["started"] == 3
    assert "cycle" not in stopped
    stopped_rss = json.loads((tmp_path / "rss-10.json").read_text())["rss_mb"]  # sampled while it ran
    assert stopped_rss > 0

    calls.clear()
    stop_at.clear()
    row = scale.build(10, settings, PASSAGES, "run_ingest", progress)
    assert len(calls) == 7  # slices 4-10 only
    assert [s["slice"] for s in row["slices"]] == list(range(10))
    assert [s["slice"] for s in row["slices"] if s["resumed"]] == [3]
    assert row["resumed"] == [4] and row["documents"] == 10 and row["evolve_ok"] and row["consistent"]
    assert row["build_rss_mb"] >= stopped_rss
    samples = [line.split() for line in (tmp_path / "rss-10.log").read_text().splitlines()]
    assert len(samples) >= 2 and all(float(mb) > 0 for _, mb in samples)  # the stopped run's and this one's
    assert row["first_tenth_docs_per_s"] and row["last_tenth_docs_per_s"]  # slice 4 was resumed, not 1 or 10
    assert len(Bank(settings=settings).status()["types"]) > 3

    calls.clear()
    again = scale.build(10, settings, PASSAGES, "run_ingest", progress)  # everything recorded: nothing is redone
    assert not calls and again["evolve_s"] == row["evolve_s"]


def test_a_result_whose_cycle_failed_is_not_reused(scale, tmp_path: Path):
    saved = tmp_path / "result-10.json"
    assert scale.finished_result(saved) is None
    saved.write_text(json.dumps({"size": 10, "evolve_ok": False, "evolve_failures": ["BankBusyError"]}))
    assert scale.finished_result(saved) is None  # --reuse goes on from progress-10.json: the cycle runs again
    saved.write_text(json.dumps({"size": 10, "evolve_ok": True}))
    assert scale.finished_result(saved) == {"size": 10, "evolve_ok": True}


def _returns(x: int) -> dict:
    return {"twice": 2 * x}


def _raises() -> None:
    raise ValueError("bad input in the child")


def _dies() -> None:
    import os

    os._exit(3)  # as the OOM killer would end it: no exception, no result


def test_a_benchmark_step_in_a_child_returns_raises_or_reports_its_death(scale):
    in_child = sys.modules["common"].in_child  # bench/common.py, as the benchmarks import it
    assert in_child(_returns, 21) == {"twice": 42}
    with pytest.raises(ValueError, match="bad input in the child"):
        in_child(_raises)
    with pytest.raises(RuntimeError, match="exit code 3"):  # it used to wait for the result forever
        in_child(_dies)
