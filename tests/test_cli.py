"""The `smb` command line, in-process: ingest through Dagster, then status."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from smb_core.cli import main
from smb_pipeline.runner import instance_for
from tests.conftest import write_doc

TYPES = {"concept", "claim", "entity", "relationship"}
STORES = {"markdown", "duckdb", "chroma", "texts", "graph_nodes", "graph_edges"}


def _smb(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _status(capsys, bank: Path) -> dict:
    code, out, _ = _smb(capsys, "status", "--json", "--bank", str(bank))
    status = json.loads(out)
    assert code == (0 if status["consistent"] else 1)
    return status


@pytest.mark.slow
def test_ingest_then_status_json(tmp_path: Path, capsys):
    corpus, bank = tmp_path / "corpus", tmp_path / "bank"
    write_doc(corpus, "aurora.md", "# The Aurora Index\n\nTomas Varga designed the Aurora index in Berlin in 2019.\n"
                                   "The Aurora index does not support online updates.\n")
    write_doc(corpus, "notes/lumen labs.md", "# Lumen Labs\n\nMara Okafor founded Lumen Labs in Lisbon in 2017. "
                                             "Lumen Labs builds vector databases.\n")
    write_doc(corpus, "priya.md", "# Priya Raman\n\nPriya Raman cited Tomas Varga in a paper about vector indexes.\n")
    (corpus / "empty.md").write_bytes(b"")

    code, out, err = _smb(capsys, "ingest", "--source", str(corpus), "--bank", str(bank))
    assert code == 2  # some files were rejected
    assert f"scanned 4 documents in {corpus}: 3 new versions" in out
    assert "rejected: empty.md: file is empty" in err and err.count("empty.md") == 1  # once: no Dagster log
    run_ids = out.split("dagster runs: ")[1].split(" (see")[0].split(", ")
    assert len(run_ids) == 1
    with instance_for(bank) as instance:  # the run is recorded in the bank's own Dagster instance
        assert instance.get_run_by_id(run_ids[0]).status == dg.DagsterRunStatus.SUCCESS

    status = _status(capsys, bank)
    assert {"documents", "types", "stores", "consistent"} <= set(status)
    assert status["consistent"] is True
    assert status["documents"] == 3 and status["versions"] == 3 and status["rejected"] == 1
    assert set(status["types"]) == TYPES and all(status["types"][t] > 0 for t in TYPES)
    assert set(status["stores"]) == STORES
    objects = sum(status["types"].values())
    assert status["stores"]["markdown"] == status["stores"]["duckdb"] == objects
    assert status["stores"]["chroma"] == status["stores"]["texts"] < objects  # a vector per distinct text
    assert status["stores"]["graph_nodes"] == objects - status["types"]["relationship"]
    assert status["stores"]["graph_edges"] >= status["types"]["relationship"]

    code, out, _ = _smb(capsys, "status", "--bank", str(bank))
    assert code == 0
    assert out.splitlines()[0] == "documents: 3 (3 versions, 1 rejected)"
    assert out.splitlines()[1].startswith("objects:   ") and "claim" in out.splitlines()[1]
    assert "consistent: True" in out

    # Again over the same files: the rejected one would be rejected again, so no run is started for it
    # (one used to fail, and the command exited 1); a fixed file is tried at once.
    code, out, err = _smb(capsys, "ingest", "--source", str(corpus), "--bank", str(bank))
    assert code == 2 and "dagster runs: none (every other file is already in the bank)" in out
    assert err == "rejected before, unchanged, not tried again: empty.md: file is empty\n"
    (corpus / "empty.md").write_text("# Notes\n\nMara Okafor moved to Porto in 2020.\n")
    code, out, err = _smb(capsys, "ingest", "--source", str(corpus), "--bank", str(bank))
    assert code == 0 and "1 new versions" in out and err == ""
    assert "superseded" not in out

    # A changed file: what its old version's objects became is said apart from what was written
    write_doc(corpus, "priya.md", "# Priya Raman\n\nPriya Raman lives in Porto.\n")
    code, out, err = _smb(capsys, "ingest", "--source", str(corpus), "--bank", str(bank))
    written, superseded = out.split("objects written: ")[1].splitlines()[0].split("; superseded: ")
    assert code == 0 and "1 claim" in written.split(", ") and "1 claim" in superseded.split(", "), out


def test_ingest_of_a_missing_folder_is_an_error(tmp_path: Path, capsys):
    code, _, err = _smb(capsys, "ingest", "--source", str(tmp_path / "nope"), "--bank", str(tmp_path / "bank"))
    assert code == 1
    assert f"error: corpus folder {tmp_path / 'nope'} does not exist" in err


def test_init_and_status_of_an_empty_bank(tmp_path: Path, capsys):
    code, out, _ = _smb(capsys, "init", "--bank", str(tmp_path / "bank"))
    assert code == 0 and "memory bank ready at" in out
    assert (tmp_path / "bank/layer-0/source").is_dir() and (tmp_path / "bank/layer-6/plans").is_dir()
    status = _status(capsys, tmp_path / "bank")
    assert status["documents"] == 0 and status["types"] == {} and status["consistent"] is True
    assert status["stores"] == dict.fromkeys(STORES, 0)


@pytest.mark.slow
def test_ingest_of_the_shipped_sample_corpus(sample_corpus: Path, tmp_path: Path, capsys):
    bank = tmp_path / "bank"
    code, out, err = _smb(capsys, "ingest", "--source", str(sample_corpus), "--bank", str(bank))
    assert code == 0, err
    documents = len(list(sample_corpus.rglob("*.md")))
    assert f"scanned {documents} documents" in out and f"{documents} new versions" in out
    status = _status(capsys, bank)
    assert status["consistent"] is True
    assert status["documents"] == documents and status["rejected"] == 0
    assert all(status["types"].get(t, 0) > 0 for t in TYPES), status["types"]
    objects = sum(status["types"].values())
    assert status["stores"]["markdown"] == status["stores"]["duckdb"] == objects
    assert status["stores"]["chroma"] == status["stores"]["texts"] < objects  # a vector per distinct text
    assert status["stores"]["graph_nodes"] == objects - status["types"]["relationship"]
