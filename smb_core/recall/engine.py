"""Hybrid recall: lexical (BM25), dense vectors and the knowledge graph, fused into one ranking.

Documents first: three retrievers each rank layer-0 documents; entity linking seeds the graph with
the entities the question names; one hop of propagation then follows the entities mentioned in the
best documents to the documents that describe them (the multi-hop step: "the director of film X"
reaches X's document lexically, and X's director's document through the graph). Objects are then
ranked inside and around the best documents, and every hit carries its sources, graph paths and
the contradictions that touch it.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from smb_core.recall.lexical import tokenize
from smb_core.recall.linking import Link, link_text
from smb_core.recall.names import NameIndex, sentence_spans
from smb_core.stores.graph import multi_hop_over
from smb_core.stores.metadata import indexed_objects

if TYPE_CHECKING:
    from smb_core.bank import Bank
    from smb_core.query import DocumentHit, Hit
    from smb_core.stores.metadata import MetadataStore

CANDIDATES = 200  # documents each retriever contributes to the fusion
#: The dense retriever's share: past rank 100 an RRF term is under 1/160, and fetching vectors with
#: their metadata was a third of a query's time.
VECTOR_CANDIDATES = 100
RRF_K = 60
SEED_WEIGHT = 5.0  # documents the question names come first...
BRIDGE_WEIGHT = 4.0  # ...then the documents their relevant sentences point to, then the fused rest
#: Specificity (summed IDF) a name needs to count as a link, and where its strength saturates, as
#: multiples of the IDF of a word found in one document only (ln N): the bar scales with the bank.
MIN_SPECIFICITY = 0.46
SPECIFICITY_SATURATION = 1.15
LOWER_CASE_PENALTY = 0.5
#: Documents whose claim vectors a recall engine keeps (about 60 KB each on the 10,000-document bank).
CLAIM_CACHE_DOCUMENTS = 1024
#: Sentences without a claim whose vectors one query embeds for the hop (see `_sentence_context`).
CONTEXT_EMBED_MAX = 8
OBJECT_DOCUMENTS = 8  # objects are drawn from this many best documents (plus vector and graph hits)
#: Weight of the words a mentioning sentence shares with what the question asks ("directed" for
#: "director"), compared by their first STEM_LENGTH letters, a crude stemmer that needs no model.
SHARED_WORDS_WEIGHT = 0.2
STEM_LENGTH = 6
GRAPH_BONUS = 0.05  # a small lift for objects the graph reaches from entities the question names
#: Statements answer questions better than bare names; relationships are statements with a type.
TYPE_PRIOR = {"claim": 1.0, "relationship": 0.95, "contradiction": 1.0, "entity": 0.9, "canonical_entity": 0.9,
              "concept": 0.8, "canonical_concept": 0.8}


def stems(text: str) -> set[str]:
    """The words of `text` cut to their first STEM_LENGTH letters."""
    return {word[:STEM_LENGTH] for word in tokenize(text)}


def rrf(ranked: Sequence[str]) -> dict[str, float]:
    return {key: 1.0 / (RRF_K + rank) for rank, key in enumerate(ranked, start=1)}


class RecallEngine:
    def __init__(self, bank: Bank) -> None:
        self.bank = bank
        self._names: NameIndex | None = None
        self._claims: OrderedDict[str, np.ndarray] = OrderedDict()  # see `_claim_vectors`
        self._generation: str | None = None  # of the bank when the two were read

    def _forget_if_changed(self) -> None:
        """Drop what was read from the bank (name index, claim vectors) once another write changed it."""
        if self._generation != self.bank.generation:
            self._names, self._generation = None, self.bank.generation
            self._claims.clear()

    def names(self, db: MetadataStore) -> NameIndex:
        """The in-memory name index, rebuilt when another write has changed the bank."""
        self._forget_if_changed()
        if self._names is None:
            self._names = NameIndex(db)
        return self._names

    # ---- the three retrievers over documents ------------------------------------------------

    def lexical_documents(self, db: MetadataStore, question: str, k: int = CANDIDATES) -> list[tuple[str, float]]:
        return self.names(db).documents.search(question, k)

    def vector_documents(self, db: MetadataStore, question: str, k: int = CANDIDATES) -> list[tuple[str, float]]:
        """Documents ranked by their best-matching object (max cosine similarity)."""
        return self._vector_documents(self.bank.embedder.embed([question])[0], k)

    def _vector_documents(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        best: dict[str, float] = {}
        # A mention merged into a canonical object, or a concept split into senses, still says what its
        # document is about; only superseded and deprecated objects are left out.
        live = ("active", "merged", "split")
        for _, similarity, source in self.bank.nearest([vector], k, statuses=live, with_source=True, over=1)[0]:
            if source and similarity > best.get(source, -1.0):
                best[source] = similarity
        return sorted(best.items(), key=lambda kv: -kv[1])[:k]

    def _vector_objects(self, question: str, k: int, type_: str | None = None) -> list[tuple[str, float, str]]:
        vector = self.bank.embedder.embed([question])[0]
        return self.bank.nearest([vector], k, statuses=("active",), types=(type_,) if type_ else (),
                                 with_source=True, over=4 if type_ else 1)[0]

    # ---- linking and one-hop bridges -----------------------------------------------------------

    def link_question(self, db: MetadataStore, question: str) -> tuple[dict[str, float], str, list[str]]:
        """Seed documents: those whose name the question contains, with a strength in (0, 1]; and the
        residual question (the names removed), which says what is asked about them."""
        index = self.names(db)
        matches, tokens = index.find(question)
        has_upper = any(ch.isupper() for ch in question)
        seeds: dict[str, float] = {}
        spans: list[tuple[int, int]] = []
        for match in matches:
            strength = index.specificity(match.name) * match.weight
            original = " ".join(w for w, _ in tokens[match.start : match.end])
            if has_upper and not any(ch.isupper() for ch in original):
                strength *= LOWER_CASE_PENALTY  # a lower-case phrase in a capitalised question is rarely a name
            if strength < MIN_SPECIFICITY * index.rare:
                continue
            seeds[match.source_id] = max(seeds.get(match.source_id, 0.0), strength)
            spans.append((match.start, match.end))
        residual = " ".join(w for i, (w, _) in enumerate(tokens) if not any(a <= i < b for a, b in spans))
        saturation = SPECIFICITY_SATURATION * index.rare
        return ({d: min(1.0, s / saturation) for d, s in seeds.items()}, residual,
                sorted({m.name for m in matches}))

    def bridges(self, db: MetadataStore, seeds: dict[str, float],
                residual: np.ndarray, residual_text: str = "") -> tuple[dict[str, float], dict[str, list[str]]]:
        """One hop from each seed document along the names its sentences mention (exactly, or as a
        named entity covering most of a longer name), scored by how well the mentioning sentence and
        the target document match what the question asks."""
        if not seeds:
            return {}, {}
        index = self.names(db)
        spans = db.spans_of_sources(sorted(seeds))
        objects = {oid: (kind, status, title)
                   for oid, kind, status, title in db.object_summaries(sorted({s[2] for s in spans}))}
        mentions, claims = [], []  # the seeds' entity mentions (any status) and active claims
        for source, start, object_id in spans:
            kind, status, title = objects.get(object_id, ("", "", ""))
            if kind == "entity":
                mentions.append((source, start, title))
            elif kind == "claim" and status == "active":
                claims.append((source, start, object_id))
        texts = {d.id: self.bank.read_source_text(d) for d in db.sources_by_ids(sorted(seeds))}
        edges = []  # (seed, sentence, target, edge weight)
        for seed, text in texts.items():
            entities = [(start, title) for source, start, title in mentions if source == seed]
            for start, end in sentence_spans(text):
                found, _ = index.find(text[start:end], exclude=seed)
                found = [m for m in found if index.specificity(m.name) >= MIN_SPECIFICITY * index.rare]
                edges.extend((seed, (start, end), m.source_id, m.weight) for m in found)
                linked = {m.name for m in found}
                for _, title in (e for e in entities if start <= e[0] < end):
                    for target, weight in index.partial(title, exclude=seed, skip=linked):
                        edges.append((seed, (start, end), target, weight))
        if not edges:
            return {}, {}
        strength: dict[tuple[str, tuple[int, int]], float] = {}  # how much each sentence can add
        for seed, sentence, _, weight in edges:
            strength[(seed, sentence)] = max(strength.get((seed, sentence), 0.0), seeds[seed] * weight)
        context_of = self._sentence_context(strength, claims, texts, residual)
        asked = stems(residual_text)
        if asked:
            for seed, (start, end) in context_of:
                shared = len(asked & stems(texts[seed][start:end])) / len(asked)
                context_of[(seed, (start, end))] += SHARED_WORDS_WEIGHT * shared
        own = self._document_similarity(db, sorted({e[2] for e in edges}), residual)
        scores: dict[str, float] = {}
        paths: dict[str, list[str]] = {}
        for seed, sentence, target, weight in edges:
            context = context_of[(seed, sentence)]
            value = seeds[seed] * weight * (context + max(0.0, own.get(target, 0.0)))
            if value > scores.get(target, 0.0):
                scores[target], paths[target] = value, [seed, target]
        top = max(scores.values(), default=0.0)
        return ({d: v / top for d, v in scores.items()} if top > 0 else {}), paths

    def _sentence_context(self, sentences: dict[tuple[str, tuple[int, int]], float], claims: list[tuple[str, int, str]],
                          texts: dict[str, str], residual: np.ndarray) -> dict[tuple[str, tuple[int, int]], float]:
        """How well each (document, sentence span) matches what the question asks: the best cosine of
        the claims (source, start, id) extracted from that sentence, whose vectors are already stored;
        only sentences that yielded no claim are embedded now (embedding them all cost most of a
        query's time), the CONTEXT_EMBED_MAX strongest of them (`sentences` maps each to the most its
        edges can add); the rest count 0. At 10,000 documents the slowest queries spent most of their
        time embedding such sentences of long generated documents (up to 24 a query)."""
        wanted = {seed for seed, _ in sentences}
        claims = [c for c in claims if c[0] in wanted]
        vectors = self.bank.vectors_of([c[2] for c in claims])
        claims_by_seed: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for source, start, claim_id in claims:
            if claim_id in vectors:
                claims_by_seed[source].append((start, claim_id))
        out: dict[tuple[str, tuple[int, int]], float] = {}
        missing = []
        for seed, (start, end) in sorted(sentences):
            inside = [vectors[c] for s, c in claims_by_seed[seed] if start <= s < end]
            if inside:
                out[(seed, (start, end))] = max(0.0, max(float(v @ residual) for v in inside))
            else:
                missing.append((seed, (start, end)))
        missing = sorted(missing, key=lambda key: (-sentences[key], key))
        for key in missing[CONTEXT_EMBED_MAX:]:
            out[key] = 0.0
        missing = missing[:CONTEXT_EMBED_MAX]
        if missing:
            embedded = self.bank.embedder.embed([texts[seed][a:b] for seed, (a, b) in missing])
            for key, vector in zip(missing, embedded):
                out[key] = max(0.0, float(vector @ residual))
        return out

    def _document_similarity(self, db: MetadataStore, source_ids: list[str], vector: np.ndarray) -> dict[str, float]:
        """Best cosine between `vector` and the claims of each document (its dense score)."""
        return {source: float((matrix @ vector).max())
                for source, matrix in self._claim_vectors(db, source_ids).items() if len(matrix)}

    def _claim_vectors(self, db: MetadataStore, source_ids: list[str]) -> dict[str, np.ndarray]:
        """The vectors of each document's active claims, one row per claim.

        Kept for the CLAIM_CACHE_DOCUMENTS documents asked about last, until the bank changes: the hop
        keeps reaching the same documents (the subjects of many questions), and reading their claims
        cost a third of a query at 10,000 documents (a scan of the objects table, then the vectors)."""
        self._forget_if_changed()
        missing = [s for s in source_ids if s not in self._claims]
        if missing:
            found, params = indexed_objects("source", missing, "embedding_id, source, id, type, status")
            rows = db.sql(f"SELECT embedding_id, source FROM {found} WHERE type = 'claim' AND status = 'active' "
                          "ORDER BY id", params)
            vectors = self.bank.vectors.get([r[0] for r in rows])
            rows_of: dict[str, list[np.ndarray]] = defaultdict(list)
            for key, source in rows:
                if key in vectors:
                    rows_of[source].append(vectors[key])
            for source in missing:
                self._claims[source] = (np.stack(rows_of[source]) if rows_of[source]
                                        else np.zeros((0, self.bank.embedder.dim), dtype=np.float32))
        found = {source: self._claims[source] for source in source_ids}
        for source in source_ids:
            self._claims.move_to_end(source)
        while len(self._claims) > CLAIM_CACHE_DOCUMENTS:
            self._claims.popitem(last=False)
        return found

    # ---- fusion -----------------------------------------------------------------------------

    def rank_documents(self, db: MetadataStore, question: str) -> tuple[list[tuple[str, float]], dict]:
        """Fused lexical+dense score (best = 1), plus SEED_WEIGHT x seed strength for documents the
        question names, plus BRIDGE_WEIGHT x the squared bridge score for documents one hop from them
        (squared so that only a clearly fitting bridge outranks a strong direct match; never more than
        the hop's seed got, and no hop for a question that is only a name)."""
        vector = self.bank.embedder.embed([question])[0]
        lexical_hits = self.lexical_documents(db, question, CANDIDATES)
        vector_hits = self._vector_documents(vector, VECTOR_CANDIDATES)
        fused: dict[str, float] = defaultdict(float)
        for ranked in (lexical_hits, vector_hits):
            for doc, score in rrf([d for d, _ in ranked]).items():
                fused[doc] += score
        top = max(fused.values(), default=1.0)
        scores = {d: s / top for d, s in fused.items()}
        seeds, residual_text, names = self.link_question(db, question)
        for doc, strength in seeds.items():
            scores[doc] = scores.get(doc, 0.0) + SEED_WEIGHT * strength
        residual = self.bank.embedder.embed([residual_text])[0] if residual_text and seeds else vector
        asks = bool(residual_text.strip(" ?!.,'\""))  # a bare name asks nothing a hop could answer
        bridge, paths = self.bridges(db, seeds, residual, residual_text) if asks else ({}, {})
        for doc, value in bridge.items():
            # a hop adds at most what its seed got: scaled to the question's best hop, the best hop from a
            # weakly named seed (a name many documents use) outranked the very document the question names
            scores[doc] = scores.get(doc, 0.0) + min(BRIDGE_WEIGHT * value ** 2, SEED_WEIGHT * seeds[paths[doc][0]])
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked, {"paths": paths, "seeds": seeds, "names": names, "vector": vector, "residual": residual}

    def recall_documents(self, db: MetadataStore, question: str, k: int = 8) -> list[DocumentHit]:
        from smb_core.query import DocumentHit

        ranked, _ = self.rank_documents(db, question)
        ranked = ranked[:k]
        sources = {d.id: d for d in db._sources("WHERE id IN (SELECT unnest(?))", [[d for d, _ in ranked]])}
        return [DocumentHit(id=d, path=sources[d].path, title=sources[d].title, score=s)
                for d, s in ranked if d in sources]

    # ---- objects ------------------------------------------------------------------------------

    def vector_hits(self, db: MetadataStore, question: str, k: int, type_: str | None) -> list[Hit]:
        found = self._vector_objects(question, k, type_)
        return self._hits(db, [(object_id, score) for object_id, score, _ in found], {})

    def recall(self, db: MetadataStore, question: str, k: int = 10, hops: int = 2, edge_type: str | None = None,
               types: Sequence[str] | None = None) -> list[Hit]:
        """Objects ranked by how well they answer the question (or what it asks about the things it
        names), weighted by the rank of their document, plus graph neighbours of the named entities."""
        ranked_docs, info = self.rank_documents(db, question)
        top_docs = dict(ranked_docs[:OBJECT_DOCUMENTS])
        best_doc = max(top_docs.values(), default=1.0) or 1.0
        candidates = set(db.object_ids_for_sources(list(top_docs), "status = 'active' AND layer >= 1"))
        nearest = self.bank.nearest([info["vector"]], 2 * k + 20, statuses=("active",), over=1)[0]
        candidates.update(object_id for object_id, _ in nearest)
        links = link_text(db, question, documents=self.names(db).documents)
        graph_paths = self._graph_neighbours(db, links, hops, edge_type)
        candidates.update(graph_paths)
        found, params = indexed_objects("id", sorted(candidates), "id, type, source_ids, embedding_id, status")
        rows = db.sql(f"SELECT id, type, source_ids, embedding_id FROM {found} WHERE status = 'active'", params)
        rows = [r for r in rows if not types or r[1] in types]
        vectors = self.bank.vectors.get([r[3] for r in rows])
        scored = []
        for object_id, type_, source_ids, key in rows:
            vector = vectors.get(key)
            if vector is None:
                continue
            similarity = max(float(vector @ info["vector"]), float(vector @ info["residual"]))
            document = max((top_docs.get(s, 0.0) for s in source_ids), default=0.0) / best_doc
            graph = GRAPH_BONUS if object_id in graph_paths else 0.0
            scored.append((object_id, TYPE_PRIOR.get(type_, 0.9) * similarity * (0.5 + 0.5 * document) + graph))
        scored.sort(key=lambda kv: (-kv[1], kv[0]))
        return self._hits(db, scored[:k], graph_paths, doc_paths=info["paths"])

    def _graph_neighbours(self, db: MetadataStore, links: list[Link], hops: int,
                          edge_type: str | None) -> dict[str, list[list[str]]]:
        """Objects within `hops` of the entities the question names, with the paths that reach them
        (hops over DuckDB's edge table: a recall never loads the whole graph)."""
        paths: dict[str, list[list[str]]] = defaultdict(list)
        if hops <= 0:
            return paths
        seeds = [entity for link in links[:5] for entity in link.object_ids[:5]]
        found = multi_hop_over(db.edges_touching, list(dict.fromkeys(seeds)), max_hops=hops,
                               edge_type_filter=edge_type, limit=200)
        for entity in seeds:
            for path in found[entity]:
                if len(paths[path[-1]]) < 3:
                    paths[path[-1]].append(path)
        return paths

    def _hits(self, db: MetadataStore, scored: list[tuple[str, float]], graph_paths: dict,
              doc_paths: dict | None = None) -> list[Hit]:
        from smb_core.query import Hit, SourceRef

        objects = db.get_objects([i for i, _ in scored])
        source_ids = sorted({s for o in objects.values() for s in o.source_ids})
        sources = {d.id: d for d in db._sources("WHERE id IN (SELECT unnest(?))", [source_ids])}
        contradictions = self._contradictions(db, objects)
        hits = []
        for object_id, score in scored:
            obj = objects.get(object_id)
            if obj is None:
                continue
            refs = []
            for source_id in obj.source_ids:
                doc = sources.get(source_id)
                if doc is not None:
                    span = next((s for s in obj.source_spans if s.source_id == source_id), None)
                    refs.append(SourceRef(id=doc.id, path=doc.path, title=doc.title, span=span))
            paths = list(graph_paths.get(object_id, []))
            for ref in refs:
                if doc_paths and ref.id in doc_paths:
                    paths.append(doc_paths[ref.id])
            hits.append(Hit(object=obj, score=score, source=refs[0] if refs else None, sources=refs, paths=paths,
                            contradictions=contradictions.get(object_id, [])))
        return hits

    def _contradictions(self, db: MetadataStore, objects: dict) -> dict[str, list]:
        """Contradictions that name an object as one of their sides, or that dispute something the
        object derives from (its `disputed_by`, kept up to date by `smb_core.evolve.confidence`)."""
        from smb_core.model import Contradiction

        object_ids = list(objects)
        disputing = sorted({c for o in objects.values() for c in o.disputed_by})
        rows = db.sql(
            "SELECT data FROM objects WHERE type = 'contradiction' AND "
            "(list_has_any(derived_from, ?::VARCHAR[]) OR id IN (SELECT unnest(?::VARCHAR[])))",
            [object_ids, disputing],
        )
        found = [Contradiction.model_validate_json(data) for (data,) in rows]
        out: dict[str, list] = defaultdict(list)
        for object_id, obj in objects.items():
            out[object_id] = [c for c in found if object_id in c.claim_ids or c.id in obj.disputed_by]
        return out
