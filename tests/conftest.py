"""Shared fixtures: temporary banks and corpora built from real components."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from smb_core.bank import Bank
from smb_core.settings import Settings
from tests.fake_ollama import fake_ollama  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
SAMPLE_CORPUS = REPO / "kbmd"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    corpus = tmp_path / "kbmd"
    corpus.mkdir()
    return Settings(memory_bank_dir=tmp_path / "bank", kbmd_dir=corpus, lock_timeout_seconds=20)


@pytest.fixture
def bank(settings: Settings) -> Bank:
    bank = Bank(settings=settings)
    bank.init()
    return bank


@pytest.fixture
def sample_corpus(tmp_path: Path) -> Path:
    """A copy of the shipped sample corpus that a test may modify."""
    target = tmp_path / "sample"
    shutil.copytree(SAMPLE_CORPUS, target)
    return target


def write_doc(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def extracted_bank(root: Path, docs: dict[str, str]) -> Path:
    """A bank under `root` with `docs` (name -> markdown) ingested and extracted, no evolution: what
    read-side tests query."""
    from smb_core.corpus import scan
    from smb_core.ingest import extract_sources, get_extractor, ingest_sources

    corpus, bank_path = root / "kbmd", root / "bank"
    for name, text in docs.items():
        write_doc(corpus, name, text)
    bank = Bank(settings=Settings(memory_bank_dir=bank_path))
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="test")
    extract_sources(bank, [o.source_id for o in outcomes], get_extractor(bank.settings), run_id="test")
    return bank_path


def canonical_objects(bank: Bank, merged) -> list:
    """The canonical objects a `merge.merge` made or extended, as stored (its result keeps their ids)."""
    with bank.reading() as db:
        found = db.get_objects(sorted(merged.canonical_ids))
    return [found[i] for i in sorted(found)]
