"""Lexical retrieval: tokenisation and BM25 scored in SQL over the postings kept in DuckDB.

The postings table is updated incrementally as units (documents, objects) are written, so there is
no index rebuild as the bank grows; a query touches only the postings of its own terms.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

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


def bm25(metadata, query: str, kind: str, k: int, candidates: list[str] | None = None,
         stats: tuple[dict[str, int], int, float] | None = None) -> list[tuple[str, float]]:
    """Top-k units of `kind` for `query` by BM25 (IDF from the units of that kind), best first.
    `stats` = (document frequencies, unit count, mean length) of that kind, if the caller has them."""
    terms = sorted(set(tokenize(query)))
    if not terms:
        return []
    if stats is not None and candidates is None:
        return _bm25_with_stats(metadata, terms, kind, k, *stats)
    only = "AND p.unit IN (SELECT unnest($cands))" if candidates is not None else ""
    rows = metadata.con.execute(
        f"""
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
        WHERE u.kind = $kind {only}
        GROUP BY p.unit ORDER BY score DESC, p.unit LIMIT $limit
        """,
        {"terms": terms, "kind": kind, "k1": K1, "b": B, "limit": k,
         **({"cands": candidates} if candidates is not None else {})},
    ).fetchall()
    return [(unit, float(score)) for unit, score in rows]


def bm25_objects(metadata, query: str, source_ids: list[str], k: int) -> list[tuple[str, float]]:
    """BM25 over the claims of the given documents (to pick the statements inside good documents)."""
    if not source_ids:
        return []
    rows = metadata.sql(
        "SELECT id FROM objects WHERE type = 'claim' AND status = 'active' AND list_has_any(source_ids, ?::VARCHAR[])",
        [source_ids],
    )
    return bm25(metadata, query, "claim", k, candidates=[r[0] for r in rows]) if rows else []


def _bm25_with_stats(metadata, terms: list[str], kind: str, k: int, df: dict[str, int], n: int,
                     avgdl: float) -> list[tuple[str, float]]:
    """BM25 when the IDFs are known: one pass over the postings of the query's terms."""
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms if t in df}
    if not idf:
        return []
    rows = metadata.con.execute(
        """
        WITH q AS (SELECT unnest($terms) AS term, unnest($idf) AS idf)
        SELECT p.unit, sum(q.idf * p.tf * ($k1 + 1) / (p.tf + $k1 * (1 - $b + $b * u.length / $avgdl))) AS score
        FROM lex_postings p JOIN q ON q.term = p.term JOIN lex_units u ON u.unit = p.unit
        WHERE u.kind = $kind GROUP BY p.unit ORDER BY score DESC, p.unit LIMIT $limit
        """,
        {"terms": list(idf), "idf": list(idf.values()), "k1": K1, "b": B, "avgdl": avgdl, "kind": kind, "limit": k},
    ).fetchall()
    return [(unit, float(score)) for unit, score in rows]
