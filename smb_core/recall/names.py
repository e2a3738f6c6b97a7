"""Document names: what a document is about, and finding those names in text.

A document is "about" the thing its `#` heading (or front-matter title) names, weight 1. The named
entity that opens its body is an alias, weight 0.5 ("Frederick Barbarossa ..." under "# Frederick I,
Holy Roman Emperor"); a document without a heading takes that entity as its name. Names are stored
in the `doc_names` table and matched in questions and sentences as word n-grams, longest first.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from smb_core.recall.lexical import STOP_WORDS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_NGRAM = 12
HEADING_WEIGHT, ALIAS_WEIGHT = 1.0, 0.5


def _fold(word: str) -> str:
    word = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in word if not unicodedata.combining(ch)).lower()


def words(text: str) -> list[tuple[str, str]]:
    """(original, folded) words: case and accents folded, punctuation dropped ("I'Ll" ~ "I'll")."""
    return [(w, _fold(w)) for w in _WORD.findall(unicodedata.normalize("NFKC", text))]


def name_key(text: str) -> str:
    return " ".join(f for _, f in words(text))


def document_names(heading: str | None, opening_entity: str | None) -> list[tuple[str, float]]:
    """The names a document is known by, with their weights."""
    names: dict[str, float] = {}
    if heading and name_key(heading):
        names[name_key(heading)] = HEADING_WEIGHT
    if opening_entity and name_key(opening_entity):
        key = name_key(opening_entity)
        names.setdefault(key, ALIAS_WEIGHT if names else HEADING_WEIGHT)
    return list(names.items())


@dataclass(frozen=True)
class NameMatch:
    source_id: str
    start: int  # word offsets in the matched text
    end: int
    name: str
    weight: float  # the name's weight for that document (heading 1, alias 0.5)


def find_names(db, text: str, exclude: str | None = None) -> tuple[list[NameMatch], list[tuple[str, str]]]:
    """Document names occurring in `text`, longest first and non-overlapping. Where a heading and an
    alias share a string, the heading wins. A document's own name uses up its span but is not returned."""
    tokens = words(text)
    folded = [f for _, f in tokens]
    grams = {" ".join(folded[s : s + n]) for n in range(1, min(MAX_NGRAM, len(folded)) + 1)
             for s in range(len(folded) - n + 1)}
    if not grams:
        return [], tokens
    rows = db.sql(
        "SELECT n.name, n.source_id, n.weight FROM doc_names n JOIN sources s ON s.id = n.source_id "
        "WHERE s.status = 'active' AND n.name IN (SELECT unnest(?))",
        [sorted(grams)],
    )
    by_name: dict[str, list[tuple[str, float]]] = {}
    for name, source_id, weight in rows:
        by_name.setdefault(name, []).append((source_id, weight))
    used = [False] * len(folded)
    matches: list[NameMatch] = []
    for n in range(min(MAX_NGRAM, len(folded)), 0, -1):
        for start in range(len(folded) - n + 1):
            gram = " ".join(folded[start : start + n])
            if gram not in by_name or any(used[start : start + n]):
                continue
            targets = by_name[gram]
            if any(w >= HEADING_WEIGHT for _, w in targets):
                targets = [t for t in targets if t[1] >= HEADING_WEIGHT]
            matches.extend(NameMatch(s, start, start + n, gram, w) for s, w in targets if s != exclude)
            for i in range(start, start + n):
                used[i] = True
    return matches, tokens


class Specificity:
    """How telling a name is: the summed IDF (ln N/df over documents) of its non-stop words."""

    def __init__(self, db, names: list[str]) -> None:
        from smb_core.recall.lexical import tokenize

        vocabulary = sorted({w for name in names for w in name.split()})
        self._term = {w: (tokenize(w) or [w])[0] for w in vocabulary}
        self.total = db.sql("SELECT count(*) FROM lex_units WHERE kind = 'source'")[0][0] or 1
        rows = db.sql("SELECT p.term, count(*) FROM lex_postings p JOIN lex_units u ON u.unit = p.unit "
                      "WHERE u.kind = 'source' AND p.term IN (SELECT unnest(?)) GROUP BY p.term",
                      [sorted(set(self._term.values()))])
        self._df = dict(rows)
        #: IDF of a word that occurs in a single document: the scale every threshold is relative to.
        self.rare = math.log(self.total + 1)

    def __call__(self, name: str) -> float:
        out = 0.0
        for word in name.split():
            if word in STOP_WORDS:
                continue
            df = self._df.get(self._term.get(word, word), 0)
            out += math.log(self.total / df) if df else self.rare
        return out
