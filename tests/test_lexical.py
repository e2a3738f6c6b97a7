"""BM25 over documents from the in-memory posting index ranks exactly as the SQL over DuckDB does."""

from __future__ import annotations

import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.ingest import ingest_sources
from smb_core.recall.lexical import PostingIndex, bm25
from tests.conftest import write_doc

DOCS = {
    "aurora.md": "# Aurora index\n\nThe Aurora index is a disk-resident graph index designed by Tomas Varga.\n",
    "varga.md": "# Tomas Varga\n\nTomas Varga was born in Debrecen. He designed indexes and indexes again.\n",
    "lisbon.md": "# Lisbon\n\nLisbon is the capital of Portugal. Lumen Labs was founded in Lisbon.\n",
    "hnsw.md": "# HNSW\n\nHNSW is a graph index. The Aurora index builds on HNSW graphs on disk.\n",
    "twin-a.md": "# Twin\n\nA twin graph index.\n",  # scores tie with twin-b for any question
    "twin-b.md": "# Twin\n\nA twin graph index.\n",
}


@pytest.mark.parametrize("k", [10, 2, 1])  # fewer than the matching documents: the top k and ties by id
@pytest.mark.parametrize("question", ["Who designed the Aurora index?", "graph index on disk", "Lisbon Portugal",
                                      "nothing matches zyzzyva", "index index indexes", "twin"])
def test_posting_index_ranks_as_sql(bank: Bank, settings, question: str, k: int) -> None:
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    ingest_sources(bank, scan(settings.kbmd_dir), settings.kbmd_dir)
    with bank.reading() as db:
        expected = bm25(db, question, "source", k)
        found = PostingIndex(db, "source").search(question, k)
    assert [u for u, _ in found] == [u for u, _ in expected]
    assert [s for _, s in found] == pytest.approx([s for _, s in expected])
    assert bool(found) == (question != "nothing matches zyzzyva")
