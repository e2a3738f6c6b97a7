"""The spaCy extractor on a small realistic document: entities, concepts, claims, relationships, spans, ids."""

from __future__ import annotations

import hashlib

import pytest

from smb_core.extract.base import Extraction, normalise_name
from smb_core.extract.markdown_text import blocks, plain_text
from smb_core.extract.nlp import NLPExtractor, defined_acronyms
from smb_core.model import Claim, EdgeType, Entity, EntityKind, SourceDocument

TEXT = """\
---
title: Aurora
tags: [indexing]
---

# The Aurora Index

Mara Okafor founded Lumen Labs in Lisbon in 2017. Mara Okafor hired Tomas Varga on March 3, 2018.
She later moved to [Berlin](https://en.wikipedia.org/wiki/Berlin) with the team.
Tomas Varga designed the **Aurora index** at Lumen Labs in Berlin.

## Indexes

Vector indexes make similarity search fast. A vector index trades memory for speed.
The Aurora index does not support online updates.
Microsoft cited Tomas Varga in a 2021 report.

```python
# Satya Nadella wrote this example in Seattle.
index = Aurora()
```

- Lumen Labs acquired Tessellate in 2020.
"""


def _doc(text: str = TEXT, title: str = "The Aurora Index", doc_id: str = "src-aurora-v1") -> SourceDocument:
    return SourceDocument(id=doc_id, path="aurora.md", partition_key="aurora-1234abcd",
                          sha256=hashlib.sha256(text.encode()).hexdigest(), version=1, title=title,
                          bytes=len(text.encode()), tags=["indexing"], body=text)


@pytest.fixture(scope="module")
def extraction() -> Extraction:
    return NLPExtractor().extract(_doc(), TEXT)


def _entity(extraction: Extraction, title: str) -> Entity:
    (entity,) = [e for e in extraction.entities if e.title == title]
    return entity


def _claim(extraction: Extraction, statement: str) -> Claim:
    (claim,) = [c for c in extraction.claims if c.statement == statement]
    return claim


def test_entities_of_each_kind(extraction):
    kinds = {e.title: e.entity_kind for e in extraction.entities}
    assert kinds["Mara Okafor"] is EntityKind.PERSON
    assert kinds["Tomas Varga"] is EntityKind.PERSON
    assert kinds["Lisbon"] is EntityKind.PLACE
    assert kinds["Berlin"] is EntityKind.PLACE
    assert kinds["Microsoft"] is EntityKind.ORGANIZATION
    assert kinds["March 3, 2018"] is EntityKind.DATE
    assert all(e.source_ids == ["src-aurora-v1"] and e.type.value == "entity" for e in extraction.entities)


def test_a_nationality_is_not_an_organisation():
    text = "# Film notes\n\nThe Canadian director Anne Wheeler filmed Loyalties in Alberta.\n"
    kinds = {e.title: e.entity_kind for e in NLPExtractor().extract(_doc(text, "Film notes", "src-notes"), text).entities}
    assert kinds["Canadian"] is EntityKind.OTHER and kinds["Anne Wheeler"] is EntityKind.PERSON


def test_a_quoted_name_cut_open_by_ner_keeps_the_name():
    text = '# Podcasts\n\nJordan recorded twelve episodes of the "Lumen Office Hours" podcast this year.\n'
    titles = {e.title for e in NLPExtractor().extract(_doc(text, "Podcasts", "src-podcasts"), text).entities}
    assert not any('"' in t for t in titles)
    assert "Lumen Office Hours" in titles, titles


def test_a_title_with_a_qualifier_keeps_its_closing_bracket():
    text = "# The Long Winter (1954 film)\n\nThe Long Winter is a 1954 Western film directed by Carl Dunmore.\n"
    titles = {e.title for e in NLPExtractor().extract(_doc(text, "The Long Winter (1954 film)", "src-w"), text).entities}
    assert "The Long Winter (1954 film)" in titles, titles


def test_an_acronym_the_document_defines_is_another_name_of_the_same_entity():
    text = ("# Tellmark Wind Consortium\n\nThe Tellmark Wind Consortium (TWC) is building an offshore wind farm "
            "off the Danish coast. TWC hired 40 engineers in Esbjerg.\n")
    entities = NLPExtractor().extract(_doc(text, "Tellmark Wind Consortium", "src-twc"), text).entities
    (consortium,) = [e for e in entities if "TWC" in (e.title, *e.aliases)]
    assert consortium.title == "Tellmark Wind Consortium" and "document-subject" in consortium.tags
    # the title alone says nothing: the sentence that defines the acronym is the entity's context
    assert consortium.description.startswith("The Tellmark Wind Consortium (TWC) is building")
    assert consortium.mentions >= 3
    # where NER cuts the name open at the bracket, the name is kept without it
    text = "# Venues\n\nThe International Conference on Similarity Search (ICSS) is the main academic venue.\n"
    titles = {e.title for e in NLPExtractor().extract(_doc(text, "Venues", "src-icss"), text).entities}
    assert "The International Conference on Similarity Search" in titles and not any("(" in t for t in titles)


@pytest.mark.parametrize("text, expected", [
    ("The Department of Energy (DOE) funds the lab.", {"doe": "department of energy"}),
    ("Retrieval Augmented Generation (RAG) grounds answers.", {"rag": "retrieval augmented generation"}),
    ("John Smith (footballer) scored twice.", {}),  # a qualifier, not an acronym
    ("He moved to Paris (France) in 1990.", {}),
    # defined two ways in one document: neither is trusted
    ("Sandbox Studios (SS) and Silver Screen (SS) merged.", {}),
])
def test_defined_acronyms(text, expected):
    assert defined_acronyms(text) == expected


def test_a_hyphenated_word_in_a_concept_stays_one_word():
    text = ("# Notes\n\nThe team uses retrieval-augmented generation for answers. It runs on open-source software. "
            "E-mail marketing still works.\n")
    concepts = {c.title for c in NLPExtractor().extract(_doc(text, "Notes", "src-notes"), text).concepts}
    assert {"retrieval-augmented generation", "open-source software", "e-mail marketing"} <= concepts, concepts


def test_a_possessive_ending_is_not_part_of_a_concept():
    text = "# Notes\n\nThe company's new product sold well.\n"
    concepts = {c.title for c in NLPExtractor().extract(_doc(text, "Notes", "src-notes"), text).concepts}
    assert "company new product" in concepts, concepts


def test_fenced_code_is_not_extracted(extraction):
    titles = {e.title for e in extraction.entities}
    assert "Satya Nadella" not in titles and "Seattle" not in titles
    assert not any("Nadella" in c.statement for c in extraction.claims)


def test_document_title_is_the_subject_entity_with_its_heading_span(extraction):
    subject = _entity(extraction, "The Aurora Index")
    assert "document-subject" in subject.tags
    (span,) = subject.source_spans
    assert TEXT[span.start:span.end] == "The Aurora Index"
    assert span.line_start == 6  # the `# The Aurora Index` heading, not the front matter


def test_same_normalised_name_is_one_object(extraction):
    entity_keys = [normalise_name(e.title) for e in extraction.entities]
    assert len(entity_keys) == len(set(entity_keys))
    concept_names = [n for c in extraction.concepts for n in _names(c)]
    assert len(concept_names) == len(set(concept_names))  # no name belongs to two concepts
    assert _entity(extraction, "Mara Okafor").mentions == 2
    varga = _entity(extraction, "Tomas Varga")
    assert varga.mentions == 3 and len(varga.source_spans) == 3
    assert _entity(extraction, "Berlin").mentions == 2


def _names(concept) -> set[str]:
    return {normalise_name(n) for n in [concept.title, *concept.aliases]}


def _concept(extraction: Extraction, name: str):
    (concept,) = [c for c in extraction.concepts if name in _names(c)]
    return concept


def test_plural_noun_phrases_fold_into_one_concept(extraction):
    vector = [c for c in extraction.concepts if any("vector" in n for n in _names(c))]
    assert len(vector) == 1  # "Vector indexes" and "A vector index" are one concept
    assert {"vector index", "vector indexes"} <= _names(vector[0])
    assert vector[0].mentions == 2
    assert len(vector[0].source_spans) == 1
    updates = _concept(extraction, "online update")
    assert "online updates" in _names(updates)
    for name in ("similarity search", "aurora index"):
        assert _concept(extraction, name).source_ids == ["src-aurora-v1"]


def test_claims_with_subject_predicate_object(extraction):
    hired = _claim(extraction, "Mara Okafor hired Tomas Varga on March 3, 2018.")
    assert (hired.subject, hired.predicate, hired.object, hired.negated) == (
        "Mara Okafor", "hire", "Tomas Varga", False)
    assert hired.derived_from == [_entity(extraction, "Mara Okafor").id]
    designed = _claim(extraction, "Tomas Varga designed the Aurora index at Lumen Labs in Berlin.")
    assert designed.subject == "Tomas Varga"
    assert designed.object == "the Aurora index at Lumen Labs in Berlin"  # markup blanked, single spaces


def test_negated_claim_is_detected(extraction):
    claim = _claim(extraction, "The Aurora index does not support online updates.")
    assert claim.negated is True
    assert claim.subject == "The Aurora index"
    assert claim.predicate == "not support"
    assert claim.object == "online updates"
    negated = {c.statement for c in extraction.claims if c.negated}
    assert negated == {"The Aurora index does not support online updates."}


def test_pronoun_subject_resolves_to_the_last_person(extraction):
    claim = _claim(extraction, "She later moved to Berlin with the team.")
    assert claim.subject == "Mara Okafor"
    assert claim.derived_from == [_entity(extraction, "Mara Okafor").id]


def test_headings_and_list_items(extraction):
    assert not any(c.statement in ("The Aurora Index", "Indexes") for c in extraction.claims)
    acquired = _claim(extraction, "Lumen Labs acquired Tessellate in 2020.")
    assert TEXT[acquired.source_spans[0].start:].startswith("Lumen Labs acquired")


def test_section_headings_give_no_entities_or_concepts():
    # spaCy alone on a heading word read "Background" as a place in thousands of generated documents
    text = ("# Vesta Group\n\nVesta Group is a shipping company.\n\n## Background\n\n"
            "Vesta Group started in Oslo in 1999.\n\n## Fleet Expansion\n\nThe company bought ships.\n")
    assert [b.level for b in blocks(text)] == [1, 0, 2, 0, 2, 0]
    extraction = NLPExtractor().extract(_doc(text, "Vesta Group", "src-vesta"), text)
    entities = {e.title for e in extraction.entities}
    assert {"Vesta Group", "Oslo"} <= entities and "Background" not in entities, entities
    concepts = {c.title.lower() for c in extraction.concepts}
    assert "company" in concepts and not {"background", "fleet expansion", "expansion"} & concepts, concepts
    heading = text.index("## Background")
    assert all(not heading <= s.start < heading + len("## Background")
               for o in extraction.objects() for s in o.source_spans)


def test_relationships_use_only_allowed_edge_types_and_link_extracted_entities(extraction):
    ids = {e.id for e in extraction.entities}
    assert extraction.relationships
    for rel in extraction.relationships:
        assert isinstance(rel.edge_type, EdgeType)
        assert rel.head in ids and rel.tail in ids and rel.head != rel.tail
        assert rel.derived_from == [rel.head, rel.tail]
        assert rel.evidence in {c.statement for c in extraction.claims}
    by_pair = {(r.head, r.tail): r for r in extraction.relationships}
    cited = by_pair[(_entity(extraction, "Microsoft").id, _entity(extraction, "Tomas Varga").id)]
    assert cited.edge_type is EdgeType.REFERENCES  # "cite" maps to references
    hired = by_pair[(_entity(extraction, "Mara Okafor").id, _entity(extraction, "Tomas Varga").id)]
    assert hired.edge_type is EdgeType.RELATED_TO and hired.predicate.startswith("hire")


def test_structural_edges_go_from_claims_to_extracted_objects(extraction):
    claim_ids = {c.id for c in extraction.claims}
    targets = {o.id for o in [*extraction.entities, *extraction.concepts]}
    assert extraction.edges
    for edge in extraction.edges:
        assert edge.edge_type is EdgeType.REFERENCES
        assert edge.head in claim_ids and edge.tail in targets
    negated = _claim(extraction, "The Aurora index does not support online updates.")
    online = _concept(extraction, "online update")
    assert any(e.head == negated.id and e.tail == online.id for e in extraction.edges)


def test_every_span_points_at_its_text_in_the_source(extraction):
    assert all(e.source_spans for e in extraction.entities)
    for entity in extraction.entities:
        names = {normalise_name(n) for n in [entity.title, *entity.aliases]}
        for span in entity.source_spans:
            assert normalise_name(TEXT[span.start:span.end]) in names, (entity.title, span)
    for concept in extraction.concepts:
        names = {concept.title, *(normalise_name(a) for a in concept.aliases)}
        for span in concept.source_spans:
            assert normalise_name(TEXT[span.start:span.end]) in names, (concept.title, span)
    plain = plain_text(TEXT)  # same offsets as TEXT, markup blanked
    assert len(plain) == len(TEXT)
    for claim in extraction.claims:
        (span,) = claim.source_spans
        assert " ".join(plain[span.start:span.end].split()) == claim.statement
        assert TEXT[span.start:span.start + 5] == claim.statement[:5]
    for obj in extraction.objects():
        for span in obj.source_spans:
            assert span.source_id == "src-aurora-v1"
            assert span.line_start == TEXT.count("\n", 0, span.start) + 1
            assert span.line_end == TEXT.count("\n", 0, span.end) + 1


def test_link_text_span_is_the_visible_word(extraction):
    berlin = _entity(extraction, "Berlin")
    link_start = TEXT.index("[Berlin]") + 1
    assert link_start in [s.start for s in berlin.source_spans]
    assert berlin.source_spans[0].line_start == 9


def test_extraction_is_deterministic_across_runs(extraction):
    again = NLPExtractor().extract_many([(_doc(), TEXT)])[0]

    def fingerprint(ex: Extraction):
        return [o.model_dump(exclude={"created", "modified"}) for o in ex.objects()], [e.id for e in ex.edges]

    assert fingerprint(again) == fingerprint(extraction)
    assert again.counts() == extraction.counts()
    other_version = NLPExtractor().extract(_doc(doc_id="src-aurora-v2"), TEXT)
    assert not {o.id for o in other_version.objects()} & {o.id for o in extraction.objects()}


def test_title_missing_from_text_gets_no_made_up_span():
    text = "Lisbon is a city in Portugal. Mara Okafor lives there.\n"
    extraction = NLPExtractor().extract(_doc(text, title="travel notes"), text)
    subject = _entity(extraction, "travel notes")
    assert subject.source_spans == []
    for entity in extraction.entities:
        for span in entity.source_spans:
            assert text[span.start:span.end] == entity.title


def test_front_matter_is_not_extracted():
    text = "---\ntitle: Lumen Labs\nauthor: Priya Raman\n---\n\n# Lumen Labs\n\nLumen Labs is a company in Lisbon.\n"
    extraction = NLPExtractor().extract(_doc(text, title="Lumen Labs"), text)
    assert "Priya Raman" not in {e.title for e in extraction.entities}
    body = text.index("\n---\n") + 5
    assert all(s.start >= body for o in extraction.objects() for s in o.source_spans)


def test_extract_many_keeps_documents_apart():
    a = "# Alpha\n\nMara Okafor lives in Lisbon.\n"
    b = "# Beta\n\nTomas Varga lives in Berlin.\n"
    ex_a, ex_b = NLPExtractor().extract_many([(_doc(a, "Alpha", "src-a"), a), (_doc(b, "Beta", "src-b"), b)])
    assert {e.title for e in ex_a.entities} >= {"Mara Okafor", "Lisbon"}
    assert not {"Tomas Varga", "Berlin"} & {e.title for e in ex_a.entities}
    assert {e.title for e in ex_b.entities} >= {"Tomas Varga", "Berlin"}
    assert all(o.source_ids == ["src-b"] for o in ex_b.objects())
