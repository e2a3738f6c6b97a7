"""The single write path across the four stores, and the lock that keeps processes from tearing them.

An object is written to markdown, Chroma and the graph first and to DuckDB last; ids are
deterministic and every step is an upsert, so a writer that dies half-way leaves at worst files or
vectors without a DuckDB row, and re-running the same write completes it without duplicates.
`check_consistency` reports anything left out of step.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from smb_core.bank_check import SHOWN, check_whole_bank
from smb_core.embed import Embedder, embedder_name, get_embedder
from smb_core.fsutil import atomic_write_text
from smb_core.locking import BankLock
from smb_core.model import Edge, MemoryObject, SourceDocument, Status, by_agent, model_for, utcnow
from smb_core.recall.lexical import term_counts
from smb_core.settings import Settings, get_settings
from smb_core.stores.graph import GraphStore
from smb_core.stores.markdown import MarkdownStore
from smb_core.stores.metadata import MetadataStore, id_filter, indexed_objects
from smb_core.stores.vectors import VectorStore, legacy_vectors, vector_key

log = logging.getLogger(__name__)
#: `Bank.nearest` searches a filter's objects exactly when the index returns too few of them and they
#: are fewer than this (a type with few objects: insights, plans); more would be slower than the index.
EXACT_SEARCH_MAX = 20_000
#: Query vectors `Bank.nearest` looks up at once. Each may bring up to 64 x k texts and their objects,
#: and a global pass asks for every canonical concept (over 100,000 at 50,000 documents): all their
#: hits at once would be gigabytes.
NEAREST_BLOCK = 2_000
#: Texts whose objects `Bank.nearest` keeps per filter until the bank changes: expanding the 100 texts
#: nearest a question in DuckDB took 11-17 ms on the 6,119-passage bank, and names recur across questions.
EXPANSION_CACHE_SIZE = 50_000
#: The bank's DuckDB file, inside its folder.
DB_FILE = "metadata.duckdb"
#: What evolution sets on a layer-1 object, which extracting its document again keeps.
EVOLVED_FIELDS = ("status", "status_reason", "merged_into", "confidence", "reinforced_at", "disputed_by", "created")
#: Banks whose vector collection this process has checked for the per-object layout of older versions.
_VECTORS_CHECKED: set[Path] = set()


class LayerZeroImmutableError(PermissionError):
    """Layer 0 holds immutable source copies; a change is a new version, never an edit."""


def bank_exists(root: Path | str) -> bool:
    """Whether a bank was made in this folder (its DuckDB file is the commit record)."""
    return (Path(root) / DB_FILE).exists()


class EmbedderMismatchError(ValueError):
    """The bank's vectors come from another embedder than the one configured: the cosine between two
    models' vectors means nothing, so mixing them would quietly ruin recall and merging."""


class Bank:
    """Owns the four stores of one memory bank directory and the lock between processes."""

    def __init__(self, root: Path | str | None = None, settings: Settings | None = None,
                 embedder: Embedder | None = None) -> None:
        self.settings = settings or get_settings()
        self.root = Path(root or self.settings.memory_bank_dir).resolve()
        self.markdown = MarkdownStore(self.root)
        self.vectors = VectorStore(self.root / "chroma", self.settings.chroma_host, self.settings.chroma_port)
        self.graph = GraphStore(self.root / "graph", memory_limit=self.settings.duckdb_memory_limit)
        self.lock = BankLock(self.root / ".lock", timeout=self.settings.lock_timeout_seconds)
        self._embedder = embedder
        self._generation_seen: str | None = None
        self._vectors_maybe_unused: set[str] = set()  # see `_drop_unused_vectors`
        self._expansions: OrderedDict[tuple, list[tuple[str, str]]] = OrderedDict()  # see `_objects_by_key`
        self._db: MetadataStore | None = None
        self._embedder_checked = False

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder(self.settings)
        return self._embedder

    @property
    def db_path(self) -> Path:
        return self.root / DB_FILE

    # ---- sessions -------------------------------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[MetadataStore]:
        """A consistent read view: shared lock, a read-only DuckDB connection, fresh caches."""
        if self._db is not None:  # nested inside another session of this process
            yield self._db
            return
        self._upgrade_vectors()
        with self.lock.shared():
            self._refresh_if_changed()
            self._db = MetadataStore(self.db_path, read_only=True, memory_limit=self.settings.duckdb_memory_limit,
                                     writer_lock=self.lock.path)
            try:
                with self._db.naming_the_memory_limit():  # setting the limit can fail as memory does
                    self._check_embedder(self._db.connect())
                    yield self._db
            finally:
                self._db.close()
                self._db = None

    @contextmanager
    def writing(self) -> Iterator[MetadataStore]:
        """Exclusive write session; other processes see its effects once it ends. Its DuckDB writes are
        one transaction (DuckDB is the commit record): writes a caller groups in a session, like a
        cycle's verdicts and the claims leaving its backlog, land together or, if the run dies, not at
        all, so a re-run never finds half of them done. Nested sessions join the outer one."""
        if self._db is not None and not self._db.read_only:
            yield self._db
            return
        self._upgrade_vectors()
        with self.lock.exclusive():
            self._refresh_if_changed()
            self.markdown.create_layout()
            self._db = MetadataStore(self.db_path, memory_limit=self.settings.duckdb_memory_limit,
                                     wait_seconds=self.settings.lock_timeout_seconds).connect()
            try:
                with self._db.naming_the_memory_limit(), self._db.transaction():
                    self._check_embedder(self._db)
                    yield self._db
                self._delete_unused_vectors(self._db)
            finally:
                self._vectors_maybe_unused.clear()
                self._db.close()
                self._db = None
                self._bump_generation()

    def _check_embedder(self, db: MetadataStore) -> None:
        """The first write session records which embedder the bank's vectors come from; every session
        after that (once per handle) refuses another one, naming both."""
        if self._embedder_checked:
            return
        configured = self._embedder.name if self._embedder is not None else embedder_name(self.settings)
        recorded = db.sql("SELECT value FROM meta WHERE key = 'embedder'")
        if recorded and recorded[0][0] != configured:
            raise EmbedderMismatchError(
                f"the vectors of the bank at {self.root} come from the embedder {recorded[0][0]!r}, but "
                f"SMB_EMBEDDING_MODEL selects {configured!r}: set it back, or build a new bank with this one")
        if not recorded and not db.read_only:
            db.sql("INSERT INTO meta VALUES ('embedder', ?)", [configured])
            recorded = [(configured,)]
        self._embedder_checked = bool(recorded)

    def _upgrade_vectors(self) -> None:
        """Re-key a bank made when Chroma held one vector per object (collection `smb-memory`): each
        object's `embedding_id` becomes its text's key (row and file rewritten), each distinct text's
        vector is copied once, and the old collection is dropped last, so an interrupted upgrade starts
        again on the next session. Checked once per bank and process."""
        if self.root in _VECTORS_CHECKED or self._db is not None:
            return
        _VECTORS_CHECKED.add(self.root)
        legacy = legacy_vectors(self.vectors)
        if legacy is None:
            return
        log.warning("%s: storing one vector per distinct text instead of one per object (once for this bank)",
                    self.root)
        try:
            with self.writing() as db:
                ids = [r[0] for r in db.sql("SELECT id FROM objects ORDER BY id")]
                for start in range(0, len(ids), 5000):
                    objects = [o for o in db.get_objects(ids[start : start + 5000]).values()
                               if o.embedding_id != vector_key(o.text())]
                    old = legacy.get([o.embedding_id or o.id for o in objects])
                    vectors = [old.get(o.embedding_id or o.id) for o in objects]
                    lacking = [n for n, vector in enumerate(vectors) if vector is None]
                    for n, vector in zip(lacking, self.embedder.embed([objects[n].text() for n in lacking])):
                        vectors[n] = vector  # a text the old collection lacked
                    for obj in objects:
                        obj.embedding_id = vector_key(obj.text())
                    if objects:
                        self._store_vectors(objects, {o.embedding_id: v for o, v in zip(objects, vectors)})
                    for obj in objects:
                        self.markdown.write(obj)
                    db.upsert_objects(objects)
            legacy.drop()  # after the session has committed the new keys
        except BaseException:
            _VECTORS_CHECKED.discard(self.root)
            raise

    def init(self) -> None:
        with self.writing():
            pass

    @property
    def generation(self) -> str | None:
        """Changes whenever any process has written to the bank (as of this process's last session)."""
        return self._generation_seen

    def _generation_file(self) -> Path:
        return self.root / ".generation"

    def current_generation(self) -> str:
        """The bank's generation now, as the last write session of any process left it."""
        try:
            return self._generation_file().read_text()
        except FileNotFoundError:
            return "0"

    def _refresh_if_changed(self) -> None:
        current = self.current_generation()
        if current != self._generation_seen:
            self._expansions.clear()
            self.vectors.reload()  # the graph catches up on its own by replaying its log
            self._generation_seen = current

    def _bump_generation(self) -> None:
        value = str(int(self._generation_seen or "0") + 1)
        self._expansions.clear()
        atomic_write_text(self._generation_file(), value)
        self._generation_seen = value

    # ---- writes ---------------------------------------------------------------------------

    def add_sources(self, docs: Sequence[SourceDocument]) -> None:
        """Store new layer-0 versions. An existing version is never rewritten, only marked superseded."""
        if not docs:
            return
        with self.writing() as db:
            existing = {d.id: d for d in db.sources_by_ids([d.id for d in docs])}
            for doc in docs:
                old = existing.get(doc.id)
                if old is not None and old.sha256 != doc.sha256:
                    raise LayerZeroImmutableError(f"layer-0 document {doc.id} already exists with other content")
                if old is None or not self.markdown.exists(doc.file_path()):
                    self.markdown.write(doc)
            new = [d for d in docs if d.id not in existing]
            db.add_postings([(d.id, "source", term_counts(d.body)) for d in new])
            db.insert_sources(new)

    def add_source(self, doc: SourceDocument) -> None:
        self.add_sources([doc])

    def supersede_sources(self, old: Sequence[SourceDocument], run_id: str | None) -> int:
        """Mark old versions and everything extracted only from them superseded; returns objects touched."""
        if not old:
            return 0
        with self.writing() as db:
            old_ids = [d.id for d in old]
            db.con.execute("UPDATE sources SET status = 'superseded' WHERE id IN (SELECT unnest(?))", [old_ids])
            rows = db.sql("SELECT id FROM objects WHERE status = 'active' AND len(source_ids) = 1 "
                          "AND source IN (SELECT unnest(?))", [old_ids])
            objects = list(db.get_objects([r[0] for r in rows]).values())
            self.supersede(objects, run_id)
            return len(objects)

    def reconcile_extraction(self, found: Mapping[str, Sequence[MemoryObject]], version: str,
                             run_id: str | None) -> int:
        """Before documents extracted again ({source id: the objects that extraction found}; by a newer
        extractor, say) are written: an object found again keeps what evolution set on it (merged into a
        canonical object, its confidence, disputes), so that extracting again refreshes what was read from
        the text and undoes no merge. What it finds first (or again after it was superseded) waits in
        `cycle_objects` for the next evolution cycle (cycles take in new document versions: this is none).
        Active objects no longer found (a section heading read as a name, say) are superseded, never
        deleted. What an agent wrote or changed (its run is `agent:...`) stays as the agent left it.
        Returns how many were superseded."""
        if not found:
            return 0
        with self.writing() as db:
            where, params = indexed_objects("source", list(found), "id, type, data, layer, run_id")
            rows = db.sql(f"SELECT id, type, data, run_id FROM {where} WHERE layer = 1", params)
            stored = {i: (model_for(t).model_validate_json(data), run) for i, t, data, run in rows}
            first_found = []  # new to the bank: the next evolution cycle takes them in (`new_object_ids`)
            for obj in (o for objects in found.values() for o in objects):
                old, run = stored.pop(obj.id, (None, None))
                if old is None or old.status is Status.SUPERSEDED:
                    first_found.append((None, obj.id))
                    continue
                # an agent's object is kept whole, as the agent left it
                for name in type(obj).model_fields if by_agent(run) else EVOLVED_FIELDS:
                    if name in type(obj).model_fields:
                        setattr(obj, name, getattr(old, name))
            gone = [old for old, run in stored.values() if old.status is Status.ACTIVE
                    and len(old.source_ids) == 1 and not by_agent(run)]
            self.supersede(gone, run_id, reason=f"not extracted again by {version}")
            db.insert_rows("cycle_objects", ["cycle", "object_id"], first_found)
            return len(gone)

    def supersede(self, objects: Sequence[MemoryObject], run_id: str | None, reason: str = "") -> None:
        """Superseded, not deleted: each keeps its file and row; a relationship stops being an edge of the graph."""
        for obj in objects:
            obj.status, obj.modified, obj.run_id = Status.SUPERSEDED, utcnow(), run_id or obj.run_id
            obj.status_reason = reason or obj.status_reason
        with self.writing() as db:
            self._store_objects(db, objects)
            self.remove_edges([(e.head, e.tail, e.id) for e in _relationship_edges(objects)])

    def write(self, objects: Sequence[MemoryObject], edges: Sequence[Edge] = (), run_id: str | None = None,
              vectors: Mapping[str, np.ndarray] | None = None) -> None:
        """Put objects (and edges) into all four stores with shared ids. Embeds the texts Chroma lacks
        before taking the lock (inside a caller's session, the lock is already held: such a caller
        embeds first and passes `vectors`, {vector key: vector}, from `embed_new_texts` or
        `embed_objects`); a text still lacking a vector once the lock is held is embedded then."""
        for obj in objects:
            if isinstance(obj, SourceDocument) or obj.layer == 0:
                raise LayerZeroImmutableError("layer-0 documents are added with add_sources, never written")
            if run_id and not obj.run_id:
                obj.run_id = run_id
            obj.embedding_id = vector_key(obj.text())
            obj.graph_node_id = obj.id if obj.node is not None else None
        if vectors is None:
            vectors = self.embed_new_texts(objects)
        last = {o.id: n for n, o in enumerate(objects)}
        if len(last) < len(objects):  # the same id twice: every store keeps the last
            objects = [objects[n] for n in sorted(last.values())]
        with self.writing() as db:
            where, params = id_filter("id", list(last))
            replaced = {r[0] for r in db.sql(f"SELECT embedding_id FROM objects WHERE {where}", params)}
            self._store_vectors(objects, vectors)
            self._store_objects(db, objects)
            self._store_edges(db, [*_relationship_edges(objects), *edges], run_id)
            self._drop_unused_vectors(replaced - {o.embedding_id for o in objects})

    def embed_new_texts(self, objects: Sequence[MemoryObject]) -> dict[str, np.ndarray]:
        """{vector key: vector} of the objects' texts that Chroma does not hold yet, for `write`; a caller
        that writes inside its own session embeds with this first, outside the lock. A cycle rewrites
        many objects whose text is unchanged (a canonical entity given new members: 212 of the 371
        texts an incremental cycle wrote on the 3,000-passage bank); embedding those again was wasted."""
        return self._embed(self._texts_without_vector(objects))

    def embed_objects(self, objects: Sequence[MemoryObject],
                      embedder: Embedder | None = None) -> dict[str, np.ndarray]:
        """{vector key: vector} of all the objects' texts, for `write`, without asking Chroma
        (thread-safe, no lock: ingest embeds one batch while it writes the previous one), with the
        bank's embedder or another instance of it."""
        return self._embed(_text_by_key(objects), embedder)

    def _embed(self, text_of: Mapping[str, str], embedder: Embedder | None = None) -> dict[str, np.ndarray]:
        """{vector key: vector} for {vector key: text}."""
        return dict(zip(text_of, (embedder or self.embedder).embed(list(text_of.values()))))

    def _texts_without_vector(self, objects: Sequence[MemoryObject]) -> dict[str, str]:
        """{vector key: text} of the objects' texts whose vector Chroma does not hold."""
        text_of = _text_by_key(objects)
        present = self.vectors.existing(list(text_of))
        return {key: text for key, text in text_of.items() if key not in present}

    def vectors_of(self, object_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vector of each object (objects with the same text share one)."""
        if not object_ids:
            return {}
        with self.reading() as db:
            where, params = id_filter("id", sorted(set(object_ids)))
            keys = dict(db.sql(f"SELECT id, embedding_id FROM objects WHERE {where}", params))
        found = self.vectors.get(sorted(set(keys.values())))
        return {i: found[k] for i, k in keys.items() if k in found}

    def nearest(self, vectors: Sequence[np.ndarray], k: int, *, prefix: str = "", statuses: Sequence[str] = (),
                types: Sequence[str] = (), below: float | None = None, with_source: bool = False,
                over: int = 4) -> list[list[tuple]]:
        """The `k` objects nearest each vector, as (id, cosine similarity[, first source id]), best first
        and by id among equals. Chroma finds the nearest texts; DuckDB expands them to the objects with
        those texts that match the filters (id prefix, statuses, types), at most `k` per text, so that one
        name in thousands of documents cannot crowd out the rest. `below`: skip texts at least that
        similar (a caller that handles identical names by other means). The texts are fetched `over`
        times `k` at first, and again four times as many for vectors still short (up to 64 x k); a
        filter rarer than that (a type with few objects) is answered by exact search over its objects."""
        def hit(object_id: str, similarity: float, source: str) -> tuple:
            return (object_id, similarity, source) if with_source else (object_id, similarity)

        def best(row: list[tuple]) -> list[tuple]:
            return sorted(row, key=lambda r: (-r[1], r[0]))[:k]

        out: list[list[tuple]] = [[] for _ in vectors]
        short: list[int] = []
        for start in range(0, len(vectors), NEAREST_BLOCK):
            todo = list(range(start, min(start + NEAREST_BLOCK, len(vectors))))
            fetch = over * k
            while todo:
                hits = self.vectors.nearest([vectors[i] for i in todo], fetch)
                keys = sorted({key for found in hits for key, _ in found})
                objects = self._objects_by_key(keys, k, prefix, statuses, types) if keys else {}
                still_short = []
                for i, found in zip(todo, hits):
                    row = []
                    for key, similarity in found:
                        if below is not None and similarity >= below:
                            continue
                        row.extend(hit(object_id, similarity, source) for object_id, source in objects.get(key, ()))
                    out[i] = best(row)
                    if len(row) < k and len(found) == fetch:
                        still_short.append(i)
                if fetch >= 64 * k:
                    short += still_short
                    break
                todo, fetch = still_short, fetch * 4
        if short:
            rows = self._objects_by_key(None, k, prefix, statuses, types, limit=EXACT_SEARCH_MAX)
            if sum(map(len, rows.values())) < EXACT_SEARCH_MAX:
                stored = self.vectors.get(list(rows))
                keys = [key for key in rows if key in stored]
                matrix = np.stack([stored[key] for key in keys]) if keys else None
                for i in short:
                    scores = matrix @ vectors[i] if keys else []
                    out[i] = best([hit(object_id, float(s), source) for key, s in zip(keys, scores)
                                   if below is None or s < below for object_id, source in rows[key]])
        return out

    def _objects_by_key(self, keys: list[str] | None, k: int, prefix: str, statuses: Sequence[str],
                        types: Sequence[str], limit: int | None = None) -> dict[str, list[tuple[str, str]]]:
        """(id, first source) of the first `k` objects by id of each text (of these, or any) that pass
        the filters; with `limit`, the first texts of at most that many rows. The objects of given texts
        are kept until the bank changes (EXPANSION_CACHE_SIZE), except inside a write session."""
        if keys is not None and (self._db is None or self._db.read_only):
            with self.reading():  # a session first: it forgets what another process's write made stale
                flavour = (k, prefix, tuple(statuses), tuple(types))
                cached = {key: self._expansions.get((key, *flavour)) for key in keys}
                missing = [key for key, found in cached.items() if found is None]
                if missing:
                    fetched = self._query_objects_by_key(missing, k, prefix, statuses, types)
                    for key in missing:
                        cached[key] = self._expansions[(key, *flavour)] = fetched.get(key, [])
                    while len(self._expansions) > EXPANSION_CACHE_SIZE:
                        self._expansions.popitem(last=False)
                return {key: found for key, found in cached.items() if found}
        return self._query_objects_by_key(None, k, prefix, statuses, types, limit)

    def _query_objects_by_key(self, keys: list[str] | None, k: int, prefix: str, statuses: Sequence[str],
                              types: Sequence[str], limit: int | None = None) -> dict[str, list[tuple[str, str]]]:
        found, params = "objects", []
        if keys is not None:  # the texts' objects looked up first, then filtered
            found, params = indexed_objects("embedding_id", keys, "embedding_id, id, source, status, type")
        where = "true"
        if prefix:
            where, params = f"{where} AND starts_with(id, ?)", [*params, prefix]
        if statuses:  # list_contains, not IN (SELECT unnest(?)): no semi-join (3 of 9 ms for 100 texts)
            where, params = f"{where} AND list_contains(?, status)", [*params, list(statuses)]
        if types:
            where, params = f"{where} AND list_contains(?, type)", [*params, list(types)]
        with self.reading() as db:
            rows = db.sql(f"SELECT embedding_id, id, source FROM {found} "
                          f"WHERE {where} QUALIFY row_number() OVER (PARTITION BY embedding_id ORDER BY id) <= ? "
                          "ORDER BY id" + (f" LIMIT {int(limit)}" if limit else ""), [*params, k])
        out: dict[str, list[tuple[str, str]]] = {}
        for key, object_id, source in rows:
            out.setdefault(key, []).append((object_id, source))
        return out

    def _store_vectors(self, objects: Sequence[MemoryObject], vectors: Mapping[str, np.ndarray] | None = None) -> None:
        """Add the vectors of the objects' texts (keys in `embedding_id`) that Chroma does not hold yet:
        a text shared by many objects is stored once. `vectors` ({key: vector}) holds those embedded
        beforehand; any other text is embedded here."""
        if not objects:
            return
        new = self._texts_without_vector(objects)
        if not new:
            return
        found = {key: vectors[key] for key in new if vectors and key in vectors}
        found.update(self._embed({key: text for key, text in new.items() if key not in found}))
        self.vectors.upsert(list(new), np.stack([found[key] for key in new]))

    def _store_objects(self, db: MetadataStore, objects: Sequence[MemoryObject]) -> None:
        """Markdown, graph and DuckDB (last: its row is the commit record); vectors go first, by text."""
        if not objects:
            return
        for obj in objects:
            self.markdown.write(obj)
        self.graph.append(nodes=[(o.id, _node_attrs(o)) for o in objects if o.node is not None])
        db.upsert_objects(objects)

    def _store_edges(self, db: MetadataStore, edges: Sequence[Edge], run_id: str | None) -> None:
        if not edges:
            return
        self.graph.append(edges=[(e.head, e.tail, e.id, {"edge_type": e.edge_type.value, "weight": e.weight})
                                 for e in edges])
        db.upsert_edges((e.id, e.head, e.tail, e.edge_type.value, e.weight, e.object_id, run_id) for e in edges)

    def add_edges(self, edges: Sequence[Edge], run_id: str | None = None) -> None:
        if not edges:
            return  # no write session (and no wait for the lock) for nothing
        with self.writing() as db:
            self._store_edges(db, edges, run_id)

    def remove_edges(self, edges: Sequence[tuple[str, str, str]]) -> None:
        """Remove edges given as (head, tail, id) from the graph and DuckDB (used when redirecting them)."""
        if not edges:
            return
        with self.writing() as db:
            self.graph.append(remove_edges=edges)
            db.con.execute("DELETE FROM edges WHERE id IN (SELECT unnest(?))", [[e[2] for e in edges]])

    def update_objects(self, objects: Sequence[MemoryObject]) -> None:
        """Rewrite changed objects everywhere (status, fields). An object whose text changed gets the
        vector of its new text, and the old text's vector goes once no object has that text any more."""
        if not objects:
            return
        old_keys: set[str] = set()
        retexted = []
        for obj in objects:
            obj.modified = utcnow()
            key = vector_key(obj.text())
            if obj.embedding_id != key:
                if obj.embedding_id:
                    old_keys.add(obj.embedding_id)
                obj.embedding_id = key
                retexted.append(obj)
        with self.writing() as db:
            self._store_vectors(retexted)
            self._store_objects(db, objects)
            self._drop_unused_vectors(old_keys)

    def _drop_unused_vectors(self, keys: set[str]) -> None:
        """Mark the vectors of texts that objects of this session no longer have: those no object has
        once the session has committed are deleted then. Deleting them before would leave the objects
        without vectors if the session rolled back (a vector no object uses is only wasted space)."""
        self._vectors_maybe_unused.update(key for key in keys if key)

    def _delete_unused_vectors(self, db: MetadataStore) -> None:
        if not self._vectors_maybe_unused:
            return
        where, params = id_filter("embedding_id", sorted(self._vectors_maybe_unused))
        used = {r[0] for r in db.sql(f"SELECT DISTINCT embedding_id FROM objects WHERE {where}", params)}
        unused = self._vectors_maybe_unused - used
        if unused:
            self.vectors.delete(sorted(unused))

    # ---- layer-0 bookkeeping --------------------------------------------------------------

    def read_source_text(self, doc: SourceDocument) -> str:
        """The exact original text of a layer-0 version (its immutable copy's body)."""
        return self.markdown.read(doc.file_path()).body

    def record_rejections(self, rejections: Sequence[tuple[str, str, str, str | None]],
                          run_id: str | None) -> None:
        """(partition key, path, reason, fingerprint) of files that could not be ingested."""
        with self.writing() as db:
            db.insert_rows("rejections", ["partition_key", "path", "reason", "fingerprint", "run_id"],
                           [(*r, run_id) for r in rejections])

    def record_extractions(self, rows: Sequence[tuple[str, str, str, dict[str, int], str | None]]) -> None:
        """(source id, extractor version, extractor, counts per type, run id): these versions are extracted."""
        with self.writing() as db:
            db.insert_rows("extractions", ["source_id", "version", "extractor", "counts", "run_id"],
                           [(sid, version, name, json.dumps(counts), run) for sid, version, name, counts, run in rows],
                           replace=True)

    def set_document_names(self, names: Sequence[tuple[str, str, float]]) -> None:
        """(source id, name, weight) rows: what each document is about, for entity linking in recall."""
        with self.writing() as db:
            db.con.execute("DELETE FROM doc_names WHERE source_id IN (SELECT unnest(?))",
                           [sorted({n[0] for n in names})])
            db.insert_rows("doc_names", ["source_id", "name", "weight"], names)

    @staticmethod
    def extracted_sources(db: MetadataStore, source_ids: Sequence[str], version: str | None = None) -> set[str]:
        """Which of these documents were extracted by this extractor version (by any, without one)."""
        by_version, params = (" AND version = ?", [version]) if version else ("", [])
        rows = db.sql(f"SELECT source_id FROM extractions WHERE source_id IN (SELECT unnest(?)){by_version}",
                      [list(source_ids), *params])
        return {r[0] for r in rows}

    # ---- status ---------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Counts per type and per store, and whether the four stores agree (what `smb status` prints)."""
        report = self.check_consistency()
        with self.reading() as db:
            documents = db.sql("SELECT count(DISTINCT partition_key), count(*) FROM sources WHERE status='active'")[0]
            versions = db.sql("SELECT count(*) FROM sources")[0][0]
            rejected = db.sql("SELECT count(DISTINCT path) FROM rejections WHERE path NOT IN "
                              "(SELECT path FROM sources WHERE status = 'active')")[0][0]
            types = db.count_by_type()
            active = db.count_by_type(status="active")
            waiting = db.contradiction_backlog_size()
        return {
            "bank": str(self.root),
            "documents": documents[0],
            "versions": versions,
            "rejected": rejected,
            "types": types,
            "active": active,
            "claims_awaiting_contradiction_check": waiting,
            "stores": {
                "markdown": report["markdown_files"],
                "duckdb": report["duckdb_rows"],
                "chroma": report["chroma_vectors"],  # one vector per distinct text:
                "texts": report["distinct_texts"],
                "graph_nodes": report["graph_nodes"],
                "graph_edges": report["graph_edges"],
            },
            "consistent": report["consistent"],
            "changed_during_check": report["changed_during_check"],  # then the store counts were not compared
        }

    # ---- consistency ----------------------------------------------------------------------

    def check_consistency(self, object_ids: Sequence[str] | None = None) -> dict[str, Any]:
        """Compare the stores: every DuckDB object has its file, its text's vector and (if typed) graph node."""
        if object_ids is None:
            return check_whole_bank(self)
        with self.reading() as db:
            where, params = id_filter("id", list(object_ids))
            rows = db.sql(f"SELECT id, file_path, graph_node_id, embedding_id FROM objects WHERE {where}", params)
            found = {r[0] for r in rows}
            missing_files = [r[0] for r in rows if not (self.root / r[1]).is_file()]
            absent = self.graph.missing_nodes(r[2] for r in rows if r[2])  # a run's own: from the log's end
            missing_nodes = [r[0] for r in rows if r[2] in absent]
            keys = sorted({r[3] for r in rows if r[3]})
            in_chroma = self.vectors.existing(keys) if keys else set()
            missing_vectors = [r[0] for r in rows if r[3] not in in_chroma]
        report = {
            "checked": len(rows),
            "missing_markdown": missing_files[:SHOWN],
            "missing_vectors": missing_vectors[:SHOWN],
            "missing_graph_nodes": missing_nodes[:SHOWN],
            "missing_rows": [i for i in object_ids if i not in found][:SHOWN],
        }
        report["consistent"] = not (missing_files or missing_vectors or missing_nodes or report["missing_rows"])
        return report


def _node_attrs(obj: MemoryObject) -> dict[str, Any]:
    return {"type": obj.node.value, "mtype": obj.type.value, "title": obj.title[:200], "status": obj.status.value,
            "layer": obj.layer}


def _text_by_key(objects: Sequence[MemoryObject]) -> dict[str, str]:
    """{vector key: text} of the objects' distinct texts."""
    return {vector_key(text): text for text in (o.text() for o in objects)}


def _relationship_edges(objects: Sequence[MemoryObject]) -> list[Edge]:
    from smb_core.model import Relationship

    return [Edge(id=o.id, head=o.head, tail=o.tail, edge_type=o.edge_type, weight=o.confidence, object_id=o.id)
            for o in objects if isinstance(o, Relationship)]
