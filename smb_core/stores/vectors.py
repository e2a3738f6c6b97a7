"""The vector store on ChromaDB: one cosine HNSW collection of memory objects, embeddings passed explicitly.

Embedded (`PersistentClient` under the bank) by default; a Chroma server when `SMB_CHROMA_HOST` is set.
Chroma's embedded client keeps its HNSW index in memory and does not see other processes' writes,
so the bank calls `reload()` whenever another process has written since this one last looked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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

COLLECTION = "smb-memory"
#: Ids per Chroma call: its SQLite backend limits the variables in one statement.
BATCH = 2000


def _allowed_values(where: dict[str, Any] | None) -> dict[str, tuple] | None:
    """{"a": 1, "b": {"$in": [2, 3]}} or {"$and": [{"a": 1}, ...]} as {key: allowed values}; None for
    any other filter (Chroma applies those itself)."""
    if not where:
        return {}
    items = where["$and"] if set(where) == {"$and"} else [{k: v} for k, v in where.items()]
    out: dict[str, tuple] = {}
    for item in items:
        if len(item) != 1:
            return None
        (key, value), = item.items()
        if isinstance(value, dict) and set(value) == {"$in"}:
            value = tuple(value["$in"])
        elif key.startswith("$") or isinstance(value, dict):
            return None
        else:
            value = (value,)
        out[key] = value
    return out


def _matches(metadata: dict[str, Any] | None, wanted: dict[str, tuple]) -> bool:
    return all((metadata or {}).get(key) in allowed for key, allowed in wanted.items())


class VectorStore:
    def __init__(self, path: Path, host: str | None = None, port: int = 8000) -> None:
        self.path = path
        self.host = host
        self.port = port
        self._client = None
        self._collection = None
        self._count: int | None = None  # cached: Chroma's count() costs ~20 ms on a large collection

    @property
    def collection(self):
        if self._collection is None:
            import chromadb
            from chromadb.config import Settings as ChromaSettings

            chroma_settings = ChromaSettings(anonymized_telemetry=False)
            if self.host:
                self._client = chromadb.HttpClient(host=self.host, port=self.port, settings=chroma_settings)
            else:
                self._client = chromadb.PersistentClient(path=str(self.path), settings=chroma_settings)
            # embedding_function=None: Chroma's default function downloads a model; we always pass vectors.
            self._collection = self._client.get_or_create_collection(
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

    def upsert(self, ids: Sequence[str], embeddings: np.ndarray, metadatas: Sequence[dict[str, Any]]) -> None:
        self._count = None
        ids, keep = _last_of_each(ids)  # Chroma rejects a repeated id; the other stores keep the last
        if keep is not None:
            embeddings, metadatas = np.asarray(embeddings)[keep], [metadatas[n] for n in keep]
        for start in range(0, len(ids), BATCH):  # Chroma caps the batch size per call
            end = start + BATCH
            self.collection.upsert(
                ids=list(ids[start:end]), embeddings=embeddings[start:end], metadatas=list(metadatas[start:end])
            )

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        ids, keep = _last_of_each(ids)
        if keep is not None:
            metadatas = [metadatas[n] for n in keep]
        for start in range(0, len(ids), BATCH):
            self.collection.update(ids=list(ids[start : start + BATCH]), metadatas=list(metadatas[start : start + BATCH]))

    def query(self, embedding: np.ndarray, k: int, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Nearest objects as (id, cosine similarity), best first."""
        count = self.count()
        if count == 0:
            return []
        result = self.collection.query(
            query_embeddings=[embedding], n_results=min(k, count), where=where or None, include=["distances"]
        )
        return [(i, 1.0 - d) for i, d in zip(result["ids"][0], result["distances"][0])]

    def query_many(self, embeddings: list[np.ndarray], k: int, prefix: str | tuple[str, ...] = "",
                   over: int = 4) -> list[list[tuple[str, float]]]:
        """Nearest objects of some types for each of several vectors, as lists of (id, cosine similarity),
        in batched queries. Each type has its own id prefix (`clm-` claims, `ent-` entities ...), so the
        type filter is applied to the ids of `over` x k fetched results and Chroma reads no metadata:
        reading it from Chroma's SQLite was two thirds of a query's cost at 150k vectors. Callers check
        anything else (status) in DuckDB; these lists are candidates, so a rare type may get fewer than k."""
        count = self.count()
        if count == 0 or not embeddings:
            return [[] for _ in embeddings]
        fetch = min(over * k if prefix else k, count)
        out: list[list[tuple[str, float]]] = []
        per_call = max(1, min(500, 20_000 // fetch))  # results per call stay under SQLite's variable limit
        for start in range(0, len(embeddings), per_call):
            result = self.collection.query(query_embeddings=embeddings[start : start + per_call], n_results=fetch,
                                           include=["distances"])
            for ids, dists in zip(result["ids"], result["distances"]):
                out.append([(i, 1.0 - d) for i, d in zip(ids, dists) if i.startswith(prefix)][:k])
        return out

    def query_with_source(self, embedding: np.ndarray, k: int,
                          where: dict[str, Any] | None = None) -> list[tuple[str, float, str]]:
        """Nearest objects as (id, cosine similarity, first source document id), best first.

        Simple filters (equality or `$in`, e.g. {"status": "active", "type": "claim"}) are applied to an
        over-fetched candidate list here: Chroma's metadata pre-filter costs about a second at 150k
        vectors, the unfiltered HNSW search a few milliseconds."""
        count = self.count()
        if count == 0:
            return []
        wanted = _allowed_values(where)
        if wanted is None:  # a filter we cannot apply ourselves: let Chroma do it
            return self._query(embedding, min(k, count), where)
        fetch = k
        while True:
            found = [(i, s, m) for i, s, m in self._query(embedding, min(fetch, count), None) if _matches(m, wanted)]
            if len(found) >= k or fetch >= count or fetch >= 50 * k:
                break
            fetch *= 4
        if len(found) < k and fetch < count:  # a rare filter: fall back to Chroma's
            return self._query(embedding, min(k, count), where)
        return [(i, s, m.get("source", "")) for i, s, m in found[:k]]

    def _query(self, embedding: np.ndarray, n: int, where: dict[str, Any] | None) -> list:
        result = self.collection.query(query_embeddings=[embedding], n_results=n, where=where or None,
                                       include=["distances", "metadatas"])
        rows = zip(result["ids"][0], result["distances"][0], result["metadatas"][0])
        if where is None:
            return [(i, 1.0 - d, m or {}) for i, d, m in rows]
        return [(i, 1.0 - d, (m or {}).get("source", "")) for i, d, m in rows]

    def existing(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), BATCH):
            found.update(self.collection.get(ids=list(ids[start : start + BATCH]), include=[])["ids"])
        return found

    def get_embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), BATCH):  # SQLite under Chroma caps the variables per statement
            result = self.collection.get(ids=list(ids[start : start + BATCH]), include=["embeddings"])
            out.update((i, np.asarray(e, dtype=np.float32)) for i, e in zip(result["ids"], result["embeddings"]))
        return out

    def count(self) -> int:
        if self._count is None:
            self._count = self.collection.count()
        return self._count


def _last_of_each(ids: Sequence[str]) -> tuple[list[str], list[int] | None]:
    """The ids without repeats (each at its last position) and those positions, or None if none repeat."""
    last = {object_id: n for n, object_id in enumerate(ids)}
    if len(last) == len(ids):
        return list(ids), None
    keep = sorted(last.values())
    return [ids[n] for n in keep], keep
