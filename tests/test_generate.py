"""The scale benchmark's document generator (bench/generate.py): deterministic, realistic, linked."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from smb_core.corpus import _title
from smb_core.model import split_front_matter

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def generate():
    spec = importlib.util.spec_from_file_location("bench_generate", BENCH / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def documents(generate):
    return list(generate.generate_documents(60, seed=7))


def test_same_seed_same_documents(generate, documents):
    again = list(generate.generate_documents(60, seed=7))
    assert [(d.relative, d.text) for d in again] == [(d.relative, d.text) for d in documents]
    assert generate.generate_document(5, seed=7).text == documents[5].text  # independent of the corpus size
    assert generate.generate_document(5, seed=8).text != documents[5].text
    assert generate.generated_questions(20, seed=7) == generate.generated_questions(20, seed=7)


def test_documents_are_realistic_markdown(documents):
    words = [d.words for d in documents]
    assert all(250 <= w <= 4000 for w in words), words
    assert max(words) > 2 * min(words)  # lengths vary
    assert len({d.relative for d in documents}) == len({d.title for d in documents}) == len(documents)
    for doc in documents:
        front, body = split_front_matter(doc.text)
        assert front["title"] == doc.title and front["type"] and front["tags"]
        assert _title(front, body, doc.relative) == doc.title
        assert len(re.findall(r"^## ", body, flags=re.MULTILINE)) >= 2
        assert re.search(r"^- ", body, flags=re.MULTILINE)  # lists
        assert re.search(r"\b(1[89]|20)\d\d\b", body)  # dated prose
        assert len(re.findall(r"[a-z0-9]\.(?:\s|$)", body)) >= 10  # sentences, not keyword lists


def test_documents_share_entities_and_link(generate, documents):
    mentions = Counter(j for d in documents for j in set(d.mentions))
    shared = [j for j, count in mentions.items() if count >= 3]
    assert len(shared) >= 10
    name = generate.entity(shared[0], seed=7).name
    assert sum(name in d.text for d in documents) >= 3
    titles = {d.title for d in documents}
    # documents name the subjects of other documents, and link to their files
    assert sum(any(generate.entity(j, seed=7).name in titles for j in d.mentions) for d in documents) >= 30
    linked = {m for d in documents for m in re.findall(r"\]\(([^)]+\.md)\)", d.text)}
    assert linked & {d.relative.split("/", 1)[1] for d in documents}


def test_questions_ask_about_generated_subjects(generate):
    questions = generate.generated_questions(10, seed=0)
    assert len(questions) == 10
    for j, q in enumerate(questions):
        assert q["gold_titles"] == [generate.generate_document(j, seed=0).title]
        assert q["question"].endswith("?")
