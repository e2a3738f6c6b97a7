"""Entity linking: which entities and concepts of the bank a piece of text names.

Names are matched as normalised word n-grams against the `names` table (entity and concept titles and
aliases), longest match first and without overlaps. A name's weight is its specificity: the summed
IDF of its words over the bank's documents, so "Lumen Labs" counts for more than "team".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from smb_core.extract.base import normalise_name
from smb_core.recall.lexical import STOP_WORDS, PostingIndex, tokenize
from smb_core.stores.metadata import id_filter

MAX_NGRAM = 10


@dataclass(frozen=True)
class Link:
    name: str  # the normalised name matched
    object_ids: tuple[str, ...]  # entities/concepts with that name
    weight: float  # specificity of the name


def ngrams(words: list[str], max_n: int = MAX_NGRAM) -> list[tuple[int, int, str]]:
    out = []
    for n in range(min(max_n, len(words)), 0, -1):
        for start in range(len(words) - n + 1):
            out.append((start, start + n, " ".join(words[start : start + n])))
    return out


def term_idf(db, words: set[str], documents: PostingIndex | None = None) -> dict[str, float]:
    """IDF of words over source documents, from the lexical postings, or from `documents` (the postings
    a recall engine keeps in memory): counting a common word's postings in SQL grows with the bank."""
    tokens = {w: (tokenize(w) or [w])[0] for w in words}
    if documents is not None:
        df, total = documents.df, documents.total or 1
    else:
        rows = db.sql(
            "SELECT p.term, count(*) FROM lex_postings p JOIN lex_units u ON u.unit = p.unit "
            "WHERE u.kind = 'source' AND p.term IN (SELECT unnest(?)) GROUP BY p.term",
            [sorted(set(tokens.values()))],
        )
        total = db.sql("SELECT count(*) FROM lex_units WHERE kind = 'source'")[0][0] or 1
        df = dict(rows)
    return {w: math.log(1 + total / (1 + df.get(t, 0))) for w, t in tokens.items()}


def link_text(db, text: str, min_weight: float = 2.0, documents: PostingIndex | None = None) -> list[Link]:
    """Names of the bank found in `text`, longest first, non-overlapping, with their specificity
    (`documents`: see `term_idf`). The n-grams are looked up as constants, through the names index."""
    words = normalise_name(text).split()
    if not words:
        return []
    grams = ngrams(words)
    where, params = id_filter("name", sorted({g for _, _, g in grams}))
    found = dict(db.sql(f"SELECT name, list(DISTINCT object_id) FROM names WHERE {where} GROUP BY name", params))
    if not found:
        return []
    idf = term_idf(db, {w for name in found for w in name.split()}, documents)
    used = [False] * len(words)
    links = []
    for start, end, gram in grams:
        if gram not in found or any(used[start:end]):
            continue
        weight = sum(idf.get(w, 0.0) for w in gram.split() if w not in STOP_WORDS)
        if weight < min_weight:
            continue
        for i in range(start, end):
            used[i] = True
        links.append(Link(gram, tuple(sorted(found[gram])), weight))
    return links
