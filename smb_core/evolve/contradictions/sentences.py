"""One analysed sentence (`_Sentence`) and the parse cache: everything the rules need about a claim
sentence, worked out once per distinct text, i.e. its names, dates, versions, temporal scope and tense,
quantities with units, and predicates with their negation.

The cache (`_CACHE`, `_cache_lock`) lives here and only here; other modules reach it, `_analyse_many`,
`_analyse_stored` and `_analyse` through this module (`sentences._CACHE`, ...), so that there is one
binding of each and replacing one (as the tests do) takes effect everywhere.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import itertools
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from smb_core.evolve import dates, parses
from smb_core.evolve.contradictions.lexicon import (
    _ANTONYM_VERBS, _CATEGORY_NOUNS, _CLASSES, _COUNT_CLASSES, _FIRST_MARKS,
    _GENERIC_PERSON, _LIGHT_VERBS, _MULTIPLIERS, _OCCUPATIONS, _ORDINALS, _PHRASES, _PRIVATIVE_HEADS,
    _STATES, _TITLES, _UNIQUE_MARKS, _VERSION_NOUNS, _WORD_NUMBERS, _fold, _stem,
)
from smb_core.evolve.units import CURRENCY_SYMBOLS, CURRENCY_WORDS, UNITS


class _DateSpan(NamedTuple):
    lo: int  # days (proleptic ordinals)
    hi: int
    start: int  # character span in the sentence
    end: int
    text: str


@dataclass
class _Date:
    lo: int
    hi: int
    start: int  # character span in the sentence
    end: int
    root: int  # token index of the span's root (where it attaches to the parse)
    prep: str  # governing preposition ('' if none): in, on, since, until, by, from, to, ...
    modifier: bool  # a year used as a noun modifier ("the 2019 season")
    text: str


@dataclass
class _Qty:
    value: float
    lo: float
    hi: float
    dim: str  # length|mass|...|money:usd|percent|count:<class-or-lemma>|'' (bare number)
    count_classes: frozenset[str]
    token: int
    keys: frozenset[str]  # attribute keys (classes, lemmas, stems) of what is measured
    nouns: frozenset[str]  # attribute nouns only (depth, memory, storage, ...)
    text: str


@dataclass(eq=False)
class _Name:
    key: str  # normalised full name
    tokens: frozenset[str]  # significant tokens (versions and titles removed)
    first: str  # the first significant token, in order
    order: tuple[str, ...]  # the significant tokens in order
    droppable: int  # how many leading tokens are descriptors ("Composer Ilse Brandauer" at a sentence start)
    start: int  # token span
    end: int
    person: bool = False  # the name ends in a token the NER calls a person


@dataclass
class _Pred:
    i: int
    lemma: str
    classes: frozenset[str]
    neg: str  # '' | not | never | no longer | no | privative
    antonym: bool  # the predicate negates its class ("reject" = not accept)


class _Sentence:
    """Everything the rules need about one sentence; built once per distinct text, each part on first use.

    Most candidate pairs share no relation the rules could compare (`rules._comparable` reads only the
    predicates, states and numbers), so the costlier parts, names, dates and quantities, are worked out
    only for sentences in pairs that pass that test."""

    def __init__(self, doc) -> None:
        self.doc = doc
        self.text = doc.text

    @cached_property
    def lower(self) -> str:
        return _fold(self.text)

    @cached_property
    def names(self) -> list[_Name]:
        return _names(self.doc)

    @cached_property
    def name_at(self) -> dict[int, _Name]:
        return {i: n for n in self.names for i in range(n.start, n.end)}

    @cached_property
    def date_spans(self) -> list[_DateSpan]:
        return _date_spans(self.doc)

    @cached_property
    def dates(self) -> list[_Date]:
        return [_dated(self.doc, d) for d in self.date_spans]

    @cached_property
    def date_tokens(self) -> set[int]:
        return {t.i for d in self.date_spans for t in self.doc.char_span(d.start, d.end, alignment_mode="expand")}

    @cached_property
    def versions(self) -> frozenset[str]:
        return _versions(self.doc, self)

    @cached_property
    def quantities(self) -> list[_Qty]:
        return _quantities(self.doc, self)

    @cached_property
    def preds(self) -> list[_Pred]:
        return _preds(self.doc)

    @cached_property
    def relation_keys(self) -> frozenset[str]:
        """What two predicates must share to express one relation (`rules._aligned`): a class, or, for a
        predicate other than a light verb, its lemma or its derivational stem."""
        keys = set()
        for p in self.preds:
            keys |= p.classes
            if p.lemma not in _LIGHT_VERBS:
                keys.add("lemma:" + p.lemma)
                if len(p.lemma) > 3:
                    keys.add("stem:" + _stem(p.lemma))
        return frozenset(keys)

    @cached_property
    def states(self) -> list[tuple[str, _Pred]]:
        """The states its predicates put their subject in (alive, cancelled, ongoing, ...)."""
        return _states(self)

    @cached_property
    def has_number(self) -> bool:
        """Whether a token outside its dates reads as a number: a sentence without one has no quantity."""
        numbers = [t.i for t in self.doc if _number_value(t) is not None]
        return bool(numbers) and any(i not in self.date_tokens for i in numbers)

    @cached_property
    def time_points(self) -> list[tuple[int, int]]:
        """(first day, last day) of each date that dates the sentence: a date containing another date of the
        sentence only repeats it less precisely ("1961: Valenga hosted the summit in November 1961")."""
        spans = [(d.lo, d.hi) for d in self.date_spans]
        return [x for x in spans if not any(y != x and x[0] <= y[0] and y[1] <= x[1] for y in spans)]

    @cached_property
    def words(self) -> set[str]:
        return {t.lower_ for t in self.doc}

    @cached_property
    def marks(self) -> set[str]:
        return self.words & _UNIQUE_MARKS

    @cached_property
    def first(self) -> bool:
        return bool(self.words & _FIRST_MARKS)

    @cached_property
    def temporal(self) -> set[str]:
        return _temporal_markers(self.doc)

    @cached_property
    def tense(self) -> str:
        return _tense(self.doc)

    @cached_property
    def kind_subjects(self) -> set[str]:
        """Generic statements about a kind: "Copper conducts ...", "Water freezes ..."."""
        return {t.lemma_.lower() for t in self.doc if t.dep_ in ("nsubj", "nsubjpass") and t.pos_ == "NOUN"
                and not any(c.dep_ in ("det", "poss") for c in t.children)}


_cache_lock = threading.Lock()
_CACHE: dict[str, _Sentence] = {}
#: Parses kept in memory, about 9 KB each with their analysis. A chunk of 2,000 claims of a 730k-object
#: bank judges pairs among about 28,000 distinct sentences and the next chunk shares few of them, so a
#: larger cache buys little: this one holds a few chunks' worth.
_CACHE_LIMIT = 100_000
_NO_TENSOR = np.zeros((0, 0), dtype="float32")


def _analyse_many(texts: Iterable[str], keep: int = 0) -> dict:
    """Parse the texts not yet cached, in one batch (spaCy is much faster on batches); returns the new
    parses ({text: Doc}). `keep`: see `_remember`."""
    from smb_core.extract.nlp import load_spacy

    todo = list(dict.fromkeys(t for t in texts if t not in _CACHE))
    if not todo:
        return {}
    # One process: spaCy's worker processes (n_process=2) were 1.45x slower on two cores (8,000 claims:
    # 17 s against 11.6 s), as each Doc they send back is unpacked by srsly, which looks its msgpack
    # extensions up in the installed packages' entry points every time.
    docs = dict(zip(todo, load_spacy().pipe(todo, batch_size=256)))
    for doc in docs.values():  # no rule reads the tok2vec tensor: ~10 KB per sentence held for nothing
        doc.tensor = _NO_TENSOR
    _remember(docs, keep)
    return docs


def _analyse_stored(bank, texts: Iterable[str]) -> None:
    """Like `_analyse_many`, reading the parses the bank has stored and storing the new ones. The texts
    stay cached together: those already cached become the most recent, so that making room for the new
    ones never evicts them."""
    texts = list(dict.fromkeys(texts))
    with _cache_lock:
        for text in texts:
            if text in _CACHE:
                _CACHE[text] = _CACHE.pop(text)
    todo = [t for t in texts if t not in _CACHE]
    stored = parses.load(bank, todo)
    _remember(stored, keep=len(texts))
    parses.save(bank, _analyse_many((t for t in todo if t not in stored), keep=len(texts)))


def _remember(docs: dict, keep: int = 0) -> None:
    """Cache the analysed parses, evicting the oldest entries beyond `_CACHE_LIMIT` (but never the
    `keep` most recent ones, which the caller is about to judge)."""
    analysed = [(text, _Sentence(doc)) for text, doc in docs.items()]
    with _cache_lock:
        _CACHE.update(analysed)
        excess = len(_CACHE) - max(_CACHE_LIMIT, keep, len(analysed))
        for text in list(itertools.islice(_CACHE, max(0, excess))):
            del _CACHE[text]


def _analyse(text: str) -> _Sentence:
    sent = _CACHE.get(text)
    if sent is None:
        _analyse_many([text])
        sent = _CACHE[text]
    return sent


# ---- names ----------------------------------------------------------------------------------

_QUOTED = re.compile(r"[‘'\"“«]([A-Z0-9][^'\"”’»]{1,80}?)[’'\"”»](?=[\s.,;:)!?]|$)")
_CODE = re.compile(r"^(?=.*\d)[A-Za-z0-9][\w.+-]*$|^[A-Z][a-z]*-[A-Z0-9]+$|^(?:II|III|IV|V|VI|VII|VIII|IX|X|XI|XII)$")


def _is_code(text: str) -> bool:
    """A model or version designation: X2, KR-100, 2.4, 4.x, Mk II, Rook-B."""
    return bool(_CODE.match(text)) and not re.fullmatch(r"\d{4}s?", text)


def _names(doc) -> list[_Name]:
    """Proper-noun runs (joined across "of"), quoted titles, and the common-noun subject head."""
    spans: list[tuple[int, int]] = []
    n = len(doc)
    i = 0
    while i < n:
        t = doc[i]
        if _name_token(t) or re.fullmatch(r"[A-Z][a-z]{2,}-\d+[a-z]?", t.text):
            j = i + 1
            while j < n and (_name_token(doc[j]) or (doc[j].lower_ in ("of", "v.", "vs.", "&", "-", "de")
                                                        and j + 1 < n and _name_token(doc[j + 1])
                                                        and doc[j + 1].pos_ == "PROPN")):
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    for m in _QUOTED.finditer(doc.text):
        span = doc.char_span(m.start(1), m.end(1), alignment_mode="expand")
        if span is not None:
            spans = [s for s in spans if s[1] <= span.start or s[0] >= span.end]
            spans.append((span.start, span.end))
    for ent in doc.ents:  # NER spans of proper names not already covered (lowercase product names etc.)
        if ent.label_ in ("PERSON", "ORG", "GPE", "LOC", "FAC", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW") and \
                not any(s[0] < ent.end and ent.start < s[1] for s in spans) and \
                any(t.pos_ == "PROPN" for t in ent):
            spans.append((ent.start, ent.end))
    # common-noun subjects (Copper, ethanol, the compound zelarin) are names too
    for t in doc:
        if t.dep_ in ("nsubj", "nsubjpass") and t.pos_ == "NOUN" and t.head.dep_ == "ROOT" and \
                not any(s[0] <= t.i < s[1] for s in spans) and t.lemma_.lower() not in _CLASSES:
            kids = list(t.children)
            category = [c for c in kids if c.dep_ == "compound" and c.lemma_.lower() in _CATEGORY_NOUNS]
            bare = not kids
            if bare or (category and all(c.dep_ in ("det", "compound") for c in kids)):
                spans.append((t.i, t.i + 1))  # "Copper ...", "The compound zelarin ..."
    out = []
    for start, end in sorted(set(spans)):
        toks = [doc[k] for k in range(start, end)]
        words = [_fold(w.text).strip("'’.") for w in toks if not re.fullmatch(r"\W+", w.text)
                 and w.text not in ("'s", "’s")]
        words = [w[:-2] if w.endswith(("'s", "’s")) else w for w in words]
        significant = frozenset(w for w in words if w and w not in _TITLES and not _is_code(w))
        titled = words and words[0] in _TITLES and words[0] not in ("the", "a", "an", "of", "and", "st", "saint")
        if titled and (len(significant) == 1 or (len(words) > 1 and words[1] == "of")):
            continue  # "Lady Rodney", "Prince of Anhalt-Bernburg": a title held by many, not a person
        if not significant:
            codes = [w for w in words if re.fullmatch(r"[a-z]{3,}-\d+[a-z]?", w)]
            if not codes:
                continue
            significant = frozenset(codes)  # "Cobalt-60", "Orbis-7": the designation is the name
        key = " ".join(w for w in words if w not in ("the", "a", "an"))
        order = tuple(w for w in words if w in significant)
        first = order[0] if order else ""
        lead = [w for w in toks if not re.fullmatch(r"\W+", w.text) and _fold(w.text).strip("'’.") in significant]
        droppable = 0
        for w in lead[:-2]:  # descriptors before a name of two words or more ("Composer Ilse Brandauer")
            if w.text[:1].islower() or w.lower_ in _OCCUPATIONS:
                droppable += 1
            else:
                break
        out.append(_Name(key=key, tokens=significant, first=first, order=order, droppable=droppable,
                         start=start, end=end, person=doc[end - 1].ent_type_ == "PERSON"))
    return out


#: Era markers, which the tagger often calls proper nouns: "died in 309 BC" names no place.
_ERAS = {"BC", "BCE", "AD", "CE", "B.C.", "A.D.", "B.C.E.", "C.E."}


def _name_token(t) -> bool:
    if t.text in _ERAS:
        return False
    if t.i > 0 and t.doc[t.i - 1].text.startswith("°"):
        return False  # the C of "78 °C"
    if t.ent_type_ in ("NORP", "LANGUAGE") and (t.pos_ == "ADJ" or re.search(r"(an|ese|ish|ic|i|ch)$", t.lower_)):
        return False  # nationalities and languages ("French", "South Korean") are not what a claim is about
    if t.i == 0 and t.text[:1].isupper() and t.pos_ != "PROPN" and len(t.doc) > 1 and \
            (re.fullmatch(r"\d+(\.\d+)+|\d+\.x", t.doc[1].text) or t.doc[1].pos_ == "PROPN") and \
            t.lower_ not in _TITLES and not t.is_stop and t.lower_ not in _CATEGORY_NOUNS | _VERSION_NOUNS:
        return True  # "Tessellate 3.0 shipped ...": a name the tagger took for a verb
    if t.i == 0 and t.text[:1].isupper() and len(t.doc) > 1 and t.doc[1].text in ("'s", "’s", "'") and \
            not t.is_stop:
        return True  # "Hawthorn's compiler": a capitalised possessor
    if t.pos_ == "ADV" and t.text[:1].isupper() and not t.is_stop and t.lower_.endswith("ly") and \
            (not t.is_sent_start or (t.dep_ == "advmod" and t.head.pos_ == "VERB" and t.head.i == t.i + 1 and
                                     not any(c.dep_ in ("nsubj", "nsubjpass") for c in t.head.children))):
        return True  # "Ledgerly charges ...": a product name the tagger took for an adverb
    if t.pos_ == "PROPN":
        return t.text not in ("'s", "’s") and t.lower_ not in dates.MONTHS and not re.fullmatch(r"\d{4}", t.text)
    # capitalised mid-sentence words the tagger called NOUN/ADJ (Codex, Accord, Aurore)
    return (t.i > 0 and t.text[:1].isupper() and t.pos_ in ("NOUN", "ADJ") and t.lower_ not in dates.MONTHS
            and not t.is_sent_start and t.ent_type_ not in ("NORP", "DATE", "ORDINAL")
            and t.lemma_.lower() not in _CLASSES and t.lower_ not in _CLASSES)


#: Words that make a different place or thing of a name: "Greater Oslo" is not Oslo, "New York" not York.
_NAME_QUALIFIERS = {"greater", "new", "old", "north", "south", "east", "west", "northern", "southern", "eastern",
                    "western", "upper", "lower", "inner", "outer", "central", "metropolitan", "little", "great",
                    "grand", "port", "fort", "saint", "st", "san", "santa", "junior", "jr", "senior", "sr"}


def _names_match(a: _Name, b: _Name) -> bool:
    if not a.tokens or not b.tokens:
        return False
    if a.tokens <= b.tokens:
        small, big = a, b
    elif b.tokens <= a.tokens:
        small, big = b, a
    else:
        return False
    if small.tokens == big.tokens:
        return True
    # the shorter name must end the longer one, after descriptors only: "Ilse Brandauer" is "Composer Ilse
    # Brandauer", but "James Adam" is not "James Adam Reuben", "Frederick" not "Frederick Heinrich", and
    # "Blood, Sweat & Tears" not "The Essential Blood, Sweat & Tears"
    extra = len(big.order) - len(small.order)
    if extra <= 0 or big.order[extra:] != small.order or extra > big.droppable and len(small.order) > 1:
        return False
    if len(small.order) == 1 and extra > big.droppable and not _surname_only(small, big):
        return False
    return not ((big.tokens - small.tokens) & _NAME_QUALIFIERS)


def _surname_only(small: _Name, big: _Name) -> bool:
    """'Kroll' for 'Anneliese Kroll': a surname alone for a person's two-word name."""
    return len(big.order) - big.droppable == 2 and big.order[-1] == small.order[0] and big.person


# ---- dates ----------------------------------------------------------------------------------

def _date_spans(doc) -> list[_DateSpan]:
    """The dates `dates.find_dates` finds in the sentence (the parser timelines use), as ranges of days.

    A hedged date ("around 1870", "c. 1870") gets two years' slack either side and a vague period
    ("spring 2020", "the early 1990s") a month's: the text does not pin them down, and two claims are
    only in conflict when their dates cannot overlap. A bare year followed by a unit or a count noun
    ("2000 metres", "2000 people") is a number; the parse tells the count nouns.
    """
    text = doc.text
    out: list[_DateSpan] = []
    for d in dates.find_dates(text):
        start = d.start
        hedge = dates.HEDGED.match(text, start)
        if hedge:
            start = hedge.end()
        expression = text[start:d.stop]
        if re.fullmatch(r"\d{4}", expression) and _counted(doc, d.stop):
            continue
        lo, hi = _day(d.date, first=True), _day(d.end or d.date, first=False)
        slack = 730 if hedge else 31 if d.approximate else 0
        out.append(_DateSpan(max(1, lo - slack), hi + slack, start, d.stop, expression))
    return out


def _day(iso: str, first: bool) -> int:
    """The first or last day (proleptic ordinal) of an ISO date at its precision: '2019' -> 1 Jan or 31 Dec."""
    parts = [int(p) for p in iso.split("-")]
    year, month, day = parts[0], *parts[1:], *([None] * (3 - len(parts)))
    month = month or (1 if first else 12)
    day = day or (1 if first else calendar.monthrange(max(1, year), month)[1])
    return _dt.date(max(1, min(year, 9999)), month, day).toordinal()


def _counted(doc, char_end: int) -> bool:
    """Whether the number ending at `char_end` is followed by a unit, a currency or a plural count noun."""
    unit = re.match(r"\s*([a-z%°]+)", doc.text[char_end:char_end + 20].lower())
    if unit and (unit.group(1) in UNITS or unit.group(1) in CURRENCY_WORDS):
        return True
    return _plural_count_noun(doc, char_end)


def _dated(doc, d: _DateSpan) -> _Date:
    """A date found in the text, with where it attaches to the parse."""
    root = doc.char_span(d.start, d.end, alignment_mode="expand").root
    prep, modifier = _date_relation(root)
    return _Date(lo=d.lo, hi=d.hi, start=d.start, end=d.end, root=root.i, prep=prep, modifier=modifier,
                 text=d.text)


def _plural_count_noun(doc, char_end: int) -> bool:
    span = doc.char_span(char_end, min(len(doc.text), char_end + 1), alignment_mode="expand")
    if span is None:
        return False
    nxt = doc[span.start] if span.start < len(doc) else None
    if nxt is not None and nxt.idx < char_end:
        nxt = doc[span.start + 1] if span.start + 1 < len(doc) else None
    return bool(nxt is not None and nxt.tag_ == "NNS" and nxt.lemma_ not in ("census", "season"))


def _date_relation(root) -> tuple[str, bool]:
    """(preposition governing the date, whether it is a noun modifier such as 'the 2019 season')."""
    t = root
    if t.dep_ in ("nummod", "compound", "amod", "npadvmod", "nmod") and t.head.pos_ in ("NOUN", "PROPN") and \
            t.head.i > t.i:
        head = t.head
        # "the 1998 season", "the 2019 expansion" -> a modifier whose noun may itself be a date value
        prep = head.head.lower_ if head.dep_ == "pobj" and head.head.pos_ == "ADP" else ""
        return prep, True
    if t.dep_ == "pobj" and t.head.pos_ == "ADP":
        prep = t.head.lower_
        if prep == "of" and t.head.head.pos_ == "NOUN":  # "the autumn of 1819", "the end of 2016"
            outer = t.head.head
            if outer.dep_ == "pobj" and outer.head.pos_ == "ADP":
                return outer.head.lower_, False
        if prep == "of" and t.head.head.lower_ == "as":
            return "as of", False
        return prep, False
    return "", False


# ---- versions -------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"\b(?:version|v\.?|release|rev\.?)\s*(\d+(?:\.\d+)*(?:\.x)?)\b", re.I)


def _norm_version(text: str) -> str:
    v = _fold(text).strip(".")
    v = re.sub(r"^(version|v\.?|release)\s*", "", v)
    v = re.sub(r"(\.0)+$|\.x$", "", v)
    return v


def _versions(doc, sent: _Sentence) -> frozenset[str]:
    """Designations of a version, model, edition or part: '2.4', 'x2', 'kr-100', 'edition:2', 'year:2020'."""
    out: set[str] = set()
    for m in _VERSION_RE.finditer(doc.text):
        out.add(_norm_version(m.group(1)))
    for m in re.finditer(r"\b[A-Z][A-Za-z]*-[A-Z0-9][A-Za-z0-9]*\b", doc.text):  # Rook-A, KR-100, Orbis-7
        out.add(_fold(m.group(0)))
    for m in re.finditer(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
                         r"[\s-]+(generation|edition|volume|series|season|model|instalment|installment|part|gen)\b",
                         doc.text, re.I):
        n = _ORDINALS.get(m.group(1).lower()) or int(re.sub(r"\D", "", m.group(1)))
        out.add(f"{m.group(2).lower()}:{n}")
    for m in re.finditer(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
                         r"\s+([A-Z][a-z]+)", doc.text):  # "4th Duke of X" vs "10th Duke of X"
        n = _ORDINALS.get(m.group(1).lower()) or int(re.sub(r"\D", "", m.group(1)))
        out.add(f"ord:{m.group(2).lower()}:{n}")
    for t in doc:  # "John I, Prince of X": the pronoun-looking I after a name is a regnal number
        if t.text == "I" and t.i > 0 and doc[t.i - 1].pos_ == "PROPN" and doc[t.i - 1].text[:1].isupper() and \
                (t.i + 1 == len(doc) or doc[t.i + 1].text in (",", "(", "of", ")")):
            out.add("i")
    for t in doc:
        if t.i in sent.date_tokens and not any(d.modifier for d in sent.dates if d.root == t.i):
            continue
        text = t.text
        if _is_code(text) and not t.like_num and (t.pos_ in ("PROPN", "NOUN", "X") or t.i in sent.name_at):
            if re.search(r"[A-Za-z]", text) and re.search(r"\d|^[IVX]+$", text):
                if re.fullmatch(r"[IVX]+", text) and not (t.i > 0 and doc[t.i - 1].pos_ == "PROPN"):
                    continue
                out.add(_fold(text))
                continue
        if t.like_num and re.fullmatch(r"\d+(?:\.\d+)*(?:\.x)?|\d+\.x", text):
            head = t.head
            if t.dep_ in ("nummod", "compound", "appos", "npadvmod", "nmod") and head.i < t.i and \
                    head.pos_ in ("PROPN", "NOUN") and (head.pos_ == "PROPN" or head.lemma_ in _VERSION_NOUNS or
                                                        head.text[:1].isupper()):
                out.add(_norm_version(text))  # "Larch 3", "Route 9", "Fennel DB 2.4", "Version 5"
            elif t.i > 0 and (doc[t.i - 1].pos_ == "PROPN" or t.i - 1 in sent.name_at) and \
                    t.dep_ not in ("pobj", "dobj"):
                out.add(_norm_version(text))
            elif re.fullmatch(r"\d+\.x", text):
                out.add(_norm_version(text))
    for d in sent.dates:
        if d.modifier:
            head = doc[d.root].head
            if head.lemma_ not in ("season", "year", "census", "election", "period", "decade"):
                out.add(f"year:{_dt.date.fromordinal(d.lo).year}")
    return frozenset(out)


# ---- temporal scope -------------------------------------------------------------------------


def _temporal_markers(doc) -> set[str]:
    words = {t.lower_ for t in doc}
    out = words & {"since", "until", "till", "before", "after", "formerly", "previously", "later", "now",
                   "currently", "today", "still", "former", "once", "then", "initially", "originally",
                   "eventually", "subsequently"}
    if re.search(r"\bno longer\b", doc.text, re.I):
        out.add("no longer")
    if re.search(r"\bas of\b", doc.text, re.I):
        out.add("as of")
    if re.search(r"\bfrom\b[^.;]{1,40}?\b(to|until|through|till)\b", doc.text, re.I) or \
            re.search(r"\b\d{3,4}\s*[–-]\s*\d{2,4}\b", doc.text):
        out.add("from-to")
    return out


def _tense(doc) -> str:
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None:
        return ""
    tags = {root.tag_} | {c.tag_ for c in root.children if c.dep_ in ("aux", "auxpass")}
    if tags & {"VBD"}:
        return "past"
    if tags & {"VBZ", "VBP"} or root.tag_ in ("VBZ", "VBP"):
        return "present"
    return ""


# ---- quantities -----------------------------------------------------------------------------


def _number_value(t) -> float | None:
    text = t.text.replace(",", "").replace("\u2009", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    if t.lower_ in _WORD_NUMBERS and t.pos_ == "NUM":
        return float(_WORD_NUMBERS[t.lower_])
    return None


def _precision(text: str) -> float:
    """Half a unit in the last significant place: '250,000' -> 5000, '1.2' -> 0.05, '14' -> 0.5."""
    text = text.replace(",", "")
    if "." in text:
        return 0.5 * 10 ** -len(text.split(".")[1])
    stripped = text.rstrip("0")
    zeros = len(text) - len(stripped) if stripped else 0
    return 0.5 * 10 ** zeros


def _quantities(doc, sent: _Sentence) -> list[_Qty]:
    out: list[_Qty] = []
    used: set[int] = set()
    for t in doc:
        if t.i in used or t.i in sent.date_tokens:
            continue
        value = _number_value(t)
        if value is None:
            continue
        if t.i in sent.name_at or (t.i > 0 and doc[t.i - 1].pos_ == "PROPN" and t.dep_ != "pobj"
                                   and t.head.i < t.i) or _is_code(t.text) and not t.like_num:
            continue  # part of a name or a version ("Larch 3")
        if t.i > 0 and doc[t.i - 1].lower_ in ("version", "v", "route", "no.", "number", "#", "platform", "gate"):
            continue
        prev = doc[t.i - 1].lower_ if t.i > 0 else ""
        following = doc[t.i + 1] if t.i + 1 < len(doc) else None
        if prev in ("age", "aged") or (prev == "at" and following is not None and not following.like_num and
                                       following.pos_ not in ("NOUN", "SYM", "PROPN") and
                                       following.lower_ not in UNITS and not following.text.startswith("°")):
            continue  # "at 88", "at the age of 71"
        if t.i + 1 < len(doc) and doc[t.i + 1].text in (":", "/", "-", "–") and t.i + 2 < len(doc) and \
                doc[t.i + 2].like_num:
            continue  # times, scores, ranges written with punctuation
        raw = t.text
        j = t.i + 1
        # "1.2 million", "2 million"
        while j < len(doc) and doc[j].lower_ in _MULTIPLIERS and doc[j].lower_ not in ("m", "k"):
            value *= _MULTIPLIERS[doc[j].lower_]
            used.add(j)
            raw_mult = _MULTIPLIERS[doc[j].lower_]
            j += 1
            break
        else:
            raw_mult = 1.0
        prec = _precision(raw) * raw_mult
        # approximation and bounds from the words before the number
        window = " ".join(x.lower_ for x in doc[max(0, t.i - 3):t.i])
        lo, hi = value - prec, value + prec
        if re.search(r"\b(nearly|almost|just under|close to|approaching)$", window):
            lo, hi = value * 0.88, value + prec
        elif re.search(r"\b(about|around|roughly|approximately|approx|some|circa|c\.|~|estimated|an estimated)$",
                       window):
            lo, hi = value * 0.9 - prec, value * 1.1 + prec
        elif re.search(r"\b(over|more than|above|at least|upwards of|exceeding|in excess of|just over|"
                       r"greater than)$", window):
            lo, hi = value, float("inf")
        elif re.search(r"\b(under|less than|fewer than|below|up to|at most|no more than)$", window):
            lo, hi = 0.0, value
        # unit
        dim, count_classes, unit_tok = "", frozenset(), None
        before = doc[t.i - 1] if t.i > 0 else None
        currency = None
        if before is not None and before.text in CURRENCY_SYMBOLS:
            currency = CURRENCY_SYMBOLS[before.text]
        nxt = doc[j] if j < len(doc) else None
        nxt2 = doc[j + 1] if j + 1 < len(doc) else None
        if currency:
            dim = f"money:{currency}"
        elif nxt is not None:
            low = nxt.lower_
            if low == "°" and nxt2 is not None and nxt2.text.upper() in ("C", "F"):
                dim, unit_tok = "temp", nxt2
                if nxt2.text.upper() == "F":
                    value, lo, hi = [(x - 32) * 5 / 9 if x != float("inf") else x for x in (value, lo, hi)]
            elif low in ("°c", "°f", "℃"):
                dim, unit_tok = "temp", nxt
                if low == "°f":
                    value, lo, hi = [(x - 32) * 5 / 9 if x != float("inf") else x for x in (value, lo, hi)]
            elif low in ("square", "sq") and nxt2 is not None and nxt2.lower_ in UNITS:
                base = UNITS[nxt2.lower_]
                dim, unit_tok = "area", nxt2
                value, lo, hi = [x * base[1] ** 2 for x in (value, lo, hi)]
            elif low in UNITS or nxt.lemma_.lower() in UNITS:
                dim_name, factor = UNITS.get(low) or UNITS[nxt.lemma_.lower()]
                if not (low in ("m", "t", "s", "h", "g", "n", "w", "l") and nxt.pos_ not in ("NOUN", "PROPN", "X")):
                    dim, unit_tok = dim_name, nxt
                    value, lo, hi = [x * factor for x in (value, lo, hi)]
            elif low in CURRENCY_WORDS:
                dim, unit_tok = f"money:{CURRENCY_WORDS[low]}", nxt
                if low in ("cent", "cents"):
                    value, lo, hi = [x / 100 for x in (value, lo, hi)]
            elif t.dep_ == "nummod" and t.head.pos_ == "NOUN" and t.head.i > t.i:
                noun = t.head
                lemma = noun.lemma_.lower()
                if lemma in UNITS:
                    dim_name, factor = UNITS[lemma]
                    dim, unit_tok = dim_name, noun
                    value, lo, hi = [x * factor for x in (value, lo, hi)]
                else:
                    dim, unit_tok = f"count:{lemma}", noun
                    count_classes = _COUNT_CLASSES.get(lemma, frozenset())
            elif nxt.pos_ == "NOUN" and nxt.tag_ == "NNS":
                lemma = nxt.lemma_.lower()
                dim, unit_tok = f"count:{lemma}", nxt
                count_classes = _COUNT_CLASSES.get(lemma, frozenset())
        if dim == "" and t.dep_ == "nummod" and t.head.lower_ in ("%", "percent"):
            dim, unit_tok = "percent", t.head
        if dim == "" and nxt is not None and nxt.lower_ == "half" or t.lower_ == "half":
            continue
        if dim.startswith("count:") and dim[6:] in ("time", "times"):
            continue  # "15 times" is a frequency, not a count of things
        keys, nouns = _quantity_attribute(doc, t, unit_tok)
        if dim.startswith("count:"):
            keys = keys | {dim[6:]} | count_classes
        out.append(_Qty(value=value, lo=lo, hi=hi, dim=dim, count_classes=count_classes, token=t.i,
                        keys=frozenset(keys), nouns=frozenset(nouns), text=raw))
    return out


def _keys_of(lemma: str) -> set[str]:
    lemma = lemma.lower()
    return {lemma, *(_CLASSES.get(lemma, ())), "stem:" + _stem(lemma)}


def _quantity_attribute(doc, num, unit_tok) -> tuple[set[str], set[str]]:
    """What a number measures: the noun it is 'of', an adjective (42 km long), the verb, the subject."""
    keys: set[str] = set()
    nouns: set[str] = set()
    anchor = unit_tok if unit_tok is not None and unit_tok.i != num.i else num
    if anchor.dep_ != "pobj" and num.dep_ == "pobj":
        anchor = num

    def add_noun(tok):
        if tok.pos_ in ("NOUN", "ADJ") and tok.lemma_.lower() not in ("number", "total", "figure", "value",
                                                                       "amount", "level", "rate"):
            keys.update(_keys_of(tok.lemma_))
            nouns.add(tok.lemma_.lower())
            for c in tok.children:
                if c.dep_ in ("amod", "compound") and c.pos_ in ("ADJ", "NOUN", "VERB") and \
                        c.lemma_.lower() not in ("total", "overall", "current", "official", "global"):
                    keys.update(_keys_of(c.lemma_))

    # "GB of memory", "leaves of parchment": what the unit is of
    for c in (unit_tok.children if unit_tok is not None else ()):
        if c.dep_ == "prep" and c.lower_ == "of":
            for p in c.children:
                if p.dep_ == "pobj":
                    add_noun(p)
    # "a maximum depth of 86 metres", "a capacity of 28,500"
    if anchor.dep_ == "pobj" and anchor.head.lower_ == "of" and anchor.head.head.pos_ in ("NOUN",):
        add_noun(anchor.head.head)
    # "a 5,000 mAh battery": the unit modifies a noun
    if unit_tok is not None and unit_tok.dep_ in ("compound", "nmod", "amod") and unit_tok.head.pos_ == "NOUN":
        add_noun(unit_tok.head)
    if num.dep_ in ("compound", "nummod") and num.head.pos_ == "NOUN" and num.head is not unit_tok and \
            num.head.lemma_.lower() not in UNITS:
        add_noun(num.head)
    # "42 kilometres long"
    for tok in (anchor, anchor.head):
        if tok.pos_ == "ADJ":
            keys.update(_keys_of(tok.lemma_))
            nouns.add(tok.lemma_.lower())
        if tok.dep_ == "npadvmod" and tok.head.pos_ == "ADJ":
            keys.update(_keys_of(tok.head.lemma_))
            nouns.add(tok.head.lemma_.lower())
    # governing verb, and an attribute noun subject ("the population was 247,312")
    verb = anchor
    while verb.dep_ not in ("ROOT",) and verb.pos_ not in ("VERB", "AUX"):
        verb = verb.head
    if verb.pos_ in ("VERB", "AUX") or (verb.dep_ == "ROOT" and verb.lemma_.lower() in _CLASSES):
        lemma = _lemma(verb)
        if lemma not in _LIGHT_VERBS:
            keys.update(_keys_of(lemma))
        for c in verb.children:
            if c.dep_ in ("nsubj", "nsubjpass") and c.pos_ == "NOUN" and \
                    (lemma in _LIGHT_VERBS or lemma in ("rate", "measure", "stand")) and \
                    (c.lemma_.lower() in _CLASSES or any(x.dep_ in ("poss", "prep") for x in c.children)):
                add_noun(c)  # "Rennvik's population was ...", "the battery in the Hexa X2 is rated at ..."
            if c.dep_ == "acomp" and c.pos_ == "ADJ":
                keys.update(_keys_of(c.lemma_))
                nouns.add(c.lemma_.lower())
            if c.dep_ == "dobj" and c.pos_ == "NOUN" and c is not unit_tok and c is not num and \
                    lemma in _LIGHT_VERBS and not any(x.i == num.i for x in c.subtree):
                add_noun(c)
    return keys, nouns


# ---- predicates -----------------------------------------------------------------------------


def _preds(doc) -> list[_Pred]:
    out = []
    for t in doc:
        lemma = _lemma(t)
        if t.pos_ == "VERB":
            pass
        elif t.pos_ == "ADJ" and t.dep_ in ("acomp", "attr", "conj", "oprd", "ROOT", "amod"):
            if t.dep_ == "amod" and lemma not in _STATES and lemma not in _CLASSES:
                continue
        elif not (t.pos_ in ("NOUN", "PROPN") and (lemma in _CLASSES or lemma in _STATES or
                                                   (t.dep_ == "attr" and t.pos_ == "NOUN") or
                                                   _stem(lemma) in _NOUN_STEMS or _first_event(t) or
                                                   (lemma, "chief") in _MULTIWORD_ROLES)):
            continue
        classes = set(_CLASSES.get(lemma, ()))
        particle = next((c.lower_ for c in t.children if c.dep_ in ("prt", "prep", "dobj", "acomp", "advmod")
                         and (lemma, c.lower_) in _PHRASES), None)
        if particle:
            classes.add(_PHRASES[(lemma, particle)])
        if any(c.dep_ == "prep" and c.lower_ == "to" and any(x.lower_ == "trial" for x in c.children)
               for c in t.children):
            classes.add("tried")  # "went to trial"
        for c in t.children:
            if (lemma, c.lower_) in _MULTIWORD_ROLES:
                classes.add(_MULTIWORD_ROLES[(lemma, c.lower_)])
        if _first_event(t):
            classes.add("first_event:" + lemma)
        if lemma in ("fight", "play") and any(c.dep_ == "nsubjpass" for c in t.children):
            classes.add("hold_event")  # "the battle was fought", "the final was played"
        if lemma == "first" or lemma == "person":
            continue
        if _repeated(t):
            # "re-released", "rebuilt", "reopened again": another occurrence, not the single event
            classes = {"re:" + c for c in classes} or {"re:" + lemma}
        antonym = lemma in _ANTONYM_VERBS
        if antonym:
            classes.add(_ANTONYM_VERBS[lemma])
        out.append(_Pred(i=t.i, lemma=lemma, classes=frozenset(classes), neg=_negation(t), antonym=antonym))
    return out


def _states(sent: _Sentence) -> list[tuple[str, _Pred]]:
    doc = sent.doc
    out = []
    for p in sent.preds:
        t = doc[p.i]
        if p.neg:
            continue
        for state in _STATES.get(p.lemma, ()):
            if state in ("completed", "cancelled", "acquired", "ended", "dead", "crashed", "settled") and \
                    t.pos_ not in ("VERB", "ADJ", "NOUN"):
                continue
            out.append((state, p))
        if "tried" in p.classes:
            out.append(("tried", p))
        if p.lemma == "open" and t.dep_ in ("amod", "compound") and t.head.lemma_.lower() == "source":
            out.append(("open_source", p))
        # ongoing: "still stands", "is actively maintained", "has operated without interruption since 1998"
        advs = {c.lower_ for c in t.children if c.dep_ in ("advmod", "npadvmod")}
        preps = {(c.lower_, x.lemma_.lower()) for o in [t, *[c for c in t.children if c.dep_ == "dobj"]]
                 for c in o.children if c.dep_ == "prep" for x in c.children}
        if t.pos_ in ("VERB", "ADJ") and (advs & {"still", "actively"} or ("without", "interruption") in preps or
                                          (p.lemma in ("remain", "continue") and not p.neg)):
            if p.lemma not in ("remain",) or any(c.dep_ in ("acomp", "xcomp") and c.lemma_.lower() in
                                                 ("open", "active", "operational", "available", "operate")
                                                 for c in t.children):
                out.append(("ongoing", p))
        if ("without", "incident") in preps or advs & {"safely", "successfully"}:
            out.append(("uneventful", p))
    # "open source" written as two words
    if re.search(r"\bopen[- ]source\b", sent.text, re.I) and not re.search(r"\bnot\b.{0,20}open[- ]source",
                                                                           sent.text, re.I):
        root = next((t for t in doc if t.dep_ == "ROOT"), None)
        if root is not None:
            out.append(("open_source", _Pred(i=root.i, lemma=root.lemma_.lower(), classes=frozenset(), neg="",
                                             antonym=False)))
    return out


_MULTIWORD_ROLES = {("executive", "chief"): "ceo", ("officer", "executive"): "ceo", ("director", "managing"): "ceo",
                    ("editor", "chief"): "editor"}


def _repeated(t) -> bool:
    doc = t.doc
    if t.i >= 2 and doc[t.i - 1].text in ("-", "–") and doc[t.i - 2].lower_ == "re":
        return True
    if t.lower_.startswith("re-") or any(c.lower_ in ("again", "re") for c in t.children):
        return True
    lemma = t.lemma_.lower()
    return lemma.startswith("re") and lemma[2:] in _CLASSES and lemma not in _CLASSES


def _first_event(t) -> bool:
    """A noun marked as the first of its kind: 'its first commercial flight', 'the maiden voyage'."""
    return t.pos_ == "NOUN" and any(c.dep_ == "amod" and c.lower_ in ("first", "maiden", "inaugural", "initial")
                                    for c in t.children) and t.lemma_.lower() not in _GENERIC_PERSON


def _lemma(t) -> str:
    """spaCy's lemma, repaired where the small model drops an 'e': "staged" -> "stag", "rated" -> "rat".
    A consonant-vowel-consonant stem would have doubled its consonant ("ratted"), so "rated" is from "rate"."""
    lemma = t.lemma_.lower()
    if t.pos_ in ("VERB", "AUX") and t.lower_ == lemma + "ed" and len(re.findall(r"[aeiouy]+", lemma)) == 1 and \
            re.search(r"(?:^|[^aeiou])[aeiou][bcdfgklmnprstvz]$", lemma):
        return lemma + "e"
    return lemma


#: Stems of predicate nouns we accept as predicates even outside the class table (conductor).
_NOUN_STEMS = {"conduct", "compat", "support", "access", "membership"}


def _negation(t) -> str:
    """How a predicate is negated: not/never/no longer on it or its copula, 'no X', or a privative head."""
    heads = [t]
    if t.dep_ in ("acomp", "attr", "oprd", "xcomp") or (t.pos_ in ("ADJ", "NOUN") and t.head.pos_ == "AUX"):
        heads.append(t.head)
    if t.dep_ == "conj":
        heads.append(t.head)
    for h in heads:
        for c in h.children:
            if c.dep_ == "neg" or (c.dep_ == "advmod" and c.lower_ == "never"):
                if c.lower_ == "never":
                    return "never"
                if c.lower_ == "no" and any(x.lower_ == "longer" for x in h.children):
                    return "no longer"
                return "not"
    # "contains no X", "No licence is needed"
    for c in t.children:
        if c.dep_ in ("dobj", "nsubjpass", "attr") and any(d.dep_ == "det" and d.lower_ in ("no", "neither")
                                                            for d in c.children):
            return "no"
        if c.dep_ in ("dobj", "attr") and c.lower_ in ("none", "nothing"):
            return "no"
    if t.pos_ in ("NOUN", "PROPN") and any(d.dep_ == "det" and d.lower_ == "no" for d in t.children):
        return "no"
    if t.pos_ in ("NOUN", "PROPN") and t.dep_ in ("dobj", "nsubjpass") and t.head.pos_ == "VERB":
        inherited = _negation(t.head)  # "does not charge fees": the fees are not charged either
        if inherited:
            return inherited
    # privative governors: "lacks X", "without X", "free of charge", "breaks compatibility"
    h = t.head
    if t.dep_ in ("dobj", "pobj", "attr") and t.pos_ in ("NOUN", "PROPN"):
        gov = h.head if h.pos_ == "ADP" else h
        if h.lower_ == "without" or gov.lemma_.lower() in _PRIVATIVE_HEADS or \
                (h.lower_ == "of" and gov.lower_ == "free"):
            return "privative"
    if t.dep_ == "xcomp" and h.lemma_.lower() in ("fail", "refuse", "decline"):
        return "privative"
    return ""
