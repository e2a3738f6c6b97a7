"""The vector store on ChromaDB: one cosine HNSW collection with a vector per distinct text of the memory's
objects, embeddings passed explicitly.

Embedded (`PersistentClient` under the bank) by default; a Chroma server when `SMB_CHROMA_HOST` is set.
Chroma's embedded client keeps its HNSW index in memory and does not see other processes' writes,
so the bank calls `reload()` whenever another process has written since this one last looked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from smb_core.model import stable_id

#: HNSW parameters for high recall at 100k+ vectors: more links per node than Chroma's default (M=16)
#: and a wider search beam. Measured on 150k vectors of a 2wiki bank (recall@10 against exact search,
#: ties counted): ef_construction 200 -> 100 cuts insertion time by a third (121-145 s -> 74-90 s) for
#: recall 0.961 -> 0.94-0.96 (HNSW builds vary by a point between runs). A collection keeps the values
#: it was created with, except `sync_threshold`, which `collection` brings up to date.
#:
#: sync_threshold: Chroma writes its index to disk every this many added vectors, and each write
#: includes the id maps of the whole index (51 MB at 733k vectors), so at Chroma's default of 1,000 the
#: cost per vector grows with the bank. Upserting 15,000 vectors into a 950k-vector collection took
#: 12.2 s at 1,000, 9.5 s at 5,000 and 8.6 s at 10,000. Vectors not yet written are in Chroma's SQLite
#: log, and a process that opens the collection replays them (all were found), about 0.4 ms each: 5,000
#: bounds that at about 2 s while saving most of the writes.
HNSW = {"space": "cosine", "max_neighbors": 32, "ef_construction": 100, "ef_search": 128, "sync_threshold": 5_000}

#: One vector per distinct text, keyed by `vector_key(text)`; the objects that share a text find it
#: through their `embedding_id` (DuckDB). Banks made before kept one vector per object here:
COLLECTION, LEGACY_COLLECTION = "smb-texts", "smb-memory"
#: Ids per Chroma call: its SQLite backend limits the variables in one statement.
BATCH = 2000


def vector_key(text: str) -> str:
    """The Chroma id of a text's vector: objects with the same text (a name in many documents, a
    relationship and the claim it was read from) share one vector instead of storing it again."""
    return stable_id("vec", text)


class VectorStore:
    """Vectors by key, no metadata: which objects a key stands for, and their status and type, are in
    DuckDB (`Bank.nearest` expands keys to objects there)."""

    def __init__(self, path: Path, host: str | None = None, port: int = 8000) -> None:
        self.path = path
        self.host = host
        self.port = port
        self._client = None
        self._collection = None
        self._count: int | None = None  # cached: Chroma's count() costs ~20 ms on a large collection

    @property
    def client(self):
        if self._client is None:
            import chromadb
            from chromadb.config import Settings as ChromaSettings

            chroma_settings = ChromaSettings(anonymized_telemetry=False)
            if self.host:
                self._client = chromadb.HttpClient(host=self.host, port=self.port, settings=chroma_settings)
            else:
                self._client = chromadb.PersistentClient(path=str(self.path), settings=chroma_settings)
        return self._client

    @property
    def collection(self):
        if self._collection is None:
            from chromadb.errors import NotFoundError

            # embedding_function=None: Chroma's default function downloads a model; we always pass vectors.
            # Get before create: `get_or_create_collection` with a configuration, on a collection that exists,
            # made the `modify` below fail now and then with "database is locked" (17 of 400 opens; Chroma 1.5).
            try:
                self._collection = self.client.get_collection(COLLECTION, embedding_function=None)
            except NotFoundError:
                self._collection = self.client.get_or_create_collection(
                    COLLECTION, embedding_function=None, configuration={"hnsw": HNSW}
                )
            current = (self._collection.configuration_json or {}).get("hnsw") or {}
            if current.get("sync_threshold") != HNSW["sync_threshold"]:  # a bank created before it was set
                self._collection.modify(configuration={"hnsw": {"sync_threshold": HNSW["sync_threshold"]}})
        return self._collection

    def reload(self) -> None:
        """Drop the in-memory index so the next call reads what other processes wrote."""
        self._count = None
        if self.host or self._client is None:
            return
        from chromadb.api.client import SharedSystemClient

        self._collection = self._client = self._count = None
        SharedSystemClient.clear_system_cache()

    def upsert(self, keys: Sequence[str], embeddings: np.ndarray) -> None:
        self._count = None
        first = {key: n for n, key in reversed(list(enumerate(keys)))}  # Chroma rejects a repeated id
        if len(first) < len(keys):
            keys, embeddings = list(first), np.asarray(embeddings)[list(first.values())]
        for start in range(0, len(keys), BATCH):  # Chroma caps the batch size per call
            self.collection.upsert(ids=list(keys[start : start + BATCH]), embeddings=embeddings[start : start + BATCH])

    def delete(self, keys: Sequence[str]) -> None:
        self._count = None
        for start in range(0, len(keys), BATCH):
            self.collection.delete(ids=list(keys[start : start + BATCH]))

    def nearest(self, embeddings: Sequence[np.ndarray], n: int) -> list[list[tuple[str, float]]]:
        """The `n` nearest keys of each vector as (key, cosine similarity), best first, in batched queries."""
        count = self.count()
        if count == 0 or not len(embeddings):
            return [[] for _ in embeddings]
        n = min(n, count)
        out: list[list[tuple[str, float]]] = []
        per_call = max(1, min(500, 20_000 // n))  # results per call stay under SQLite's variable limit
        for start in range(0, len(embeddings), per_call):
            result = self.collection.query(query_embeddings=list(embeddings[start : start + per_call]), n_results=n,
                                           include=["distances"])
            out.extend([(k, 1.0 - d) for k, d in zip(keys, dists)]
                       for keys, dists in zip(result["ids"], result["distances"]))
        return out

    def existing(self, keys: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(keys), BATCH):
            found.update(self.collection.get(ids=list(keys[start : start + BATCH]), include=[])["ids"])
        return found

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        return _get(self.collection, list(dict.fromkeys(keys)))

    def count(self) -> int:
        if self._count is None:
            self._count = self.collection.count()
        return self._count


class LegacyVectors:
    """The per-object collection of a bank made before vectors were keyed by text: read once, then dropped."""

    def __init__(self, store: VectorStore, collection) -> None:
        self.store, self.collection = store, collection

    def get(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return _get(self.collection, list(dict.fromkeys(ids)))

    def drop(self) -> None:
        self.store.client.delete_collection(LEGACY_COLLECTION)


def legacy_vectors(store: VectorStore) -> LegacyVectors | None:
    """The bank's old per-object collection, if it still has one."""
    if store.host is None and not Path(store.path).exists():
        return None
    names = {getattr(c, "name", c) for c in store.client.list_collections()}
    if LEGACY_COLLECTION not in names:
        return None
    return LegacyVectors(store, store.client.get_collection(LEGACY_COLLECTION, embedding_function=None))


def _get(collection, ids: list[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for start in range(0, len(ids), BATCH):  # SQLite under Chroma caps the variables per statement
        result = collection.get(ids=ids[start : start + BATCH], include=["embeddings"])
        out.update((i, np.asarray(e, dtype=np.float32)) for i, e in zip(result["ids"], result["embeddings"]))
    return out
