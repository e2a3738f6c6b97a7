"""Lexical retrieval: tokenisation and BM25 over the postings of source documents kept in DuckDB.

The postings table grows as documents are ingested, so there is no index rebuild as the bank grows.
Recall ranks documents from an in-memory copy of their postings (`PostingIndex`) that the recall
engine reloads only when the bank has changed: the SQL join over all postings (`bm25`, which the
tests hold it to) was most of a query's time. Memory objects are found by their vectors and names.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

import numpy as np

from spacy.lang.en.stop_words import STOP_WORDS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
K1, B = 1.2, 0.75


def tokenize(text: str) -> list[str]:
    """Lower-cased, accent-folded word tokens without stop words; a light plural fold (-s)."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    out = []
    for word in _WORD.findall(text):
        if word in STOP_WORDS:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def term_counts(text: str) -> dict[str, int]:
    return dict(Counter(tokenize(text)))


def bm25(metadata, query: str, kind: str, k: int) -> list[tuple[str, float]]:
    """Top-k units of `kind` for `query` by BM25 (IDF from the units of that kind), best first."""
    terms = sorted(set(tokenize(query)))
    if not terms:
        return []
    rows = metadata.con.execute(
        """
        WITH stats AS (SELECT count(*) AS n, avg(length) AS avgdl FROM lex_units WHERE kind = $kind),
        df AS (
            SELECT p.term, count(*) AS df FROM lex_postings p JOIN lex_units u ON u.unit = p.unit
            WHERE p.term IN (SELECT unnest($terms)) AND u.kind = $kind GROUP BY p.term
        )
        SELECT p.unit, sum(
            ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
            * p.tf * ($k1 + 1) / (p.tf + $k1 * (1 - $b + $b * u.length / s.avgdl))
        ) AS score
        FROM lex_postings p JOIN df ON df.term = p.term JOIN lex_units u ON u.unit = p.unit, stats s
        WHERE u.kind = $kind
        GROUP BY p.unit ORDER BY score DESC, p.unit LIMIT $limit
        """,
        {"terms": terms, "kind": kind, "k1": K1, "b": B, "limit": k},
    ).fetchall()
    return [(unit, float(score)) for unit, score in rows]


class PostingIndex:
    """The postings of one kind of unit (documents) as arrays: BM25 with numpy, no database round trip."""

    def __init__(self, metadata, kind: str) -> None:
        data = metadata.con.execute(
            "SELECT p.term, p.unit, p.tf, u.length FROM lex_postings p JOIN lex_units u ON u.unit = p.unit "
            "WHERE u.kind = ? ORDER BY p.term", [kind]).fetchnumpy()
        terms = np.asarray(data["term"], dtype=object)
        self.units, unit_index = np.unique(np.asarray(data["unit"], dtype=object), return_inverse=True)
        self._unit = unit_index.astype(np.int64)
        self._tf = np.asarray(data["tf"], dtype=np.float64)
        stats = metadata.con.execute("SELECT count(*), avg(length) FROM lex_units WHERE kind = ?", [kind]).fetchone()
        self.total, self.mean_length = int(stats[0] or 0), float(stats[1] or 1.0)
        lengths = np.asarray(data["length"], dtype=np.float64)
        self._norm = K1 * (1 - B + B * lengths / self.mean_length)  # per posting, precomputed
        starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]]) if len(terms) else np.array([], dtype=int)
        ends = np.r_[starts[1:], len(terms)]
        self._slices = {terms[a]: (int(a), int(b)) for a, b in zip(starts, ends)}
        self.df = {t: b - a for t, (a, b) in self._slices.items()}

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-k units by BM25, best first (ties by unit id), as the SQL version ranks them."""
        scores = np.zeros(len(self.units))
        for term in sorted(set(tokenize(query))):
            if term not in self._slices:
                continue
            a, b = self._slices[term]
            idf = math.log(1 + (self.total - (b - a) + 0.5) / ((b - a) + 0.5))
            tf = self._tf[a:b]
            np.add.at(scores, self._unit[a:b], idf * tf * (K1 + 1) / (tf + self._norm[a:b]))
        hits = np.flatnonzero(scores > 0)
        if 0 < k < len(hits):
            # common words score most documents of a large bank: sorting them all in Python grew with
            # it; keep the k best and whatever ties the k-th, which the exact sort below orders by id
            kth = np.partition(scores[hits], len(hits) - k)[len(hits) - k]
            hits = hits[scores[hits] >= kth]
        order = sorted(hits, key=lambda i: (-scores[i], self.units[i]))[:k]
        return [(str(self.units[i]), float(scores[i])) for i in order]
