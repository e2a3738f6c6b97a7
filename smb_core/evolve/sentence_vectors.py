"""Vectors of the sentences merge and split compare names by, kept in the bank's DuckDB.

A name's context sentence is usually also a claim whose vector the bank holds; the others had to be
embedded again in every cycle, and an incremental cycle compares its new names with more older names
the larger the bank is (151 sentences in an increment on the 3,000-passage bank, 88% of them embedded
by the cycle before it). Stored under a key made of the text and the embedder, so another embedder
never reads a vector this one made.
"""

from __future__ import annotations

import hashlib

import numpy as np


def sentence_vectors(bank, texts: list[str]) -> np.ndarray:
    """One vector per text (as `Embedder.embed`): read from the bank, the missing ones embedded and stored."""
    embedder = bank.embedder
    by_key = {key(embedder.name, t): t for t in texts}
    if not by_key:
        return embedder.embed([])
    with bank.reading() as db:
        stored = db.sentence_vectors(sorted(by_key))
    size = 4 * embedder.dim if stored else 0
    found = {by_key[k]: v for k, v in ((k, _vector(blob, size)) for k, blob in stored.items()) if v is not None}
    missing = sorted(set(by_key.values()) - set(found))
    if missing:
        vectors = embedder.embed(missing)
        with bank.writing() as db:
            db.add_sentence_vectors({key(embedder.name, t): v.astype(np.float32).tobytes()
                                     for t, v in zip(missing, vectors)}, embedder.name)
        found.update(zip(missing, vectors))
    return np.stack([found[t] for t in texts])


def key(embedder: str, text: str) -> str:
    return hashlib.sha1(f"{embedder}\n{text}".encode()).hexdigest()


def _vector(blob: bytes, size: int) -> np.ndarray | None:
    """The stored vector, or None when the blob is damaged (another size, or not a unit vector, as every
    embedder's output is): its text is then embedded again."""
    if len(blob) != size:
        return None
    vector = np.frombuffer(blob, dtype=np.float32)
    return vector if np.isfinite(vector).all() and abs(float(vector @ vector) - 1.0) < 1e-3 else None
