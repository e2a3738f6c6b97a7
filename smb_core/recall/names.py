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


class NameIndex:
    """The document names and word document-frequencies that linking needs, held in memory.

    Built with two queries and rebuilt only when the bank has changed (the caller keys it by the
    bank's generation), so linking a question or a sentence costs no database round trip."""

    def __init__(self, db) -> None:
        from smb_core.recall.lexical import PostingIndex, tokenize

        self._tokenize = tokenize
        self.by_name: dict[str, list[tuple[str, float]]] = {}
        rows = db.sql("SELECT n.name, n.source_id, n.weight FROM doc_names n JOIN sources s ON s.id = n.source_id "
                      "WHERE s.status = 'active'")
        for name, source_id, weight in rows:
            self.by_name.setdefault(name, []).append((source_id, weight))
        #: The word counts names come in, longest first: `find` tries only these n-gram lengths, so a
        #: long title costs nothing until one exists, and no length is ever out of reach.
        self.lengths = sorted({len(n.split()) for n in self.by_name}, reverse=True)
        self.by_word: dict[str, set[str]] = {}
        for name in self.by_name:
            for word in name.split():
                if word not in STOP_WORDS:
                    self.by_word.setdefault(word, set()).add(name)
        self.documents = PostingIndex(db, "source")
        self.total = self.documents.total or 1
        self.df = self.documents.df
        self.mean_length = self.documents.mean_length
        #: IDF of a word that occurs in a single document: the scale every threshold is relative to.
        self.rare = math.log(self.total + 1)


    def specificity(self, name: str) -> float:
        """How telling a name is: the summed IDF (ln N/df over documents) of its non-stop words."""
        out = 0.0
        for word in name.split():
            if word in STOP_WORDS:
                continue
            df = self.df.get((self._tokenize(word) or [word])[0], 0)
            out += math.log(self.total / df) if df else self.rare
        return out

    def partial(self, mention: str, exclude: str | None = None, skip: set[str] = frozenset(),
                min_coverage: float = 0.6) -> list[tuple[str, float]]:
        """Documents whose name contains every word of a multi-word mention ("David Bradley" in
        "David Bradley, director"), weighted by the share of the name's specificity it covers."""
        key = name_key(mention)
        content = [w for w in key.split() if w not in STOP_WORDS]
        if len(content) < 2 or key in self.by_name or key in skip:
            return []
        names = set.intersection(*(self.by_word.get(w, set()) for w in content))
        mention_specificity = self.specificity(" ".join(content))
        out = []
        for name in names:
            coverage = mention_specificity / max(self.specificity(name), 1e-9)
            if coverage >= min_coverage:
                out.extend((source, min(1.0, coverage) * weight) for source, weight in self.by_name[name]
                           if source != exclude)
        return out

    def find(self, text: str, exclude: str | None = None) -> tuple[list[NameMatch], list[tuple[str, str]]]:
        """Document names occurring in `text`, longest first and non-overlapping. Where a heading and
        an alias share a string, the heading wins. A document's own name uses up its span but is not
        returned."""
        tokens = words(text)
        folded = [f for _, f in tokens]
        used = [False] * len(folded)
        matches: list[NameMatch] = []
        for n in self.lengths:
            for start in range(len(folded) - n + 1):
                gram = " ".join(folded[start : start + n])
                targets = self.by_name.get(gram)
                if not targets or any(used[start : start + n]):
                    continue
                if any(w >= HEADING_WEIGHT for _, w in targets):
                    targets = [t for t in targets if t[1] >= HEADING_WEIGHT]
                matches.extend(NameMatch(src, start, start + n, gram, w) for src, w in targets if src != exclude)
                for i in range(start, start + n):
                    used[i] = True
        return matches, tokens


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n|\n(?=\s*(?:#|[-*+]\s))")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the sentences of a markdown text, cheaply: end punctuation, blank lines, list items."""
    from smb_core.extract.markdown_text import front_matter_end

    spans, start = [], front_matter_end(text)
    for match in _SENTENCE_END.finditer(text, start):
        if text[start : match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans
