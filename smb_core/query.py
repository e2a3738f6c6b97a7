"""The agent interface: read, search, recall and write the memory bank.

    from smb_core.query import MemoryBank
    with MemoryBank.open("memory-bank") as bank:
        for hit in bank.recall("Where was the designer of the Aurora index born?"):
            print(hit.score, hit.object.title, hit.source.path if hit.source else None)

Every call takes the bank's lock for its own duration only, so a Dagster run and other agents can
write between calls; each call sees the latest committed state and never a half-written one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from smb_core import model as _model
from smb_core.bank import Bank, LayerZeroImmutableError, bank_exists
from smb_core.evolve.confidence import propagate_disputes
from smb_core.model import (
    Contradiction, Edge, EdgeType, MemoryObject, ModelError, NodeType, SourceDocument, SourceSpan, Status,
    agent_run_id,
)
from smb_core.recall.engine import RecallEngine
from smb_core.settings import Settings, get_settings
from smb_core.stores.graph import multi_hop_over, neighbours_in, shortest_path_over


class QueryError(ValueError):
    """A question or argument the bank cannot answer as asked: an empty question, k below 1."""


def _check_question(text: str, k: int) -> None:
    """Refuse what used to return something anyway: an empty question got arbitrary hits, and a
    negative k all but the last k of them (Python's slice)."""
    if not text or not text.strip():
        raise QueryError("the question is empty")
    if k < 1:
        raise QueryError(f"k must be at least 1, got {k}")


#: Fields an agent may not change with `update`: identity, type and store bookkeeping.
_FROZEN_FIELDS = {"id", "type", "created", "embedding_id", "graph_node_id"}


class SourceRef(BaseModel):
    id: str
    path: str
    title: str
    span: SourceSpan | None = None


class Hit(BaseModel):
    """One recalled memory object with everything an agent needs to judge and cite it."""

    object: MemoryObject
    score: float
    source: SourceRef | None = None
    sources: list[SourceRef] = Field(default_factory=list)
    paths: list[list[str]] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)

    @property
    def disputed(self) -> bool:
        return any(c.resolution == "open" for c in self.contradictions) or bool(self.object.disputed_by)

    def as_json(self) -> dict[str, Any]:
        text = self.object.text()
        return {
            "id": self.object.id, "type": self.object.type.value, "title": self.object.title, "text": text,
            "score": round(self.score, 6), "confidence": self.object.confidence,
            "disputed": self.disputed, "disputed_by": self.object.disputed_by,
            "source": self.source.model_dump(mode="json") if self.source else None,
            "paths": self.paths,
            "contradictions": [
                {"id": c.id, "title": c.title, "claims": c.claim_ids, "resolution": c.resolution}
                for c in self.contradictions
            ],
        }


class DocumentHit(BaseModel):
    id: str
    path: str
    title: str
    score: float

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "title": self.title, "score": round(self.score, 6)}


class MemoryBank:
    """A handle on one memory bank. Cheap to open: stores load lazily on the first call that needs them."""

    def __init__(self, bank: Bank, read_only: bool = True, agent: str = "agent") -> None:
        self._bank = bank
        self.read_only = read_only
        self.agent = agent
        self._engine = RecallEngine(bank)

    @classmethod
    def open(cls, path: str | Path | None = None, read_only: bool = True, agent: str = "agent",
             settings: Settings | None = None) -> MemoryBank:
        settings = settings or get_settings()
        root = Path(path) if path is not None else Path(settings.memory_bank_dir)
        if read_only and not bank_exists(root):
            raise FileNotFoundError(f"no memory bank at {root} (run `smb ingest` or open with read_only=False)")
        bank = Bank(root, settings=settings)
        if not read_only:
            bank.init()
        return cls(bank, read_only=read_only, agent=agent)

    def __enter__(self) -> MemoryBank:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to flush: every write is committed when its call returns."""

    @property
    def root(self) -> Path:
        """The bank's folder."""
        return self._bank.root

    # ---- read -----------------------------------------------------------------------------

    def get(self, object_id: str) -> MemoryObject | None:
        with self._bank.reading() as db:
            return db.get_object(object_id)

    def list(self, type: str | None = None, status: str | None = None, layer: int | None = None,
             limit: int = 100, offset: int = 0) -> list[MemoryObject]:
        type = _model.memory_type(type).value if type is not None else None
        status = _model.object_status(status).value if status is not None else None
        with self._bank.reading() as db:
            return db.list_objects(type=type, status=status, layer=layer, limit=limit, offset=offset)

    def sources(self, status: str | None = None) -> list[SourceDocument]:
        with self._bank.reading() as db:
            return db.sources(status=status)

    def source_text(self, source_id: str) -> str:
        """The exact text of a layer-0 document version."""
        with self._bank.reading() as db:
            doc = db.get_source(source_id)
        if doc is None:
            raise KeyError(f"no source document {source_id}")
        return self._bank.read_source_text(doc)

    # ---- graph ----------------------------------------------------------------------------

    def neighbors(self, object_id: str, edge_type: str | None = None) -> list[dict[str, Any]]:
        """Adjacent nodes in both directions (read from DuckDB's edge table, which holds the graph's edges:
        no networkx graph of the whole bank is built for a hop)."""
        wanted = _model.edge_type(edge_type).value if edge_type else None
        with self._bank.reading() as db:
            return neighbours_in(db.edges_touching([object_id], wanted), object_id)

    def multi_hop(self, object_id: str, max_hops: int = 3, edge_type: str | None = None) -> list[list[str]]:
        """Every simple path of 1..max_hops edges from the object, breadth first (one query per hop)."""
        with self._bank.reading() as db:
            found = multi_hop_over(db.edges_touching, [object_id], max_hops=max_hops, edge_type_filter=edge_type)
        return found[object_id]

    def path(self, a: str, b: str) -> list[str]:
        """A shortest path between two objects ignoring direction, or [] (over DuckDB's edge table)."""
        with self._bank.reading() as db:
            if a == b:
                return [a] if db.object_summaries([a]) else []
            return shortest_path_over(db.edges_touching, a, b)

    def nodes_by_type(self, type_: str | NodeType) -> list[str]:
        """Graph nodes of one node type, sorted (from DuckDB: the objects whose model has that node type)."""
        wanted = _model.node_type(type_)
        types = [t.value for t, model in _model.MODEL_BY_TYPE.items() if model.node is wanted]
        with self._bank.reading() as db:
            return db.graph_nodes_of_types(types)

    def graph_stats(self) -> dict[str, Any]:
        with self._bank.reading():
            return self._bank.graph.stats()

    # ---- search and recall ----------------------------------------------------------------

    def search(self, text: str, k: int = 10, type: str | None = None) -> list[Hit]:
        """Vector search over memory objects (active ones), optionally of one type."""
        _check_question(text, k)
        type = _model.memory_type(type).value if type is not None else None
        with self._bank.reading() as db:
            return self._engine.vector_hits(db, text, k, type)

    def recall(self, question: str, k: int = 10, hops: int = 2, edge_type: str | None = None,
               types: Sequence[str] | None = None) -> list[Hit]:
        """Hybrid recall: lexical + vector + knowledge graph (entity linking and propagation), fused.
        Each hit carries its sources and spans, the graph paths that brought it, and contradictions."""
        _check_question(question, k)
        if edge_type is not None:
            _model.edge_type(edge_type)
        types = [_model.memory_type(t).value for t in types] if types else types
        with self._bank.reading() as db:
            return self._engine.recall(db, question, k=k, hops=hops, edge_type=edge_type, types=types)

    def recall_documents(self, question: str, k: int = 8) -> list[DocumentHit]:
        """The layer-0 documents behind the best evidence for `question`, best first."""
        _check_question(question, k)
        with self._bank.reading() as db:
            return self._engine.recall_documents(db, question, k=k)

    def contradictions(self, resolution: str | None = None) -> list[dict[str, Any]]:
        """Every contradiction with both sides (statement, source path, span) and its lifecycle state."""
        if resolution is not None:
            _model.resolution(resolution)
        with self._bank.reading() as db:
            found = [c for c in db.list_objects(type="contradiction", limit=1_000_000)
                     if resolution is None or c.resolution == resolution]
            claims = db.get_objects(sorted({i for c in found for i in c.claim_ids}))
            sources = {d.id: d for d in db.sources_by_ids(sorted({s for o in claims.values() for s in o.source_ids}))}
        out = []
        for c in found:
            sides = []
            for claim_id in c.claim_ids:
                claim = claims.get(claim_id)
                source = sources.get(claim.source_ids[0]) if claim and claim.source_ids else None
                span = claim.source_spans[0].model_dump() if claim and claim.source_spans else None
                sides.append({"id": claim_id, "statement": claim.text() if claim else None,
                              "source": {"id": source.id, "path": source.path, "title": source.title, "span": span}
                              if source else None})
            out.append({"id": c.id, "title": c.title, "attribute": c.attribute, "resolution": c.resolution,
                        "confidence": c.confidence, "sides": sides})
        return out

    # ---- write ----------------------------------------------------------------------------

    def _writable(self) -> None:
        if self.read_only:
            raise PermissionError("this MemoryBank was opened read-only; use MemoryBank.open(..., read_only=False)")

    def _run_id(self) -> str:
        return agent_run_id(self.agent)

    def create(self, obj: MemoryObject) -> MemoryObject:
        """Add a new memory object (any layer but 0) to all four stores. Its id must be new (`update`
        changes an object: a create must never replace one, a contradiction least of all), and every id
        it names (what it derives from, its sides, members or citations, its sources) must be in the bank."""
        self._writable()
        if obj.layer == 0:
            raise LayerZeroImmutableError("layer 0 is written only by ingestion")
        with self._bank.reading() as db:
            taken = db.object_summaries([obj.id])
            if taken:
                raise ModelError(f"{obj.id} already exists (a {taken[0][1]}); change it with update()")
            self._require_existing(db, obj, obj.references())
        obj.run_id = obj.run_id or self._run_id()
        self._bank.write([obj], run_id=obj.run_id)
        if isinstance(obj, Contradiction):
            propagate_disputes(self._bank)
        return obj

    def update(self, object_id: str, **fields: Any) -> MemoryObject:
        """Change fields of an object; it is re-embedded when its text changes."""
        self._writable()
        frozen = _FROZEN_FIELDS & fields.keys()
        if frozen:
            raise ModelError(f"fields {sorted(frozen)} cannot be changed")
        current = self._existing(object_id)
        if isinstance(current, Contradiction) and any(
                fields[name] != getattr(current, name) for name in ("status", "claim_ids") if name in fields):
            raise ModelError(f"{object_id}: a contradiction keeps its sides and is never deprecated; "
                             "settle it with resolve()")
        try:
            updated = type(current).model_validate({**current.model_dump(), **fields, "run_id": self._run_id()})
        except ValidationError as exc:
            raise ModelError(f"invalid update of {object_id}: {exc}") from None
        with self._bank.reading() as db:
            self._require_existing(db, updated, updated.references() - current.references())
        self._bank.update_objects([updated])
        if isinstance(updated, Contradiction) and updated.resolution != current.resolution:
            propagate_disputes(self._bank)  # flags follow the contradiction's lifecycle at once
        return updated

    def resolve(self, contradiction_id: str, resolution: str, explanation: str) -> Contradiction:
        """Settle a contradiction as 'explained' or 'superseded' (or reopen it with 'open'). It stays in
        the bank for good; the dispute flags it put on derived objects are cleared (or set again)."""
        current = self._existing(contradiction_id)
        if not isinstance(current, Contradiction):
            raise ModelError(f"{contradiction_id} is not a contradiction (it is a {current.type.value})")
        _model.resolution(resolution)
        return self.update(contradiction_id, resolution=resolution, explanation=explanation)

    def _existing(self, object_id: str) -> MemoryObject:
        current = self.get(object_id)
        if current is not None:
            return current
        with self._bank.reading() as db:
            if db.get_source(object_id) is not None:
                raise LayerZeroImmutableError(f"{object_id} is a layer-0 document, which cannot be changed")
        raise KeyError(f"no memory object {object_id}")

    @staticmethod
    def _require_existing(db, obj: MemoryObject, ids: set[str]) -> None:
        named = sorted(ids)
        found = {r[0] for r in db.object_summaries(named)} | {d.id for d in db.sources_by_ids(named)}
        missing = [i for i in named if i not in found]
        if missing:
            raise ModelError(f"{obj.id} names {len(missing)} id(s) that are not in the bank: "
                             f"{', '.join(missing[:10])}")

    def link(self, a: str, b: str, edge_type: str | EdgeType, weight: float = 1.0) -> Edge:
        """Add a typed edge between two existing objects."""
        self._writable()
        kind = _model.edge_type(edge_type)
        with self._bank.reading() as db:
            found = db.get_objects([a, b])
        missing = [i for i in (a, b) if i not in found]
        if missing:
            raise KeyError(f"cannot link: no memory object {', '.join(missing)}")
        edge = Edge.between(a, b, kind, weight)
        self._bank.add_edges([edge], run_id=self._run_id())
        return edge

    def deprecate(self, object_id: str, reason: str) -> MemoryObject:
        """Mark knowledge deprecated (never deleted); contradictions cannot be deprecated away."""
        current = self.get(object_id)
        if isinstance(current, Contradiction):
            raise ModelError("contradictions are never deprecated; set resolution to 'explained' or 'superseded'")
        return self.update(object_id, status=Status.DEPRECATED, status_reason=reason)

    def remember(self, text: str, title: str | None = None, tags: Sequence[str] = ()) -> SourceDocument:
        """Store an agent's note as a layer-0 document and extract it like any document.
        Its provenance names the agent; the note itself is immutable afterwards."""
        self._writable()
        from smb_core.ingest import remember_note

        return remember_note(self._bank, text, title=title, tags=list(tags), agent=self.agent)

