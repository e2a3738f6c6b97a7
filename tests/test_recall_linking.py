"""Linking a question to the documents it names, and the one-hop bridges from them, on a real bank."""

from pathlib import Path

import numpy as np
import pytest

from smb_core.query import MemoryBank
from tests.conftest import extracted_bank

LONG_TITLE = "The Committee for the Preservation of Old Mills and Waterways of the Northern Lowland Provinces"
CORPUS = {
    "mills.md": f"# {LONG_TITLE}\n\nThe committee was set up by Ilse Brandt to survey every mill in the region.\n",
    "brandt.md": "# Ilse Brandt\n\nIlse Brandt is a Dutch historian who wrote about rivers.\n",
    "harbour.md": "# Harbour Lights\n\nHarbour Lights is a 1931 silent film. "
    "The film was produced by Anna Berg in Rotterdam. Its director was Carl Holm, who shot it in winter.\n",
    "berg.md": "# Anna Berg\n\nAnna Berg was a Dutch film producer born in Delft.\n",
    "holm.md": "# Carl Holm\n\nCarl Holm was a Danish filmmaker born in Aarhus.\n",
}


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory) -> Path:
    return extracted_bank(tmp_path_factory.mktemp("linking"), CORPUS)


def test_a_name_of_any_length_links_the_question_to_its_document(bank_dir: Path) -> None:
    assert len(LONG_TITLE.split()) > 12  # longer than any fixed n-gram cap would allow
    with MemoryBank.open(bank_dir) as bank, bank._bank.reading() as db:
        sources = {s.path: s.id for s in db.sources()}
        seeds, residual, _ = bank._engine.link_question(db, f"Who founded {LONG_TITLE}?")
    assert sources["mills.md"] in seeds
    assert residual.split() == ["Who", "founded"]


def test_a_bridge_follows_the_sentence_that_shares_the_words_the_question_asks(bank_dir: Path) -> None:
    """With no vector signal at all (a zero question vector), the words the mentioning sentence shares
    with the question ("directed" ~ "director") alone decide which mentioned document is the answer."""
    with MemoryBank.open(bank_dir) as bank, bank._bank.reading() as db:
        sources = {s.path: s.id for s in db.sources()}
        zero = np.zeros(bank._bank.embedder.dim, dtype=np.float32)
        scores, paths = bank._engine.bridges(db, {sources["harbour.md"]: 1.0}, zero, "Who directed")
    assert scores[sources["holm.md"]] == 1.0
    assert scores.get(sources["berg.md"], 0.0) < 0.5
    assert paths[sources["holm.md"]] == [sources["harbour.md"], sources["holm.md"]]


def test_a_document_the_question_names_outranks_the_documents_it_mentions(tmp_path: Path,
                                                                         sample_corpus: Path) -> None:
    """In the sample, Tomas Varga's and Priya Raman's pages mention each other, and both names occur in
    several documents, so each links its page only weakly (strength 0.59). The best hop from it, scaled
    to 1, used to add more than the seed itself and outrank the page the question names; and a bare name
    asks nothing a hop could answer."""
    docs = {p.relative_to(sample_corpus).as_posix(): p.read_text(encoding="utf-8") for p in sample_corpus.rglob("*.md")}
    with MemoryBank.open(extracted_bank(tmp_path, docs)) as bank:
        for person in ("Tomas Varga", "Priya Raman"):
            for question in (person, f"Where was {person} born?"):
                assert bank.recall_documents(question, k=1)[0].title == person, question


def test_the_hop_embeds_only_the_strongest_sentences_that_yielded_no_claim(bank_dir: Path, monkeypatch) -> None:
    """Sentences without a claim are embedded at query time (about 5 ms each here): only the
    CONTEXT_EMBED_MAX with the strongest edges are; the others count 0."""
    from smb_core.recall import engine

    text = " ".join(f"Sentence number {i} names nobody." for i in range(12))
    spans = [(text.index(f"number {i} "), text.index(f"number {i} ") + 20) for i in range(12)]
    strength = {("src-x", span): (i + 1) / 12 for i, span in enumerate(spans)}  # the last is the strongest
    with MemoryBank.open(bank_dir) as bank:
        embedded: list[str] = []
        embed = bank._bank.embedder.embed
        monkeypatch.setattr(bank._bank.embedder, "embed", lambda texts: embedded.extend(texts) or embed(texts))
        question = embed(["Which sentence names somebody?"])[0]
        out = bank._engine._sentence_context(strength, [], {"src-x": text}, question)
    strongest = spans[-engine.CONTEXT_EMBED_MAX:]
    assert sorted(embedded) == sorted(text[a:b] for a, b in strongest)
    assert set(out) == set(strength)
    assert all(out[("src-x", span)] == 0.0 for span in spans[: -engine.CONTEXT_EMBED_MAX])
    assert all(out[("src-x", span)] > 0.0 for span in strongest)


def test_names_in_a_question_weigh_the_same_from_the_engine_postings_as_from_sql(bank_dir: Path) -> None:
    """Object recall links a question's names with the IDF of the postings the engine keeps in memory
    (counting a common word's postings in SQL grows with the bank); the weights must not change."""
    from smb_core.recall.lexical import PostingIndex
    from smb_core.recall.linking import link_text, term_idf

    question = "Was Anna Berg, the film producer born in Delft, the director of Harbour Lights?"
    with MemoryBank.open(bank_dir) as bank, bank._bank.reading() as db:
        documents = PostingIndex(db, "source")
        words = {"anna", "berg", "film", "the", "delft", "nowhere"}
        assert term_idf(db, words, documents) == term_idf(db, words)
        links = link_text(db, question, documents=documents)
        assert links == link_text(db, question)
        assert "harbour lights" in {link.name for link in links}
