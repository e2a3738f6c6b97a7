"""LLM extraction through Ollama structured outputs, with a per-document fallback to the NLP extractor.

The LLM only proposes names, statements and links; ids, spans, merging and edge-type checking are done
here with the same rules as the NLP extractor, so both paths produce interchangeable layer-1 objects.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from pydantic import Field, ValidationError

from smb_core.extract.base import Extraction, Extractor, claim_id, make_span, normalise_name, object_id
from smb_core.llm import LLMError, LLMOutput, OllamaClient
from smb_core.model import (
    Claim,
    Concept,
    EdgeType,
    Entity,
    EntityKind,
    ModelError,
    Relationship,
    SourceDocument,
    SourceSpan,
)

log = logging.getLogger(__name__)

CHUNK_CHARS = 6_000
CONFIDENCE = 0.7
#: Lower confidence when the LLM's name/statement cannot be found in the text (possible paraphrase).
CONFIDENCE_UNLOCATED = 0.6
TAGS = ["llm"]


# ---- what the LLM is asked to return ---------------------------------------------------------


class LLMEntity(LLMOutput):
    name: str
    # A plain str whose schema lists the allowed values: the grammar constrains the model, but an
    # unexpected value degrades to "other" instead of failing the whole document.
    kind: str = Field("other", json_schema_extra={"enum": [k.value for k in EntityKind]})
    aliases: list[str] = Field(default_factory=list)


class LLMConcept(LLMOutput):
    name: str
    description: str = ""


class LLMClaim(LLMOutput):
    statement: str
    subject: str = ""
    predicate: str = ""
    object: str = ""
    negated: bool = False


class LLMRelationship(LLMOutput):
    head: str
    tail: str
    edge_type: str = Field("related_to", json_schema_extra={"enum": [e.value for e in EdgeType]})
    predicate: str = ""
    evidence: str = ""


class LLMDocument(LLMOutput):
    """The structured output requested for one chunk of a document."""

    entities: list[LLMEntity] = Field(default_factory=list)
    concepts: list[LLMConcept] = Field(default_factory=list)
    claims: list[LLMClaim] = Field(default_factory=list)
    relationships: list[LLMRelationship] = Field(default_factory=list)


SYSTEM_PROMPT = f"""You extract a knowledge graph from one document. Answer with JSON only.
- entities: named things. kind is one of: {", ".join(k.value for k in EntityKind)}. aliases: other names
  used for the same thing in the text (abbreviations, short forms).
- concepts: ideas, methods or topics the text discusses, with a one-sentence description.
- claims: factual statements the text makes. Copy each statement verbatim (or nearly) from the text.
  Give subject, predicate, object; set negated=true when the text denies it.
- relationships: links between entities or concepts you listed (head and tail are their exact names).
  edge_type is one of: {", ".join(e.value for e in EdgeType)}. predicate is a short verb phrase;
  evidence is the sentence from the text that states the link.
Only extract what the text says. Use empty lists when there is nothing to report."""


# ---- helpers ----------------------------------------------------------------------------------


def chunk_text(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Split on paragraph boundaries into pieces of at most `limit` characters (hard-split longer paragraphs)."""
    if len(text) <= limit:
        return [text]
    chunks: list[str] = []
    current = ""
    for para in re.split(r"(?<=\n\n)", text):
        while len(para) > limit:
            if current:
                chunks.append(current)
                current = ""
            cut = _cut_point(para, limit)
            chunks.append(para[:cut])
            para = para[cut:]
        if len(current) + len(para) > limit:
            chunks.append(current)
            current = ""
        current += para
    if current.strip():
        chunks.append(current)
    return [c for c in chunks if c.strip()]


def _cut_point(text: str, limit: int) -> int:
    """Where to hard-split an over-long paragraph: after the last sentence end or space in the second half."""
    window = text[:limit]
    for pattern in (r"[.!?]\s", r"\s"):
        ends = [m.end() for m in re.finditer(pattern, window)]
        if ends and ends[-1] > limit // 2:
            return ends[-1]
    return limit


def _pattern(needle: str) -> re.Pattern[str] | None:
    """Case-insensitive, whitespace-flexible pattern; word-bounded so "AI" does not match inside "said"."""
    words = needle.strip().rstrip(".!?;:,\"'”’").split()
    if not words:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    left = r"(?<!\w)" if re.match(r"\w", words[0]) else ""
    right = r"(?!\w)" if re.search(r"\w$", words[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def _find(text: str, needle: str) -> tuple[int, int] | None:
    pattern = _pattern(needle)
    match = pattern.search(text) if pattern else None
    return (match.start(), match.end()) if match else None


def _count(text: str, needles: list[str]) -> int:
    """Occurrences of any of `needles` in `text`, counting each position once."""
    starts: set[int] = set()
    for needle in needles:
        pattern = _pattern(needle)
        if pattern:
            starts.update(m.start() for m in pattern.finditer(text))
    return len(starts)


def _clean(value: str) -> str:
    return " ".join(str(value).split())


def _entity_kind(value: str) -> EntityKind:
    try:
        return EntityKind(_clean(value).lower())
    except ValueError:
        return EntityKind.OTHER


def _edge(value: str) -> EdgeType:
    """Map the LLM's edge type to one of the ten allowed; anything else becomes `related_to`."""
    key = re.sub(r"[\s\-]+", "_", _clean(value).lower())
    try:
        return EdgeType(key)
    except ValueError:
        return EdgeType.RELATED_TO


# ---- the extractor ----------------------------------------------------------------------------


class LLMExtractor:
    """Ask the LLM for entities, concepts, claims and relationships; fall back per document on failure."""

    name = "llm"
    version = "llm-1"

    def __init__(self, client: OllamaClient, fallback: Extractor) -> None:
        self.client = client
        self.fallback = fallback

    def extract(self, doc: SourceDocument, text: str) -> Extraction:
        if not text.strip():
            return self._fall_back(doc, text, "document is empty")
        try:
            outputs = [self._ask(doc, chunk, i, n) for i, n, chunk in self._chunks(text)]
            result = self._build(doc, text, outputs)
        except LLMError as exc:
            return self._fall_back(doc, text, str(exc))
        except (ModelError, ValidationError) as exc:
            return self._fall_back(doc, text, f"LLM output does not fit the memory model: {exc}")
        if not (result.entities or result.concepts or result.claims):
            return self._fall_back(doc, text, "LLM returned nothing usable")
        return result

    def _chunks(self, text: str) -> list[tuple[int, int, str]]:
        chunks = chunk_text(text)
        return [(i + 1, len(chunks), chunk) for i, chunk in enumerate(chunks)]

    def _ask(self, doc: SourceDocument, chunk: str, index: int, total: int) -> LLMDocument:
        part = f" (part {index} of {total})" if total > 1 else ""
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Document: {doc.title}{part}\n\n{chunk}"},
        ]
        return self.client.chat_json(messages, LLMDocument)

    def _fall_back(self, doc: SourceDocument, text: str, reason: str) -> Extraction:
        log.warning("LLM extraction failed for %s (%s); using %s: %s", doc.id, doc.path, self.fallback.name, reason)
        result = self.fallback.extract(doc, text)
        return dataclasses.replace(result, extractor="nlp-fallback")

    # -- turning LLM output into memory objects --

    def _span(self, doc: SourceDocument, text: str, needles: list[str]) -> tuple[SourceSpan, bool]:
        """Span of the first needle found in the text, else the whole document (and found=False)."""
        for needle in needles:
            found = _find(text, needle)
            if found:
                return make_span(doc, text, *found), True
        return make_span(doc, text, 0, len(text)), False

    def _build(self, doc: SourceDocument, text: str, outputs: list[LLMDocument]) -> Extraction:
        entities: dict[str, Entity] = {}
        concepts: dict[str, Concept] = {}
        claims: dict[str, Claim] = {}
        relationships: dict[str, Relationship] = {}

        for out in outputs:
            for item in out.entities:
                name, key = _clean(item.name), normalise_name(item.name)
                if not key:
                    continue
                aliases = [a for a in (_clean(a) for a in item.aliases) if normalise_name(a)]
                if key in entities:
                    entity = entities[key]
                    entity.aliases = _merge(entity.aliases, [name, *aliases], entity.title)
                    continue
                span, found = self._span(doc, text, [name, *aliases])
                entities[key] = Entity(
                    id=object_id(Entity, doc, "entity", key),
                    title=name,
                    entity_kind=_entity_kind(item.kind),
                    aliases=_merge([], aliases, name),
                    source_spans=[span],
                    confidence=CONFIDENCE if found else CONFIDENCE_UNLOCATED,
                    **_common(doc),
                )
            for item in out.concepts:
                name, key = _clean(item.name), normalise_name(item.name)
                if not key:
                    continue
                if key in concepts:
                    concept = concepts[key]
                    concept.aliases = _merge(concept.aliases, [name], concept.title)
                    if not concept.description and item.description.strip():
                        concept.description = _clean(item.description)
                    continue
                span, found = self._span(doc, text, [name])
                concepts[key] = Concept(
                    id=object_id(Concept, doc, "concept", key),
                    title=name,
                    description=_clean(item.description),
                    source_spans=[span],
                    confidence=CONFIDENCE if found else CONFIDENCE_UNLOCATED,
                    **_common(doc),
                )
            for item in out.claims:
                statement, key = _clean(item.statement), normalise_name(item.statement)
                if not key or key in claims:
                    continue
                span, found = self._span(doc, text, [statement])
                claims[key] = Claim(
                    id=claim_id(doc.id, item.statement),
                    title=statement if len(statement) <= 120 else statement[:119].rstrip() + "…",
                    statement=statement,
                    subject=_clean(item.subject),
                    predicate=_clean(item.predicate),
                    object=_clean(item.object),
                    negated=bool(item.negated),
                    source_spans=[span],
                    confidence=CONFIDENCE if found else CONFIDENCE_UNLOCATED,
                    **_common(doc),
                )

        # Mentions: how often the name (or an alias) occurs in the whole document.
        for obj in [*entities.values(), *concepts.values()]:
            obj.mentions = max(1, _count(text, [obj.title, *obj.aliases]))

        # Names a relationship may point at: entities first, then concepts, then aliases.
        targets: dict[str, Entity | Concept] = {}
        for key, obj in [*entities.items(), *concepts.items()]:
            targets.setdefault(key, obj)
        for obj in [*entities.values(), *concepts.values()]:
            for alias in obj.aliases:
                targets.setdefault(normalise_name(alias), obj)

        for out in outputs:
            for item in out.relationships:
                head = targets.get(normalise_name(item.head))
                tail = targets.get(normalise_name(item.tail))
                if head is None or tail is None or head.id == tail.id:
                    continue
                kind = _edge(item.edge_type)
                rel_id = object_id(Relationship, doc, "rel", head.id, kind.value, tail.id)
                if rel_id in relationships:
                    continue
                predicate, evidence = _clean(item.predicate), _clean(item.evidence)
                span, found = self._span(doc, text, [evidence] if evidence else [])
                relationships[rel_id] = Relationship(
                    id=rel_id,
                    title=f"{head.title} {predicate or kind.value.replace('_', ' ')} {tail.title}",
                    head=head.id,
                    tail=tail.id,
                    edge_type=kind,
                    predicate=predicate,
                    evidence=evidence,
                    source_spans=[span],
                    confidence=CONFIDENCE if found else CONFIDENCE_UNLOCATED,
                    **_common(doc),
                )

        return Extraction(
            entities=list(entities.values()),
            concepts=list(concepts.values()),
            claims=list(claims.values()),
            relationships=list(relationships.values()),
            extractor=self.name,
        )


def _common(doc: SourceDocument) -> dict[str, Any]:
    """Fields every LLM-made object shares (fresh lists per object)."""
    return {"source_ids": [doc.id], "tags": list(TAGS)}


def _merge(existing: list[str], new: list[str], title: str) -> list[str]:
    """Aliases without duplicates (by normalised name) and without the title itself."""
    seen = {normalise_name(title), *(normalise_name(a) for a in existing)}
    merged = list(existing)
    for alias in new:
        key = normalise_name(alias)
        if key and key not in seen:
            seen.add(key)
            merged.append(alias)
    return merged
