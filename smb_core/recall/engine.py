"""Hybrid recall: lexical (BM25), dense vectors and the knowledge graph, fused into one ranking.

Documents first: three retrievers each rank layer-0 documents; entity linking seeds the graph with
the entities the question names; one hop of propagation then follows the entities mentioned in the
best documents to the documents that describe them (the multi-hop step: "the director of film X"
reaches X's document lexically, and X's director's document through the graph). Objects are then
ranked inside and around the best documents, and every hit carries its sources, graph paths and
the contradictions that touch it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from smb_core.recall import lexical
from smb_core.recall.linking import Link, link_text

if TYPE_CHECKING:
    from smb_core.bank import Bank
    from smb_core.query import DocumentHit, Hit
    from smb_core.stores.metadata import MetadataStore

CANDIDATES = 100  # documents each retriever contributes
RRF_K = 60
SEED_DOCS = 6  # best documents whose entities are followed one hop
WEIGHTS = {"lexical": 1.0, "vector": 1.0, "link": 1.5, "bridge": 0.8}


def rrf(ranked: Sequence[str]) -> dict[str, float]:
    return {key: 1.0 / (RRF_K + rank) for rank, key in enumerate(ranked, start=1)}


class RecallEngine:
    def __init__(self, bank: Bank) -> None:
        self.bank = bank

    # ---- the three retrievers over documents ------------------------------------------------

    def lexical_documents(self, db: MetadataStore, question: str, k: int = CANDIDATES) -> list[tuple[str, float]]:
        return lexical.bm25(db, question, "source", k)

    def vector_documents(self, db: MetadataStore, question: str, k: int = CANDIDATES) -> list[tuple[str, float]]:
        """Documents ranked by their best-matching object (max cosine similarity)."""
        best: dict[str, float] = {}
        for object_id, similarity, source in self._vector_objects(question, 3 * k):
            if source and similarity > best.get(source, -1.0):
                best[source] = similarity
        return sorted(best.items(), key=lambda kv: -kv[1])[:k]

    def _vector_objects(self, question: str, k: int, type_: str | None = None) -> list[tuple[str, float, str]]:
        vector = self.bank.embedder.embed([question])[0]
        where = {"status": "active"} if type_ is None else {"$and": [{"status": "active"}, {"type": type_}]}
        return self.bank.vectors.query_with_source(vector, k, where)

    def linked_documents(self, db: MetadataStore, links: list[Link]) -> dict[str, float]:
        """Documents about (whose subject is) or mentioning an entity the question names."""
        if not links:
            return {}
        weight_of = {oid: link.weight for link in links for oid in link.object_ids}
        rows = db.sql(
            "SELECT o.id, unnest(o.source_ids), list_contains(o.tags, 'document-subject') FROM objects o "
            "WHERE o.id IN (SELECT unnest(?)) AND o.status = 'active'",
            [list(weight_of)],
        )
        scores: dict[str, float] = defaultdict(float)
        for object_id, source, is_subject in rows:
            scores[source] += weight_of[object_id] * (1.0 if is_subject else 0.25)
        return dict(scores)

    # ---- graph propagation ------------------------------------------------------------------

    def bridge_documents(self, db: MetadataStore, seeds: list[tuple[str, float]],
                         exclude: set[str]) -> tuple[dict[str, float], dict[str, list[str]]]:
        """One hop: entities named in the seed documents -> documents whose subject has that name."""
        if not seeds:
            return {}, {}
        seed_score = dict(seeds)
        rows = db.sql(
            """
            WITH mentioned AS (
                SELECT DISTINCT o.id AS entity, s.source_id AS seed, n.name
                FROM spans s JOIN objects o ON o.id = s.object_id JOIN names n ON n.object_id = o.id
                WHERE s.source_id IN (SELECT unnest($seeds)) AND o.type = 'entity' AND o.status = 'active'
                  AND NOT list_contains(o.tags, 'document-subject')
            ),
            described AS (
                SELECT n.name, o.id AS subject, unnest(o.source_ids) AS doc
                FROM names n JOIN objects o ON o.id = n.object_id
                WHERE list_contains(o.tags, 'document-subject') AND o.status = 'active'
                  AND n.name IN (SELECT name FROM mentioned)
            )
            SELECT m.seed, m.entity, d.subject, d.doc FROM mentioned m JOIN described d ON d.name = m.name
            WHERE d.doc <> m.seed
            """,
            {"seeds": [s for s, _ in seeds]},
        )
        scores: dict[str, float] = defaultdict(float)
        paths: dict[str, list[str]] = {}
        for seed, entity, subject, doc in rows:
            if doc in exclude:
                continue
            score = seed_score[seed]
            if score > scores[doc]:
                scores[doc] = score
                paths[doc] = [seed, entity, subject, doc]
        return dict(scores), paths

    # ---- fusion -----------------------------------------------------------------------------

    def rank_documents(self, db: MetadataStore, question: str) -> tuple[list[tuple[str, float]], dict]:
        lexical_hits = self.lexical_documents(db, question)
        vector_hits = self.vector_documents(db, question)
        links = link_text(db, question)
        linked = self.linked_documents(db, links)
        fused: dict[str, float] = defaultdict(float)
        for name, ranked in (("lexical", lexical_hits), ("vector", vector_hits)):
            for doc, score in rrf([d for d, _ in ranked]).items():
                fused[doc] += WEIGHTS[name] * score
        if linked:
            top_link = max(linked.values())
            for doc, score in linked.items():
                fused[doc] += WEIGHTS["link"] * (score / top_link) / (RRF_K + 1)
        seeds = sorted(fused.items(), key=lambda kv: -kv[1])[:SEED_DOCS]
        bridges, paths = self.bridge_documents(db, seeds, exclude=set())
        for doc, score in bridges.items():
            fused[doc] += WEIGHTS["bridge"] * score
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked, {"paths": paths, "links": links}

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
        """Objects ranked by their own match to the question, boosted by the rank of their document."""
        ranked_docs, info = self.rank_documents(db, question)
        doc_score = dict(ranked_docs[:20])
        top = max(doc_score.values(), default=1.0)
        candidates: dict[str, float] = defaultdict(float)
        for object_id, similarity, source in self._vector_objects(question, 4 * k + 40):
            candidates[object_id] = max(candidates[object_id], similarity)
        units = lexical.bm25_objects(db, question, list(doc_score), 10 * k)
        top_lex = max((s for _, s in units), default=1.0)
        for object_id, score in units:
            candidates[object_id] = max(candidates[object_id], 0.8 * score / top_lex)
        for link in info["links"]:
            for object_id in link.object_ids:
                candidates[object_id] = max(candidates[object_id], 0.7)
        graph_paths = self._graph_neighbours(info["links"], hops, edge_type, candidates)
        rows = db.sql(
            "SELECT id, type, source_ids FROM objects WHERE id IN (SELECT unnest(?)) AND status = 'active'",
            [list(candidates)],
        )
        scored = []
        for object_id, type_, source_ids in rows:
            if types and type_ not in types:
                continue
            boost = max((doc_score.get(s, 0.0) for s in source_ids), default=0.0) / top
            scored.append((object_id, candidates[object_id] * (0.5 + boost)))
        scored.sort(key=lambda kv: (-kv[1], kv[0]))
        return self._hits(db, scored[:k], graph_paths, doc_paths=info["paths"])

    def _graph_neighbours(self, links: list[Link], hops: int, edge_type: str | None,
                          candidates: dict[str, float]) -> dict[str, list[list[str]]]:
        """Objects within `hops` of the linked entities join the candidates, with the paths to them."""
        paths: dict[str, list[list[str]]] = defaultdict(list)
        if hops <= 0:
            return paths
        graph = self.bank.graph
        for link in links[:5]:
            for entity in link.object_ids[:5]:
                for path in graph.multi_hop(entity, max_hops=min(hops, 2), edge_type_filter=edge_type, limit=200):
                    target = path[-1]
                    decay = 0.6 ** (len(path) - 1)
                    candidates[target] = max(candidates.get(target, 0.0), 0.6 * decay)
                    if len(paths[target]) < 3:
                        paths[target].append(path)
        return paths

    def _hits(self, db: MetadataStore, scored: list[tuple[str, float]], graph_paths: dict,
              doc_paths: dict | None = None) -> list[Hit]:
        from smb_core.query import Hit, SourceRef

        objects = db.get_objects([i for i, _ in scored])
        source_ids = sorted({s for o in objects.values() for s in o.source_ids})
        sources = {d.id: d for d in db._sources("WHERE id IN (SELECT unnest(?))", [source_ids])}
        contradictions = self._contradictions(db, list(objects))
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

    def _contradictions(self, db: MetadataStore, object_ids: list[str]) -> dict[str, list]:
        """Contradiction objects that name any of these objects as one of their sides."""
        from smb_core.model import Contradiction

        rows = db.sql(
            "SELECT data FROM objects WHERE type = 'contradiction' AND "
            "list_has_any(derived_from, ?::VARCHAR[])",
            [object_ids],
        )
        out: dict[str, list] = defaultdict(list)
        for (data,) in rows:
            contradiction = Contradiction.model_validate_json(data)
            for claim_id in contradiction.claim_ids:
                if claim_id in object_ids:
                    out[claim_id].append(contradiction)
        return out
