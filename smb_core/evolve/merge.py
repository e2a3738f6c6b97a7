"""Deduplicate entities and concepts across documents into canonical layer-2 objects.

Candidates are found without comparing all pairs: blocking keys (normalised name, name without a
parenthesised qualifier or honorific, acronym) looked up in SQL, plus the nearest neighbours of each
new object's vector in Chroma. A pair is merged on several signals: name similarity, vector
similarity, compatible kind (a person is never merged with a place: homonyms stay apart) and shared
neighbours; with an LLM configured, the LLM decides the borderline pairs (`is_borderline`). Members
keep their layer-1 files, get status `merged` and a pointer to the canonical object (which lists them
as its `members`; a member of an active canonical object is never moved to another); their edges are
redirected to it; every merge is recorded in the `merges` table so that `undo_merge` can restore it.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from smb_core.bank import Bank
from smb_core.evolve import llm_judge
from smb_core.evolve.cycle import Cycle
from smb_core.evolve.contexts import context_vectors
from smb_core.extract.base import (
    MINOR_WORDS, QUALIFIER, base_name, blocking_keys, exact_key, normalise_name, partner_keys, split_qualifier,
)
from smb_core.integrity import member_list_differences
from smb_core.model import (
    CanonicalConcept, CanonicalEntity, Edge, EdgeType, Entity, EntityKind, MemoryObject, Status,
    model_for, stable_id,
)
from smb_core.stores.metadata import id_filter

NAME_SIMILAR = 0.88
VECTOR_SIMILAR = 0.86
CONTEXT_SIMILAR = 0.5
ANN_NEIGHBOURS = 8
#: A cosine this close to 1 is the same embedded text (the embedder ignores case).
SAME_VECTOR = 1 - 1e-5
#: Objects taken from one blocking key per new object. A common name ("film", "American") is shared by
#: thousands of mentions; comparing all of them is quadratic, while linking each to the same few
#: (lowest ids) is enough: groups are unions, so every mention still reaches one canonical object.
MAX_PER_KEY = 25
#: How far the similarity signals (cosines and name ratios, 0..1) may move before a pair counts as
#: borderline. Half the +0.1 the rule itself asks of context to call a kind conflict clearly overruled;
#: on names it puts a lone surname (0.90, "Okafor" ~ "Mara Okafor") inside the band and a full token
#: match (0.95) outside it, and on vectors it covers cosines 0.81-0.91 around VECTOR_SIMILAR.
BORDERLINE = 0.05
#: A row of the `merges` table, as merges and repointings record it (`undo_merge` reads it back).
MERGE_RECORD_COLUMNS = ["cycle", "survivor", "member", "score", "signals", "moved_from", "redirected_edges"]


#: Canonical objects a merge keeps whole for the cycle's digest (the rest by id only).
SHOWN = 10


@dataclass
class MergeResult:
    #: Every canonical object the merge made or extended: id -> type. Ids only: a first cycle over a large
    #: corpus makes one for most names seen in two documents, and kept whole, with their member lists,
    #: every chunk's objects stayed in memory until the layer ended.
    canonical_ids: dict[str, str] = field(default_factory=dict)
    shown: list[MemoryObject] = field(default_factory=list)  # the first SHOWN of them, as last written
    #: Members that joined a canonical object (counted, not kept: millions of ids in a first cycle over
    #: a large corpus). One a later chunk moves on (its canonical object was absorbed) counts once.
    merged_members: int = 0
    redirected_edges: int = 0
    absorbed: int = 0  # canonical objects of earlier cycles joined into another by a new mention
    repointed: int = 0  # absorbed canonical objects pointed on to the end of their chain

    @property
    def groups(self) -> int:
        return len(self.canonical_ids)


#: Kind pairs that NER rarely confuses: such a pair is a homonym, not one thing mislabelled.
#: (Organization/person/work/place confusions are common in small NER models, so they do not block.)
_HARD_CONFLICTS = {frozenset({EntityKind.PERSON, EntityKind.PLACE}), frozenset({EntityKind.DATE, EntityKind.PERSON}),
                   frozenset({EntityKind.DATE, EntityKind.PLACE}), frozenset({EntityKind.DATE, EntityKind.ORGANIZATION}),
                   frozenset({EntityKind.DATE, EntityKind.WORK})}


def _kinds_conflict(a: MemoryObject, b: MemoryObject) -> bool:
    """The entities' kinds cannot both be right for one thing (a person is not a place)."""
    if isinstance(a, Entity) and isinstance(b, Entity):
        return frozenset({a.entity_kind, b.entity_kind}) in _HARD_CONFLICTS
    return False


def decide(names: float, vector: float, context: float, shared: int, multiword: bool, conflict: bool) -> bool:
    """Whether two objects name the same thing, from independent signals.

    The same multi-word name is enough unless the kinds conflict; a one-word entity name ("Mercury",
    "Jordan") also needs its contexts to agree, and more so beside a different name ("Wilhelm" beside
    "Johann Wilhelm", an acronym beside its expansion); a similar multi-word name needs a close vector or
    context. `multiword` is false when either name is a one-word or generic (`_generic_name`) entity name.
    Contexts or shared neighbours can overrule a kind conflict, because NER kinds are noisy.
    (Concepts are terms: the same term is one concept, and `split` later separates its senses.)"""
    agreeing_context = context >= CONTEXT_SIMILAR or shared >= 1
    if conflict and not (context >= CONTEXT_SIMILAR + 0.1 or shared >= 2):
        return False
    if names == 1.0:
        return multiword or agreeing_context
    if not multiword:  # vectors of names that share a word are close whatever they name; one shared
        # neighbour is often a hub ("United States"), so it takes two
        return names >= NAME_SIMILAR and (context >= CONTEXT_SIMILAR or shared >= 2)
    return names >= NAME_SIMILAR and (vector >= VECTOR_SIMILAR or agreeing_context)


def is_borderline(names: float, vector: float, context: float, shared: int, multiword: bool, conflict: bool) -> bool:
    """Whether `decide` changes its answer when the similarity signals move by BORDERLINE either way:
    then the rule is too close to call, and an LLM (when configured) decides. A name similarity of 1.0
    is a blocking-key match, not a measurement, so it does not move; counts and kinds do not either."""
    def at(delta: float) -> bool:
        moved = names if names == 1.0 else min(names + delta, 0.999)
        return decide(moved, vector + delta, context + delta, shared, multiword, conflict)
    return at(-BORDERLINE) != at(BORDERLINE)


#: An acronym beside a name with its initials: a lead, not proof ("CW" is the Cold War, County Wexford
#: and Cable & Wireless alike), so it counts as a similar name that needs a close vector or context.
ACRONYM_SIMILARITY = 0.9
_NUMBER = re.compile(r"\d+")
#: regnal and series numbers (Henry VIII, World War II), not initials ("John V. Lindsay", "I.B.M.")
_ROMAN = re.compile(r"\b(?=[IVX]+\b)X{0,3}(?:IX|IV|V?I{0,3})\b(?!\.)")
_NUMBER_WORDS = {w: str(n) for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS |= {w: str(10 * n) for n, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)}
_NUMBER_WORDS |= {w: str(n) for n, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth".split(), 1)}
_NUMBER_WORDS |= {"hundred": "100", "thousand": "1000", "million": "1000000"}


def numbers_in(name: str) -> list[str]:
    """The numbers a name states, in digits, words ("forty", "second") or Roman numerals ("VIII"), as
    digits: "World War II" and "the Second World War" state the same number."""
    words = [_NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", name.lower()) if w in _NUMBER_WORDS]
    roman = [str(_roman_value(r)) for r in _ROMAN.findall(name) if r]
    return sorted([*(str(int(d)) for d in _NUMBER.findall(name)), *words, *roman])


def _joins_two(name: str) -> bool:
    """The name joins two things with "and" or "&" ("R&B", "Tom and Jerry"): it is not the name of one
    of them, nor a person's initials ("R.B.")."""
    return "&" in name or " and " in f" {name.lower()} "


def _roman_value(numeral: str) -> int:
    values = [{"I": 1, "V": 5, "X": 10}[c] for c in numeral]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


@lru_cache(maxsize=500_000)
def name_similarity(a: str, b: str, concept: bool = False, person: bool = False) -> float:
    """1.0 when two names share a blocking key, ACRONYM_SIMILARITY for an acronym and its expansion,
    else string similarity. Names with different numbers ("September 2012" / "11 September 2015",
    "Apollo 11" / "Apollo 13", "forty years" / "fifty years", "Henry VII" / "Henry VIII") are different
    things: 0, as are a name joining two things with "and"/"&" and one that does not. A person's names
    must agree word for word, initials aside: "Mara Quint" is not "Mara Quist", nor "Elias Brandt"
    "Elias Brandtner"."""
    if numbers_in(a) != numbers_in(b) or _joins_two(a) != _joins_two(b):
        return 0.0
    shared = partner_keys(blocking_keys(a)) & blocking_keys(b)
    if any(":" not in key for key in shared) or _compact(a) == _compact(b):
        return 1.0
    if shared:
        return ACRONYM_SIMILARITY
    ratio = difflib.SequenceMatcher(None, normalise_name(a), normalise_name(b)).ratio()
    if _words_differ(a, b, person):  # "Berlin International Film Festival" / "Cannes International Film Festival"
        ratio = min(ratio, DIFFERENT_WORDS_SIMILARITY)
    return max(ratio, _token_match(a, b, concept, person))


@lru_cache(maxsize=500_000)
def _compact(name: str) -> str:
    """A name without its qualifier and spaces: "Data Harbor" is "DataHarbor", "e-mail" "email"."""
    return exact_key(QUALIFIER.sub("", name)).replace(" ", "")


#: The string similarity two multi-word names keep at most when one has a word the other lacks (then
#: only `_token_match` can call them one name).
DIFFERENT_WORDS_SIMILARITY = 0.8


def _words_differ(a: str, b: str, person: bool = False) -> bool:
    """Both names have two words or more and one has a word with no close counterpart in the other
    ("International Film Festival" / "Cannes International Film Festival"): however alike the strings
    are, the words say what is named. For a person, a close word is the same word or its initial."""
    wa, wb = _words(a), _words(b)
    if len(wa) < 2 or len(wb) < 2:
        return False

    def close(x: str, y: str) -> bool:
        if person:
            return _same_word(x, y, person)
        return _same_word(x, y) or difflib.SequenceMatcher(None, x, y).ratio() >= 0.8

    return not all(any(close(w, v) for v in wb) for w in wa) or not all(any(close(w, v) for v in wa) for w in wb)


#: Words that name the kind of an institution or its field, not one institution: a name made only of
#: them ("Department of Transport", "Supreme Court", "National Museum") is held by one body in each
#: country or city, so, like a one-word name, it needs agreeing contexts to be one thing.
_GENERIC_NAME_WORDS = frozenset("""
    academy administration agency archive archives assembly authority bank board bureau cabinet central
    chamber city civil commission committee council county court defence defense department district
    education energy environment federal finance foreign general gallery government health high home
    hospital house housing interior justice labour labor library ministry municipal museum national
    office parliament police post public railway royal school senate service state supreme transport
    treasury trade university war water works affairs agriculture culture security development
    """.split())


def _generic_name(name: str) -> bool:
    """A name made only of generic institution words ("Department of Transport", "High Court")."""
    words = [w for w in _words(name) if w not in MINOR_WORDS]
    return bool(words) and all(_singular(w) in _GENERIC_NAME_WORDS or w in _GENERIC_NAME_WORDS for w in words)


@lru_cache(maxsize=500_000)
def _words(name: str) -> tuple[str, ...]:
    """The normalised words of a name without its parenthesised qualifier ("Algiers (film)" -> algiers);
    cached: a pair's names are split for several signals."""
    return tuple(normalise_name(QUALIFIER.sub("", name)).split())


def _same_word(x: str, y: str, person: bool = False) -> bool:
    """The same word, or one abbreviating the other ("labs" / "laboratories"); a plural 's' aside. In a
    person's name only an initial abbreviates ("j" / "john"): "brandt" does not abbreviate "brandtner"."""
    if person:
        return x == y or (min(len(x), len(y)) == 1 and x[0] == y[0])
    x, y = _singular(x), _singular(y)
    return x == y or (min(len(x), len(y)) >= 3 and (x.startswith(y) or y.startswith(x)))


def _singular(word: str) -> str:
    """An English plural's stem: batteries -> battery, boxes -> box, indexes -> index, labs -> lab."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    return word.rstrip("s")


def _token_match(a: str, b: str, concept: bool = False, person: bool = False) -> float:
    """Share of the shorter name's words found in the longer one, allowing abbreviations
    ("Labs" ~ "Laboratories") and a surname standing for a full name ("Okafor" ~ "Mara Okafor").
    Concepts must match word for word: "film director" is a broader concept than "french film director"."""
    short, long = sorted((_words(a), _words(b)), key=len)
    if not short or (concept and len(short) != len(long)):
        return 0.0

    def same(x: str, y: str) -> bool:
        return _same_word(x, y, person)

    matched = sum(any(same(w, v) for v in long) for w in short)
    if matched < len(short):
        return 0.0
    if len(short) == 1 and len(long) > 1:
        return 0.9 if same(short[0], long[-1]) else 0.0  # a lone surname, never a lone first word
    if len(short) < len(long) and not (same(short[0], long[0]) and same(short[-1], long[-1])):
        return 0.0  # "Ali Khan" / "Nusrat Fateh Ali Khan", "United States" / "United States Army"
    return 0.95


def _neighbour_names(db, ids: list[str]) -> dict[str, set[str]]:
    """Names of the entities that share a claim with each object: its context in the graph. A merged
    object's edges now end at its canonical object; its context is then read from the claims of its own
    document that reference the canonical object, so that a pair is judged the same whether its older
    side was merged in an earlier cycle (or chunk) or not."""
    rows = db.sql(
        """
        WITH asked AS (
            SELECT id, json_extract_string(data, '$.merged_into') AS canonical, source
            FROM objects WHERE id IN (SELECT unnest(?))
        ), claims AS (
            SELECT a.id, e1.head, e1.tail FROM asked a
            JOIN edges e1 ON e1.tail = a.id AND e1.edge_type = 'references' WHERE a.canonical IS NULL
            UNION ALL
            SELECT a.id, e1.head, e1.tail FROM asked a  -- its document's objects first: a canonical
            JOIN objects c ON c.source = a.source AND a.source <> ''  -- object may have thousands of claims
            JOIN edges e1 ON e1.head = c.id AND e1.tail = a.canonical AND e1.edge_type = 'references'
            WHERE a.canonical IS NOT NULL
        )
        SELECT x.id, list(DISTINCT n.name) FROM claims x
        JOIN edges e2 ON e2.head = x.head AND e2.tail <> x.tail AND e2.edge_type = 'references'
        JOIN names n ON n.object_id = e2.tail
        GROUP BY x.id
        """,
        [ids],
    )
    # One Python string per distinct name: the same names come back for thousands of objects (at
    # 10,000 documents, one string per row held 0.6 GB for a chunk of 20,000 new objects).
    names: dict[str, str] = {}
    return {object_id: {names.setdefault(name, name) for name in found} for object_id, found in rows}


def _similar_names(bank: Bank, new: dict[str, MemoryObject], vectors: dict) -> dict[str, list[str]]:
    """Layer-1 objects of the same type whose name vectors are close (VECTOR_SIMILAR) to each new one's.

    An entity's or concept's vector embeds its name alone, so objects of one name share one vector: the
    index is asked once per (type, name), not once per object (a third fewer queries on 2wiki). For the
    same reason the hits with the very same vector are left out: they are mentions of the same name,
    which its blocking key already links (`MAX_PER_KEY`), and which of more than ANN_NEIGHBOURS such ties
    the index returns varies from run to run (573 of 289k pairs differed between two identical runs)."""
    asked: dict[tuple[str, str], list[str]] = defaultdict(list)  # (type, name) -> the new objects it stands for
    for oid, obj in new.items():
        if oid in vectors:
            asked[(obj.type.value, obj.text())].append(oid)
    out: dict[str, list[str]] = {}
    for type_ in sorted({t for t, _ in asked}):
        keys = [key for key in asked if key[0] == type_]
        prefix = f"{model_for(type_).id_prefix}-"  # layer-1 ids only: canonical objects have their own prefix
        found = bank.nearest([vectors[asked[key][0]] for key in keys], ANN_NEIGHBOURS, prefix=prefix,
                             below=SAME_VECTOR)
        for key, hits in zip(keys, found):
            close = [other for other, similarity in hits if VECTOR_SIMILAR <= similarity < SAME_VECTOR]
            for oid in asked[key]:
                out[oid] = close
    return out


def find_pairs(bank: Bank, new_ids: list[str]) -> list[tuple[str, str, float, dict]]:
    """Pairs (a, b, score, signals) of layer-1 objects that name the same thing."""
    if not new_ids:
        return []
    llm = llm_judge.enabled(bank.settings)
    name_floor = NAME_SIMILAR - BORDERLINE if llm else NAME_SIMILAR  # the LLM also sees names just below
    with bank.reading() as db:
        new = db.get_objects(new_ids)
        keys = {oid: partner_keys(blocking_keys(o.title) | {k for a in getattr(o, "aliases", [])
                                                             for k in blocking_keys(a)})
                for oid, o in new.items()}
        all_keys = sorted({k for ks in keys.values() for k in ks})
        rows = db.sql(
            "SELECT n.name, n.object_id FROM names n JOIN objects o ON o.id = n.object_id "
            "WHERE n.name IN (SELECT unnest(?)) AND o.layer = 1 AND o.status IN ('active', 'merged')",
            [all_keys],
        )
        by_key: dict[str, set[str]] = defaultdict(set)
        for name, object_id in rows:
            by_key[name].add(object_id)
        block = {k: sorted(ids)[:MAX_PER_KEY] for k, ids in by_key.items()}
        candidates: dict[str, set[str]] = defaultdict(set)
        for oid, ks in keys.items():
            for k in ks:
                candidates[oid].update(block.get(k, ()))
        vectors = bank.vectors_of(list(new))
        for oid, found in _similar_names(bank, new, vectors).items():
            candidates[oid].update(found)
        other_ids = sorted({c for cs in candidates.values() for c in cs} - set(new))
        others = {**new, **db.get_objects(other_ids)}
        context = _neighbour_names(db, sorted(others))
        doc_titles = {d.id: d.title for d in db.sources_by_ids(sorted({s for o in others.values()
                                                                        for s in o.source_ids}))}
    qualifier = {oid: _title_qualifier(o.title, [doc_titles.get(s) for s in o.source_ids]) for oid, o in others.items()}
    other_vectors = bank.vectors_of(other_ids)
    all_vectors = {**vectors, **other_vectors}
    scored = []  # (a, b, name similarity, vector similarity, shared neighbours, multiword, conflict)
    for oid, cands in candidates.items():
        a = others[oid]
        for cid in cands:
            if cid == oid or cid not in others:
                continue
            b = others[cid]
            if a.type != b.type or a.source_ids == b.source_ids:
                continue  # same document: the extractor already unified same-named objects
            if qualifier[oid] and qualifier[cid] and qualifier[oid] != qualifier[cid]:
                continue  # each the subject of a document whose title tells it apart from the other
            person = all(getattr(o, "entity_kind", None) == EntityKind.PERSON for o in (a, b))  # NER is noisy
            names = name_similarity(a.title, b.title, not isinstance(a, Entity), person)
            if names < name_floor:
                continue
            cosine = float(all_vectors[oid] @ all_vectors[cid]) if oid in all_vectors and cid in all_vectors else 0.0
            shared = len(context.get(oid, set()) & context.get(cid, set()))
            multiword = not isinstance(a, Entity) or all(len(_words(o.title)) >= 2 and not _generic_name(o.title)
                                                         for o in (a, b))
            scored.append((a, b, names, cosine, shared, multiword, _kinds_conflict(a, b)))
    # Context sentences are embedded only for the pairs the other signals leave undecided.
    undecided = [x for x in scored
                 if decide(x[2], x[3], 0.0, *x[4:]) != decide(x[2], x[3], 1.0, *x[4:])]
    described = sorted({o.id: o for x in undecided for o in x[:2] if o.description}.values(), key=lambda o: o.id)
    contexts = context_vectors(bank, described)
    pairs, borderline = [], {}
    for a, b, names, cosine, shared, multiword, conflict in scored:
        ctx = float(contexts[a.id] @ contexts[b.id]) if a.id in contexts and b.id in contexts else 0.0
        signals = (names, cosine, ctx, shared, multiword, conflict)
        accepted = decide(*signals)
        if accepted or llm:
            score = 0.4 * names + 0.3 * cosine + 0.2 * ctx + 0.1 * min(shared, 3) / 3
            pair = tuple(sorted((a.id, b.id)))
            row = (*pair, round(score, 4), {"name": round(names, 3), "vector": round(cosine, 3),
                                            "context": round(ctx, 3), "shared_neighbours": shared})
            if llm and is_borderline(*signals):
                borderline[pair] = (a, b, accepted, row)
            elif accepted:
                pairs.append(row)
    if borderline:
        pairs += _confirm(bank, [borderline[key] for key in sorted(borderline)])
    pairs += _surnames_in_document(new)
    unique = {(a, b): (a, b, score, sig) for a, b, score, sig in pairs}
    return [unique[key] for key in sorted(unique)]


def _title_qualifier(name: str, doc_titles: list[str | None]) -> str | None:
    """The qualifier in the title of a document about the object of this name: "footballer" for John
    Whitcombe in "John Whitcombe (footballer)", "berkshire" for Newbury in "Newbury, Berkshire". Such
    titles exist to tell namesakes apart, so two objects with different ones are different things, however
    alike their names and sentences. None when no document is titled by the name with a qualifier."""
    key = normalise_name(QUALIFIER.sub("", name))
    for title in doc_titles:
        split = split_qualifier(title or "")
        if split and split[0] == key:
            return split[1]
    return None


def _surnames_in_document(new: dict[str, MemoryObject]) -> list[tuple[str, str, float, dict]]:
    """A lone surname and the one full name of a person ending with it in the same document ("Okafor"
    after "Mara Okafor"): the document introduced the person, so they are one, whatever the sentences.
    With two such full names ("Johann Wilhelm", "Adolf Wilhelm") the surname stays on its own."""
    people: dict[tuple[str, str], list[str]] = defaultdict(list)  # (document, surname) -> full names
    lone: list[Entity] = []
    for obj in new.values():
        if not isinstance(obj, Entity) or len(obj.source_ids) != 1 or obj.entity_kind not in (EntityKind.PERSON,
                                                                                              EntityKind.OTHER):
            continue
        words = _words(obj.title)
        if len(words) == 1:
            lone.append(obj)
        elif len(words) >= 2 and obj.entity_kind == EntityKind.PERSON:
            people[(obj.source_ids[0], words[-1])].append(obj.id)
    pairs = []
    for obj in lone:
        full = people.get((obj.source_ids[0], " ".join(_words(obj.title))), [])
        if len(full) == 1:
            a, b = sorted((obj.id, full[0]))
            pairs.append((a, b, 0.9, {"name": 0.9, "same_document": True}))
    return pairs


def _confirm(bank: Bank, borderline: list[tuple]) -> list[tuple[str, str, float, dict]]:
    """The borderline pairs the LLM says are one thing; where it gives no answer, the rule's decision.
    Who decided goes into the pair's signals, which the `merges` table keeps for audit."""
    verdicts = llm_judge.LLMJudge(bank.settings).same_things([(a, b) for a, b, _, _ in borderline])
    accepted = []
    for (_, _, rule, (a_id, b_id, score, signals)), judged in zip(borderline, verdicts):
        if judged.answer is not None:
            same, audit = judged.answer.same, {"judge": "llm", "llm_reason": judged.answer.reason}
        else:
            same, audit = rule, {"judge": "rule", "llm_error": judged.error}
        if same:
            accepted.append((a_id, b_id, score, {**signals, **audit}))
    return accepted


def _groups(pairs: list[tuple[str, str, float, dict]], titles: dict[str, str],
            full_names: dict[str, set[str]]) -> list[set[str]]:
    """Groups of accepted pairs, joined strongest pair first, except where a join would put two clearly
    different full names in one group (`full_names`: id -> the multi-word entity names it stands for):
    a lone surname or an acronym accepted beside each of them ("RB" beside Richard Band and Robert
    Beatty) joins one, instead of making the two one thing. A pair of two full names (`titles`) was
    accepted on its own evidence, and decides for those two."""
    parent: dict[str, str] = {}
    names: dict[str, set[str]] = {}  # root -> the distinct full names in its group

    def find(x: str) -> str:
        if x not in parent:
            parent[x] = x
            names[x] = set(full_names.get(x, ()))
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, *_ in sorted(pairs, key=lambda p: (-p[2], p[0], p[1])):
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        own = {titles.get(a), titles.get(b)}
        if any(_different_full_names(x, y) for x in names[ra] for y in names[rb] if not {x, y} <= own):
            continue
        parent[ra] = rb
        names[rb] |= names.pop(ra)
    groups: dict[str, set[str]] = defaultdict(set)
    for x in list(parent):
        groups[find(x)].add(x)
    return [g for g in groups.values() if len(g) > 1]


def _different_full_names(a: str, b: str) -> bool:
    """Two names of different things: unalike, or one name with different qualifiers ("John Whitcombe
    (footballer)" / "John Whitcombe (politician)")."""
    if a == b:
        return False
    qa, qb = split_qualifier(a), split_qualifier(b)
    if qa and qb and qa[0] == qb[0]:
        return qa[1] != qb[1]
    if bool(qa) != bool(qb) and base_name(a) == base_name(b):
        return False  # "Newbury" beside "Newbury, Berkshire": a bare mention may be either namesake
    return name_similarity(a, b) < NAME_SIMILAR - BORDERLINE


def _full_names(bank: Bank, pairs: list[tuple[str, str, float, dict]]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """(the paired entities' own multi-word names, the names each stands for: its own multi-word names,
    the title of a document about it that tells it from its namesakes ("John Whitcombe (footballer)"),
    and, when it is already merged, those of its canonical object, so that a later cycle cannot chain a
    new full name or namesake to them either)."""
    ids = sorted({x for a, b, *_ in pairs for x in (a, b)})
    with bank.reading() as db:
        where, params = id_filter("o.id", ids)
        rows = db.sql(f"SELECT o.id, o.title, c.title, c.data->'$.aliases', s.title FROM objects o "
                      "LEFT JOIN objects c ON c.id = json_extract_string(o.data, '$.merged_into') AND c.status = 'active' "
                      "LEFT JOIN sources s ON s.id = o.source "
                      f"WHERE {where} AND o.type = 'entity'", params)
    own, out = {}, {}
    for object_id, title, canonical, aliases, doc_title in rows:
        names = {title, *([canonical] if canonical else []), *json.loads(aliases or "[]")}
        out[object_id] = {n for n in names if len(_words(n)) >= 2 or QUALIFIER.search(n)}
        if _title_qualifier(title, [doc_title]):
            out[object_id].add(doc_title)
        if len(_words(title)) >= 2:
            own[object_id] = title
    return own, out


#: New objects merged at once. A first cycle over a large corpus brings hundreds of thousands (about
#: 450k at 10,000 documents), and merging them in one batch held all their objects, pairs and edges at
#: once: 2.4 GB for 56k objects. Chunks of whole documents are merged one after another, as in the
#: cycles of a growing bank. A chunk's pairs reach objects of later chunks too (candidates come from
#: every layer-1 name), so those join the canonical objects earlier chunks made.
MERGE_CHUNK = 20_000


def merge(bank: Bank, cycle: Cycle, new_ids: list[str], chunk: int = MERGE_CHUNK) -> MergeResult:
    """Merge the new objects with what they duplicate; extend existing canonical objects when possible."""
    result, shown = MergeResult(), {}
    for ids in _document_chunks(bank, new_ids, chunk):
        part, made = _merge(bank, cycle, ids)
        for c in made:
            result.canonical_ids[c.id] = c.type.value
            if c.id in shown or len(shown) < SHOWN:
                shown[c.id] = c  # a later chunk's version of one is the latest
        result.merged_members += part.merged_members
        result.redirected_edges += part.redirected_edges
        result.absorbed += part.absorbed
    result.repointed = repoint_absorbed(bank, cycle)  # also mends banks evolved before it existed
    if result.absorbed:  # a canonical object a later chunk absorbed is no longer one
        with bank.reading() as db:
            active = {i for i, _, status, _ in db.object_summaries(list(result.canonical_ids)) if status == "active"}
        result.canonical_ids = {i: t for i, t in result.canonical_ids.items() if i in active}
    result.shown = [c for i, c in shown.items() if i in result.canonical_ids]
    return result


def _document_chunks(bank: Bank, ids: list[str], size: int) -> Iterator[list[str]]:
    """The objects in chunks of about `size`, each document's objects in one chunk (a lone surname
    pairs with the full name its document gave, `_surnames_in_document`)."""
    if len(ids) <= size:
        yield ids
        return
    with bank.reading() as db:  # a row per document, not per object: a first cycle has millions of objects
        where, params = id_filter("id", ids)
        documents = db.sql(f"SELECT list(id ORDER BY id) FROM objects WHERE {where} GROUP BY source_ids[1] "
                           "ORDER BY source_ids[1]", params)
    chunk: list[str] = []
    for (object_ids,) in documents:
        if len(chunk) >= size:
            yield chunk
            chunk = []
        chunk += object_ids
    if chunk:
        yield chunk


def _merge(bank: Bank, cycle: Cycle, new_ids: list[str]) -> tuple[MergeResult, list[MemoryObject]]:
    """Merge one chunk; also returns the canonical objects it wrote."""
    pairs = find_pairs(bank, new_ids)
    result = MergeResult()
    titles, full_names = _full_names(bank, pairs) if pairs else ({}, {})
    groups = _groups(pairs, titles, full_names) if pairs else []
    if not groups:
        return result, []
    signals: dict[str, tuple[float, dict]] = {}  # the first pair each member was accepted in
    for a, b, score, sig in pairs:
        signals.setdefault(a, (score, sig))
        signals.setdefault(b, (score, sig))
    with bank.reading() as db:
        members = db.get_objects(sorted({m for g in groups for m in g}))
        existing_ids = sorted({m.merged_into for m in members.values() if getattr(m, "merged_into", None)})
        existing = {i: o for i, o in db.get_objects(existing_ids).items() if o.status == Status.ACTIVE}
    # A group's claim on an existing canonical object is its best pair with a member of one; the strongest
    # claim joins first (only groups reaching the same object compete, see below).
    claim: dict[str, float] = defaultdict(float)
    for a, b, score, _ in pairs:
        if any(getattr(members.get(x), "merged_into", None) in existing for x in (a, b)):
            claim[a], claim[b] = max(claim[a], score), max(claim[b], score)
    joined: dict[str, tuple[MemoryObject | None, dict]] = {}  # canonical id -> (prior object, members by id)
    names_joined: dict[str, set[str]] = defaultdict(set)  # canonical id -> the full names its groups bring
    absorbed_into: dict[str, str] = {}  # canonical id of an earlier cycle -> the one it joins in this cycle

    def names_of(objs: list[MemoryObject]) -> set[str]:  # the full names a group brings
        return set().union(*(full_names.get(o.id, ()) for o in objs))

    def canonical_of_member(obj: MemoryObject) -> str | None:  # its active canonical object, if any
        cid = _chain_end(absorbed_into, getattr(obj, "merged_into", None))  # after this cycle's absorptions
        return cid if cid in existing else None

    for group in sorted(groups, key=lambda g: (-max(claim[m] for m in g), min(g))):
        objs = sorted((members[m] for m in group if m in members), key=lambda o: (-o.mentions, o.id))
        priors = list(dict.fromkeys(c for c in map(canonical_of_member, objs) if c))
        prior = existing[priors[0]] if priors else None
        for other in priors[1:]:
            # A new mention pairs with members of two canonical objects of earlier cycles: had they all
            # come in one cycle, the pairs would have made one group, so the two become one, unless one
            # is a sense a split made (re-joining it would undo the split).
            if not (getattr(prior, "sense", "") or getattr(existing[other], "sense", "")):
                absorbed_into[other] = prior.id
                names_joined[prior.id] |= names_joined.pop(other, set())
        # A member of another active canonical object stays there: moving it would leave that object's
        # member list naming it, and would pull mentions out of the senses a split made.
        objs = [o for o in objs if canonical_of_member(o) in (None, prior.id if prior else None)]
        parts = [(objs, prior)]
        if prior and any(_different_full_names(x, y) for x in names_joined[prior.id] for y in names_of(objs)):
            # Two groups `_groups` kept apart reach one canonical object through different members ("RB"
            # merged earlier; "Richard Band" pairs with one RB, "Robert Beatty" with another): the
            # group with the stronger claim joins it; the other's members that are not in it yet stay out
            # of it, joined only by their own pairs, not through the object they no longer join.
            rest = {o.id: o for o in objs if getattr(o, "merged_into", None) != prior.id}
            own_pairs = [p for p in pairs if p[0] in rest and p[1] in rest]
            parts = [(sorted((rest[m] for m in part), key=lambda o: (-o.mentions, o.id)), None)
                     for part in _groups(own_pairs, titles, full_names)]
        for part, part_prior in parts:
            canonical_id = part_prior.id if part_prior else _canonical_id(part[0])
            names_joined[canonical_id] |= names_of(part)
            # two groups can join one canonical object (through different members): it is written once
            joined.setdefault(canonical_id, (part_prior, {}))[1].update((o.id, o) for o in part)
    absorbed = {cid: existing[cid] for cid in absorbed_into}
    survivor_of = {cid: _chain_end(absorbed_into, cid) for cid in absorbed}
    for cid in [c for c in joined if c in absorbed]:  # a group joined it before a later one absorbed it
        _, objs = joined.pop(cid)
        joined.setdefault(survivor_of[cid], (existing[survivor_of[cid]], {}))[1].update(objs)
    with bank.reading() as db:
        # every member of an absorbed object moves to the survivor, not only those the new pairs reached
        moving = db.get_objects(sorted({m for c in absorbed.values() for m in c.members} - set(members)))
        members.update(moving)
        edge_rows = db.sql("SELECT id, head, tail, edge_type, weight, object_id FROM edges "
                           "WHERE head IN (SELECT unnest($ids)) OR tail IN (SELECT unnest($ids))",
                           {"ids": sorted({*members, *absorbed})})
    for cid, obj in absorbed.items():
        survivor = survivor_of[cid]
        part = [members[m] for m in obj.members if m in members and getattr(members[m], "merged_into", None) == cid]
        joined.setdefault(survivor, (existing[survivor], {}))[1].update((o.id, o) for o in part)
    moved_from = {m.id: m.merged_into for m in members.values() if getattr(m, "merged_into", None) in absorbed}
    edges_of: dict[str, list[tuple]] = defaultdict(list)
    for row in edge_rows:
        edges_of[row[1]].append(row)
        if row[2] != row[1]:
            edges_of[row[2]].append(row)
    plans = [(sorted(objs.values(), key=lambda o: (-o.mentions, o.id)), prior, cid)
             for cid, (prior, objs) in joined.items()]
    canonical_of = {m: cid for objs, _, cid in plans for m in (o.id for o in objs)} | survivor_of
    new_edges, removed, redirected_of = _redirect(canonical_of, edges_of)
    canonical_objects, updated_members, records = [], [], []
    absorbed_by: dict[str, list[MemoryObject]] = defaultdict(list)
    for c in absorbed.values():
        absorbed_by[survivor_of[c.id]].append(c)
    for objs, prior, canonical_id in plans:
        joining = [o for o in objs if o.status != Status.MERGED or o.merged_into != canonical_id]
        if not joining and not any(o.id in redirected_of for o in objs):
            continue  # links between members it already has: nothing to rewrite
        taken = absorbed_by.get(canonical_id, [])
        canonical = _canonical(objs, prior, cycle, sorted(n for n in names_of(objs) if split_qualifier(n)), taken)
        canonical_objects.append(canonical)
        for member in joining:
            if not (member.status == Status.MERGED and member.run_id == cycle.run_id):  # not counted by a chunk before
                result.merged_members += 1
            member.status, member.merged_into, member.run_id = Status.MERGED, canonical.id, cycle.run_id
            member.status_reason = f"merged into {canonical.id} in {cycle.key}"
        updated_members += joining
        new_edges.extend(Edge.between(canonical.id, o.id, EdgeType.DERIVES_FROM) for o in objs)
        for member in sorted({o.id for o in joining} | {o.id for o in objs if o.id in redirected_of}):
            score, sig = signals.get(member, (1.0, {}))
            records.append((cycle.key, canonical.id, member, score, json.dumps(sig), moved_from.get(member)))
    for obj in absorbed.values():
        survivor = survivor_of[obj.id]
        obj.status, obj.merged_into, obj.run_id = Status.MERGED, survivor, cycle.run_id
        obj.status_reason = f"joined {survivor} in {cycle.key}: a new mention named both"
        records.append((cycle.key, survivor, obj.id, 1.0, json.dumps({"absorbed": True}), None))
    bank.write(canonical_objects, new_edges, run_id=cycle.run_id)
    bank.update_objects(updated_members + list(absorbed.values()))
    bank.remove_edges([(r["head"], r["tail"], r["id"]) for r in removed])
    with bank.writing() as db:
        db.insert_rows("merges", MERGE_RECORD_COLUMNS,
                       [(*rec, json.dumps(redirected_of.get(rec[2], []))) for rec in records])
    result.redirected_edges = len(removed)
    result.absorbed = len(absorbed)
    return result, canonical_objects


def _redirect(canonical_of: dict[str, str], edges_of: dict[str, list[tuple]]):
    """The members' edges moved to their canonical objects: (new edges, removed rows, removed rows by
    member). Both ends are mapped at once, so an edge between members of two groups joins the two
    canonical objects; an edge between members of one group (a self-loop now) is only removed. The
    rows are what `undo_merge` restores."""
    new_edges, removed, by_member = [], [], defaultdict(list)
    rows = {row[0]: row for m in sorted(canonical_of) for row in edges_of.get(m, [])}
    for edge_id, head, tail, kind, weight, object_id in rows.values():
        new_head, new_tail = canonical_of.get(head, head), canonical_of.get(tail, tail)
        if new_head == new_tail and not (head in canonical_of and tail in canonical_of):
            continue  # a canonical object's derives_from edge to its member
        if new_head != new_tail:
            new_edges.append(Edge.between(new_head, new_tail, kind, weight).model_copy(update={"object_id": object_id}))
        row = {"id": edge_id, "head": head, "tail": tail, "edge_type": kind, "weight": weight, "object_id": object_id}
        removed.append(row)
        for end in sorted({head, tail} & canonical_of.keys()):
            by_member[end].append(row)
    return new_edges, removed, dict(by_member)


def _canonical(objs: list[MemoryObject], prior: MemoryObject | None, cycle: Cycle,
               qualified: list[str] = (), absorbed: list[MemoryObject] = ()) -> MemoryObject:
    """The canonical object of a group: the most mentioned name, everything else as aliases, with the
    titles that tell it from its namesakes (`qualified`), which later cycles check new members against.
    Canonical objects it absorbs (`absorbed`) bring their names, tags and confidence; their members are
    among `objs`."""
    lead = objs[0]
    title = prior.title if prior else lead.title
    earlier = [o for o in (prior, *absorbed) if o is not None]
    members = sorted({*(prior.members if prior else []), *(o.id for o in objs)})
    aliases = sorted(({n for o in objs for n in [o.title, *getattr(o, "aliases", [])]}
                      | {n for o in earlier for n in [o.title, *o.aliases]} | set(qualified)) - {title})
    fields = dict(
        title=title,
        description=lead.description,
        aliases=aliases[:50],
        # a member already in `prior` is counted in prior.mentions
        mentions=sum(o.mentions for o in objs if not prior or getattr(o, "merged_into", None) != prior.id)
        + (prior.mentions if prior else 0),
        members=members,
        confidence=max([o.confidence for o in objs] + [o.confidence for o in earlier]),
        source_ids=sorted({s for o in objs for s in o.source_ids} | {s for o in earlier for s in o.source_ids}),
        tags=sorted({t for o in objs for t in o.tags if t != "document-subject"}
                    | {t for o in earlier for t in o.tags}),
        derived_from=members,
        run_id=cycle.run_id,
    )
    cid = prior.id if prior else _canonical_id(lead)
    if isinstance(lead, Entity):
        kinds = Counter(o.entity_kind for o in objs if o.entity_kind != EntityKind.OTHER)
        kind = kinds.most_common(1)[0][0] if kinds else EntityKind.OTHER
        return CanonicalEntity(id=cid, entity_kind=kind, **fields)
    return CanonicalConcept(id=cid, **fields)


def _canonical_id(lead: MemoryObject) -> str:
    """A new canonical object's id, from the group's most mentioned member."""
    return stable_id("cen" if isinstance(lead, Entity) else "ccn", normalise_name(lead.title), lead.id)


def repair_member_lists(bank: Bank, cycle: Cycle) -> int:
    """Bring canonical member lists in line with the merge pointers; returns objects rewritten. Banks
    evolved before merges stopped moving members between canonical objects have lists naming members
    merged elsewhere; run with the global passes, as it reads every merged object."""
    with bank.reading() as db:
        differences = member_list_differences(db)
        canonical = db.get_objects(sorted({c for c, _, _ in differences}))
    wrong, missing = defaultdict(set), defaultdict(set)
    for c, m, listed in differences:
        (wrong if listed else missing)[c].add(m)
    for obj in canonical.values():
        obj.members = sorted(set(obj.members) - wrong[obj.id] | missing[obj.id])
        obj.derived_from = list(obj.members)
        obj.run_id = cycle.run_id
    bank.update_objects(list(canonical.values()))
    return len(canonical)


#: SQL: active canonical entities and concepts none of whose members comes from an active document version
#: (a member an agent made without a document counts as support).
_UNSUPPORTED = """
WITH listed AS (
    SELECT id AS canonical, unnest(CAST(json_extract(data, '$.members') AS VARCHAR[])) AS member
    FROM objects WHERE status = 'active' AND type IN ('canonical_entity', 'canonical_concept')
)
SELECT DISTINCT canonical FROM listed EXCEPT
SELECT l.canonical FROM listed l JOIN objects m ON m.id = l.member LEFT JOIN sources s ON s.id = m.source
WHERE s.status = 'active' OR coalesce(m.source, '') = ''
ORDER BY 1
"""


def retire_unsupported(bank: Bank, cycle: Cycle) -> int:
    """Canonical objects that no active document names any more (every member's document has changed
    since, and its new version does not name the thing) are superseded with their members, never deleted:
    the old versions' mentions had kept them active for ever. Run with the global passes (it reads every
    member list); returns the canonical objects retired."""
    with bank.reading() as db:
        canonical = db.get_objects([r[0] for r in db.sql(_UNSUPPORTED)])
        members = db.get_objects(sorted({m for c in canonical.values() for m in c.members}))
    bank.supersede([*canonical.values(), *members.values()], cycle.run_id,
                   reason=f"no active document names it any more ({cycle.key})")
    return len(canonical)


def repoint_absorbed(bank: Bank, cycle: Cycle) -> int:
    """Point every absorbed canonical object at the active one its chain of absorptions ends in; returns
    objects repointed. A absorbed into B, then B into C (a later chunk or cycle), left A pointing at B,
    which is no longer active. Each repointing is recorded with the object it moved from, so undoing C's
    merges points A back at B. Absorbed canonical objects are few: reading all of them is cheap."""
    with bank.reading() as db:
        pointer = dict(db.sql("SELECT id, json_extract_string(data, '$.merged_into') FROM objects "
                              "WHERE type IN ('canonical_entity', 'canonical_concept') AND status = 'merged'"))
    moves = {cid: _chain_end(pointer, cid) for cid, target in pointer.items() if target in pointer}
    moves = {cid: survivor for cid, survivor in moves.items() if survivor not in pointer}  # a loop stays as it is
    if not moves:
        return 0
    with bank.reading() as db:
        chained = db.get_objects(sorted(moves))
    for obj in chained.values():
        previous, obj.merged_into, obj.run_id = obj.merged_into, moves[obj.id], cycle.run_id
        obj.status_reason = f"joined {obj.merged_into} in {cycle.key} with {previous}, which it had joined"
    bank.update_objects(list(chained.values()))
    with bank.writing() as db:
        db.insert_rows("merges", MERGE_RECORD_COLUMNS,
                       [(cycle.key, moves[cid], cid, 1.0, json.dumps({"absorbed": True}), pointer[cid], "[]")
                        for cid in sorted(chained)])
    return len(chained)


def _chain_end(pointer: dict[str, str], cid: str | None) -> str | None:
    """Follow `pointer` (absorbed canonical id -> the one it joined) from `cid` to the first id without
    one. On a loop it stops where the loop closes, at an id that still has a pointer."""
    seen: set[str] = set()
    while cid in pointer and cid not in seen:
        seen.add(cid)
        cid = pointer[cid]
    return cid


def undo_merge(bank: Bank, canonical_id: str) -> int:
    """Restore the members of a canonical object and their original edges; returns members restored.
    A canonical object it absorbed is active again, with the members it had."""
    with bank.reading() as db:
        rows = db.sql("SELECT member, redirected_edges, moved_from FROM merges WHERE survivor = ? AND NOT undone",
                      [canonical_id])
        members = db.get_objects([r[0] for r in rows])
        canonical = db.get_object(canonical_id)
        current_edges = db.sql("SELECT head, tail, id FROM edges WHERE head = ? OR tail = ?",
                               [canonical_id, canonical_id])
    restored_edges = {}
    for _, blob, _ in rows:
        for e in json.loads(blob):
            restored_edges[e["id"]] = Edge(id=e["id"], head=e["head"], tail=e["tail"], edge_type=e["edge_type"],
                                           weight=e["weight"], object_id=e["object_id"])
    moved_from = {member: previous for member, _, previous in rows if previous}
    for member in members.values():
        if member.id in moved_from:  # back to the canonical object it was in before an absorption
            member.merged_into, member.status_reason = moved_from[member.id], f"absorption into {canonical_id} undone"
            continue
        member.status, member.merged_into, member.status_reason = Status.ACTIVE, None, f"merge into {canonical_id} undone"
    bank.remove_edges([tuple(r) for r in current_edges])
    bank.update_objects(list(members.values()))
    bank.add_edges(list(restored_edges.values()))
    if canonical is not None:
        canonical.status, canonical.status_reason = Status.DEPRECATED, "merge undone"
        bank.update_objects([canonical])
    with bank.writing() as db:
        db.con.execute("UPDATE merges SET undone = true WHERE survivor = ?", [canonical_id])
    return len(members)

