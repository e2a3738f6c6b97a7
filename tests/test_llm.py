"""The optional Ollama path against a real local HTTP fake: client errors/retries, embeddings, LLM extraction."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest
from pydantic import BaseModel

from smb_core.extract.base import Extraction, make_span, normalise_name, object_id
from smb_core.extract.llm import LLMDocument, LLMExtractor, chunk_text
from smb_core.llm import LLMError, OllamaClient, OllamaEmbedder
from smb_core.model import Claim, Concept, EdgeType, Entity, EntityKind, Relationship, SourceDocument
from smb_core.settings import Settings
from tests.fake_ollama import CHAT_MODEL, EMBED_DIM, FakeOllama, fake_ollama, fake_vector  # noqa: F401

FAST = {"attempts": 3, "backoff_seconds": 0.01}


class Answer(BaseModel):
    city: str
    population: int


def settings_for(url: str, *, timeout: float = 2.0, model: str = CHAT_MODEL) -> Settings:
    return Settings(ollama_host=url, ollama_model=model, ollama_timeout_seconds=timeout)


def client_for(fake: FakeOllama, **kwargs) -> OllamaClient:
    timeout = kwargs.pop("timeout", 2.0)
    model = kwargs.pop("model", CHAT_MODEL)
    return OllamaClient(settings_for(fake.url, timeout=timeout, model=model), **{**FAST, **kwargs})


MESSAGES = [{"role": "user", "content": "Where?"}]


# ---- OllamaClient.chat_json -------------------------------------------------------------------


def test_chat_json_returns_validated_model_and_sends_schema(fake_ollama):
    fake_ollama.reply({"city": "Lisbon", "population": 545000})
    with client_for(fake_ollama) as client:
        answer = client.chat_json(MESSAGES, Answer, temperature=0.2)
    assert answer == Answer(city="Lisbon", population=545000)
    (body,) = fake_ollama.bodies("/api/chat")
    assert body["model"] == CHAT_MODEL
    assert body["stream"] is False
    assert body["messages"] == MESSAGES
    assert body["format"] == Answer.model_json_schema()
    assert body["format"]["properties"]["population"]["type"] == "integer"
    assert body["options"] == {"temperature": 0.2}


def test_chat_json_retries_after_500_then_succeeds(fake_ollama):
    fake_ollama.fail_next(2, status=500)
    fake_ollama.reply({"city": "Porto", "population": 230000})
    with client_for(fake_ollama) as client:
        assert client.chat_json(MESSAGES, Answer).city == "Porto"
    assert len(fake_ollama.bodies("/api/chat")) == 3


def test_chat_json_gives_up_after_bounded_retries(fake_ollama):
    fake_ollama.fail_next(10, status=503)
    with client_for(fake_ollama) as client, pytest.raises(LLMError) as info:
        client.chat_json(MESSAGES, Answer)
    message = str(info.value)
    assert "HTTP 503" in message and "3 attempts" in message
    assert fake_ollama.url in message and CHAT_MODEL in message
    assert len(fake_ollama.bodies("/api/chat")) == 3


def test_chat_json_invalid_json_is_an_error_after_retries(fake_ollama):
    fake_ollama.invalid_json = True
    with client_for(fake_ollama) as client, pytest.raises(LLMError, match="invalid JSON"):
        client.chat_json(MESSAGES, Answer)
    assert len(fake_ollama.bodies("/api/chat")) == 3


def test_chat_json_schema_mismatch_is_retried_then_accepted(fake_ollama):
    fake_ollama.reply({"city": "Faro"}, {"city": "Faro", "population": 64000})
    with client_for(fake_ollama) as client:
        assert client.chat_json(MESSAGES, Answer).population == 64000
    assert len(fake_ollama.bodies("/api/chat")) == 2


def test_chat_json_schema_mismatch_error_names_the_schema(fake_ollama):
    fake_ollama.chat_handler = lambda body: {"city": "Faro", "population": "many"}
    with client_for(fake_ollama) as client, pytest.raises(LLMError) as info:
        client.chat_json(MESSAGES, Answer)
    assert "does not validate" in str(info.value) and "Answer" in str(info.value)
    assert "population" in str(info.value)


def test_chat_json_tolerates_code_fences(fake_ollama):
    fake_ollama.reply('```json\n{"city": "Braga", "population": 193000}\n```')
    with client_for(fake_ollama) as client:
        assert client.chat_json(MESSAGES, Answer).city == "Braga"


def test_connection_refused_names_the_host():
    with socket.socket() as sock:  # find a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with OllamaClient(settings_for(url), **FAST) as client, pytest.raises(LLMError) as info:
        client.chat_json(MESSAGES, Answer)
    assert url in str(info.value)
    assert "cannot connect" in str(info.value)


def test_timeout_is_an_llm_error(fake_ollama):
    fake_ollama.delay_seconds = 1.0
    started = time.monotonic()
    with client_for(fake_ollama, timeout=0.15, attempts=2) as client, pytest.raises(LLMError, match="timed out"):
        client.chat_json(MESSAGES, Answer)
    assert time.monotonic() - started < 1.5
    assert len(fake_ollama.bodies("/api/chat")) == 2


def test_unknown_model_404_is_not_retried_and_suggests_pull(fake_ollama):
    with client_for(fake_ollama, model="llama9:404b") as client, pytest.raises(LLMError) as info:
        client.chat_json(MESSAGES, Answer)
    assert "ollama pull llama9:404b" in str(info.value)
    assert "not found" in str(info.value)
    assert len(fake_ollama.bodies("/api/chat")) == 1


def test_host_without_scheme_is_accepted(fake_ollama):
    fake_ollama.reply({"city": "Evora", "population": 53000})
    bare = fake_ollama.url.removeprefix("http://")
    with OllamaClient(settings_for(bare), **FAST) as client:
        assert client.chat_json(MESSAGES, Answer).city == "Evora"
        assert CHAT_MODEL in client.list_models()


# ---- OllamaEmbedder ---------------------------------------------------------------------------


def test_embedder_returns_normalised_rows_in_order_and_dedupes(fake_ollama):
    texts = ["alpha", "beta", "alpha", "gamma", "beta", "delta"]
    embedder = OllamaEmbedder(settings_for(fake_ollama.url), batch_size=2, **FAST)
    try:
        vectors = embedder.embed(texts)
    finally:
        embedder.close()
    assert embedder.name == "ollama:nomic-embed-text"
    assert vectors.dtype == np.float32 and vectors.shape == (6, EMBED_DIM)
    assert embedder.dim == EMBED_DIM
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    for text, row in zip(texts, vectors):
        expected = np.array(fake_vector(text), dtype=np.float32)
        np.testing.assert_allclose(row, expected / np.linalg.norm(expected), rtol=1e-5)
    seen = [t for body in fake_ollama.bodies("/api/embed") for t in body["input"]]
    assert sorted(seen) == ["alpha", "beta", "delta", "gamma"]
    assert all(len(body["input"]) <= 2 for body in fake_ollama.bodies("/api/embed"))
    assert {body["model"] for body in fake_ollama.bodies("/api/embed")} == {"nomic-embed-text"}


def test_embedder_dim_probes_when_unknown_and_empty_input(fake_ollama):
    with OllamaEmbedder(settings_for(fake_ollama.url), **FAST) as embedder:
        assert embedder.dim == EMBED_DIM
        assert embedder.embed([]).shape == (0, EMBED_DIM)


def test_embedder_errors_are_llm_errors(fake_ollama):
    with OllamaEmbedder(settings_for(fake_ollama.url), model="missing-embed", **FAST) as embedder:
        with pytest.raises(LLMError, match="ollama pull missing-embed"):
            embedder.embed(["x"])
    fake_ollama.fail_next(1)
    with OllamaEmbedder(settings_for(fake_ollama.url), **FAST) as embedder:
        assert embedder.embed(["x"]).shape == (1, EMBED_DIM)


# ---- LLMExtractor -----------------------------------------------------------------------------

DOC_TEXT = """# Curie notes

Marie Curie worked at the University of Paris.
She discovered polonium in 1898 with Pierre Curie.
Curie did not win a third Nobel Prize.

Radioactivity is the spontaneous emission of radiation. M. Curie studied radioactivity.
"""

SCRIPTED = {
    "entities": [
        {"name": "Marie Curie", "kind": "person", "aliases": ["M. Curie"]},
        {"name": "University of Paris", "kind": "organization", "aliases": []},
        {"name": "Pierre Curie", "kind": "person", "aliases": []},
        {"name": "marie  curie", "kind": "person", "aliases": ["Madame Curie"]},  # same normalised name
        {"name": "Polonium", "kind": "element", "aliases": []},  # unknown kind -> other
    ],
    "concepts": [{"name": "Radioactivity", "description": "Spontaneous emission of radiation."}],
    "claims": [
        {
            "statement": "She discovered polonium in 1898 with Pierre Curie.",
            "subject": "Marie Curie",
            "predicate": "discovered",
            "object": "polonium",
            "negated": False,
        },
        {
            "statement": "Curie did not win a third Nobel Prize",
            "subject": "Curie",
            "predicate": "won",
            "object": "third Nobel Prize",
            "negated": True,
        },
        {"statement": "Curie invented the telephone.", "subject": "", "predicate": "", "object": "", "negated": False},
    ],
    "relationships": [
        {
            "head": "Marie Curie",
            "tail": "University of Paris",
            "edge_type": "related_to",
            "predicate": "worked at",
            "evidence": "Marie Curie worked at the University of Paris.",
        },
        {
            "head": "M. Curie",  # alias resolves to the entity
            "tail": "Radioactivity",
            "edge_type": "studies",  # unknown -> related_to
            "predicate": "studied",
            "evidence": "M. Curie studied radioactivity.",
        },
        {"head": "Pierre Curie", "tail": "Marie Curie", "edge_type": "inspired_by", "predicate": "", "evidence": ""},
        {"head": "Marie Curie", "tail": "Albert Einstein", "edge_type": "extends", "predicate": "", "evidence": ""},
    ],
}


def make_doc(text: str = DOC_TEXT) -> SourceDocument:
    return SourceDocument(
        id="src-curie-v1",
        path="kbmd/curie.md",
        partition_key="curie.md",
        sha256="0" * 64,
        version=1,
        title="Curie notes",
        bytes=len(text.encode()),
    )


class StubFallback:
    """Stands in for the sibling NLP extractor: returns a known Extraction and counts calls."""

    name = "nlp"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def extract(self, doc: SourceDocument, text: str) -> Extraction:
        self.calls.append(doc.id)
        entity = Entity(id=object_id(Entity, doc, "entity", "stub"), title="Stub", source_ids=[doc.id])
        return Extraction(entities=[entity], extractor="nlp")


def extractor_for(fake: FakeOllama, fallback: StubFallback | None = None, **kwargs) -> LLMExtractor:
    return LLMExtractor(client_for(fake, **kwargs), fallback or StubFallback())


def test_llm_extractor_builds_objects_with_ids_and_spans(fake_ollama):
    fake_ollama.reply(SCRIPTED)
    doc = make_doc()
    fallback = StubFallback()
    result = extractor_for(fake_ollama, fallback).extract(doc, DOC_TEXT)

    assert fallback.calls == []
    assert result.extractor == "llm"
    assert result.counts() == {"entity": 4, "concept": 1, "claim": 3, "relationship": 3}

    # The request carried the document and the extraction schema.
    (body,) = fake_ollama.bodies("/api/chat")
    assert body["format"] == LLMDocument.model_json_schema()
    assert set(body["format"]["required"]) == {"entities", "concepts", "claims", "relationships"}
    assert "Marie Curie worked at" in body["messages"][-1]["content"]

    entities = {e.title: e for e in result.entities}
    marie = entities["Marie Curie"]
    assert marie.id == object_id(Entity, doc, "entity", "marie curie")
    assert marie.entity_kind is EntityKind.PERSON
    assert marie.aliases == ["M. Curie", "Madame Curie"]
    assert marie.mentions == 2  # "Marie Curie" once, "M. Curie" once; "Pierre Curie" is not Marie
    assert marie.source_ids == [doc.id]
    assert marie.source_spans == [make_span(doc, DOC_TEXT, DOC_TEXT.index("Marie Curie"), DOC_TEXT.index("Marie Curie") + 11)]
    assert marie.source_spans[0].line_start == 3
    assert marie.confidence == pytest.approx(0.7)
    assert "llm" in marie.tags
    assert entities["University of Paris"].entity_kind is EntityKind.ORGANIZATION
    polonium = entities["Polonium"]
    assert polonium.entity_kind is EntityKind.OTHER
    span = polonium.source_spans[0]
    assert DOC_TEXT[span.start : span.end] == "polonium"  # case-insensitive match

    (concept,) = result.concepts
    assert isinstance(concept, Concept)
    assert concept.id == object_id(Concept, doc, "concept", "radioactivity")
    assert concept.description == "Spontaneous emission of radiation."
    assert DOC_TEXT[concept.source_spans[0].start : concept.source_spans[0].end] == "Radioactivity"

    claims = {c.statement: c for c in result.claims}
    discovered = claims["She discovered polonium in 1898 with Pierre Curie."]
    assert isinstance(discovered, Claim)
    assert discovered.id == object_id(Claim, doc, "claim", normalise_name(discovered.statement))
    assert (discovered.subject, discovered.predicate, discovered.object) == ("Marie Curie", "discovered", "polonium")
    s = discovered.source_spans[0]
    assert DOC_TEXT[s.start : s.end] == "She discovered polonium in 1898 with Pierre Curie"
    assert (s.line_start, s.line_end) == (4, 4)
    assert claims["Curie did not win a third Nobel Prize"].negated is True
    invented = claims["Curie invented the telephone."]  # not in the text: whole-document span, lower confidence
    assert (invented.source_spans[0].start, invented.source_spans[0].end) == (0, len(DOC_TEXT))
    assert invented.confidence < 0.7

    rels = {(r.head, r.tail): r for r in result.relationships}
    works = rels[(marie.id, entities["University of Paris"].id)]
    assert isinstance(works, Relationship)
    assert works.edge_type is EdgeType.RELATED_TO and works.predicate == "worked at"
    assert works.id == object_id(Relationship, doc, "rel", marie.id, "related_to", entities["University of Paris"].id)
    assert DOC_TEXT[works.source_spans[0].start : works.source_spans[0].end].startswith("Marie Curie worked at")
    studies = rels[(marie.id, concept.id)]
    assert studies.edge_type is EdgeType.RELATED_TO  # unknown "studies" mapped
    assert rels[(entities["Pierre Curie"].id, marie.id)].edge_type is EdgeType.INSPIRED_BY
    # Einstein does not exist in this extraction: no dangling relationship.
    assert all(r.tail in {o.id for o in [*result.entities, *result.concepts]} for r in result.relationships)


def test_llm_extractor_ids_are_deterministic(fake_ollama):
    fake_ollama.chat_handler = lambda body: SCRIPTED
    extractor = extractor_for(fake_ollama)
    first, second = extractor.extract(make_doc(), DOC_TEXT), extractor.extract(make_doc(), DOC_TEXT)
    assert [o.id for o in first.objects()] == [o.id for o in second.objects()]
    assert len({o.id for o in first.objects()}) == len(first.objects())


def test_llm_extractor_falls_back_when_server_fails(fake_ollama):
    fake_ollama.fail_next(10, status=500)
    fallback = StubFallback()
    result = extractor_for(fake_ollama, fallback).extract(make_doc(), DOC_TEXT)
    assert fallback.calls == ["src-curie-v1"]
    assert result.extractor == "nlp-fallback"
    assert [e.title for e in result.entities] == ["Stub"]


def test_llm_extractor_falls_back_on_empty_answer(fake_ollama, caplog):
    fake_ollama.reply({"entities": [], "concepts": [], "claims": [], "relationships": []})
    fallback = StubFallback()
    with caplog.at_level("WARNING"):
        result = extractor_for(fake_ollama, fallback).extract(make_doc(), DOC_TEXT)
    assert result.extractor == "nlp-fallback" and fallback.calls == ["src-curie-v1"]
    assert "nothing usable" in caplog.text


def test_llm_extractor_chunks_long_documents(fake_ollama):
    para = "Ada Lovelace wrote about the Analytical Engine. " * 40 + "\n\n"
    text = para * 8  # ~15k characters -> several chunks
    fake_ollama.chat_handler = lambda body: {
        "entities": [{"name": "Ada Lovelace", "kind": "person", "aliases": []}],
        "concepts": [],
        "claims": [],
        "relationships": [],
    }
    result = extractor_for(fake_ollama).extract(make_doc(text), text)
    calls = fake_ollama.bodies("/api/chat")
    assert len(calls) == len(chunk_text(text)) >= 3
    assert all(len(c["messages"][-1]["content"]) < 6_200 for c in calls)
    (ada,) = result.entities
    assert ada.mentions == 320


def test_chunk_text_keeps_all_text():
    text = ("word " * 300 + "\n\n") * 10 + "x" * 13_000
    chunks = chunk_text(text, limit=2_000)
    assert "".join(chunks) == text
    assert all(0 < len(c) <= 2_000 for c in chunks)
