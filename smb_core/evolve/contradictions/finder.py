"""`find_contradictions` over a bank: candidate pairs among claims of different documents (shared
referenced names plus ANN), the statements as judged (pronouns and titles resolved), the optional LLM
judge, and the Contradiction, two `contradicts` edges and Question built for each verdict (the caller
writes them).

Kept apart from `rules` so that the judge stays a pure function of two sentences; the bank is read here
(and, for stored parses, in `sentences`).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from smb_core.evolve import llm_judge
from smb_core.evolve.contradictions import sentences
from smb_core.evolve.contradictions.lexicon import _TITLES, _fold
from smb_core.evolve.contradictions.rules import Verdict, judge
from smb_core.extract.base import QUALIFIER, base_name, exact_key, normalise_name, split_qualifier
from smb_core.model import Claim, Contradiction, Edge, EdgeType, Question, stable_id
from smb_core.stores.metadata import id_filter


@dataclass
class ContradictionResult:
    contradictions: list[Contradiction] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    #: pairs judged (for reports and benchmarks)
    pairs_judged: int = 0


_CONFIDENCE = {"date": 0.75, "number": 0.7, "place": 0.7, "person_role": 0.7, "exclusive_predicate": 0.65,
               "polarity": 0.65}
#: A name referenced by more claims than this is too common to pick out a subject ("united states", a
#: concept such as "film"); concepts get a lower cap, as they name kinds rather than things.
_MAX_NAME_FANOUT = {"entity": 200, "concept": 40}
#: Claims whose text has the same vector say the same thing and cannot contradict each other: the ANN
#: half skips them, so that a sentence repeated in many documents does not take every candidate slot.
IDENTICAL = 1 - 1e-5


def find_contradictions(bank, claim_ids: list[str], run_id: str | None, k: int = 20,
                        chunk: int = 2000) -> ContradictionResult:
    """Contradictions between the given (new) claims and active claims of other documents.

    Candidates per claim: claims of other documents that reference an entity or concept with the same
    normalised name, when that name is the subject of one of the two or both have the same predicate
    (`_same_lead`; DuckDB `edges` + `names`; names shared by too many claims are skipped), plus the
    claim's k nearest active claims in Chroma; a candidate pair is kept only if the two claims reference
    an entity of a common name (a lone first name or surname does not count). Each unordered pair is
    judged once, in canonical order. Existing contradictions (same deterministic id) are kept as they
    are: never rewritten, deleted or downgraded. Claims are read in chunks, each in its own short read
    session; judging happens outside the lock.

    With an LLM configured (`settings.llm == "ollama"`), the LLM judges the same candidate pairs too, in
    batches and within a per-cycle budget (`llm_judge`): its verdict decides where it answers, since it
    reads the sentences the rules only parse; where it does not (error, budget spent) the rules' verdict
    stands. Each contradiction is then tagged `judge:llm` or `judge:rules`.
    """
    try:
        return _find(bank, claim_ids, run_id, k, chunk)
    finally:  # the bank keeps the parses; holding them here would only weigh on the phases after this one
        with sentences._cache_lock:
            sentences._CACHE.clear()


def _find(bank, claim_ids: list[str], run_id: str | None, k: int, chunk: int) -> ContradictionResult:
    result = ContradictionResult()
    ids = list(dict.fromkeys(claim_ids))
    seen = _PairSet()
    own: dict[str, tuple[str, str]] = {}  # claim id -> (statement as judged, its document's title)
    llm = llm_judge.LLMJudge(bank.settings) if llm_judge.enabled(bank.settings) else None
    for start in range(0, len(ids), chunk):
        todo, sources, ctr_ids = _candidate_pairs(bank, ids[start:start + chunk], k, seen)
        for c in {c.id: c for pair in todo for c in pair}.values():
            if c.id not in own:
                own[c.id] = (_judged_text(c, sources), _title_of(c, sources))
        texts = [_judged_pair(own[a.id], own[b.id]) for a, b in todo]
        sentences._analyse_stored(bank, (t for pair in texts for t in pair))
        llm_verdicts = llm.contradictions([(own[a.id], own[b.id]) for a, b in todo]) if llm else [None] * len(todo)
        for (a, b), (text_a, text_b), judged in zip(todo, texts, llm_verdicts):
            result.pairs_judged += 1
            verdict, by = judge(text_a, text_b), "rules"
            if judged is not None and judged.answer is not None:
                found, by = judged.answer.as_verdict(), "llm"
                verdict = Verdict(*found) if found else None
            if verdict is not None:
                _add(result, a, b, verdict, ctr_ids[(a.id, b.id)], sources, run_id)
                if llm is not None:
                    result.contradictions[-1].tags.append(f"judge:{by}")
    return result


class _PairSet:
    """The pairs judged so far in one run, as sorted 64-bit digests: 8 bytes a pair, where a set of
    tuples took about 90, and a full cycle judges tens of millions of pairs at 10,000 documents."""

    def __init__(self) -> None:
        self._digests = np.empty(0, dtype=np.uint64)

    def add_new(self, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """Add the pairs; return those not seen before."""
        if not pairs:
            return set()
        ordered = list(pairs)
        digests = np.fromiter((int.from_bytes(hashlib.blake2b(f"{a}\n{b}".encode(), digest_size=8).digest(), "big")
                               for a, b in ordered), dtype=np.uint64, count=len(ordered))
        at = np.minimum(np.searchsorted(self._digests, digests), max(len(self._digests) - 1, 0))
        known = self._digests[at] == digests if len(self._digests) else np.zeros(len(ordered), dtype=bool)
        self._digests = np.union1d(self._digests, digests)
        return {pair for pair, old in zip(ordered, known) if not old}


def _candidate_pairs(bank, claim_ids: list[str], k: int, seen: _PairSet):
    """(claim pairs to judge, their source documents, contradiction id per pair) for one chunk."""
    with bank.reading() as db:
        new = {i: c for i, c in db.get_objects(claim_ids).items()
               if isinstance(c, Claim) and c.status.value == "active"}
        if not new:
            return [], {}, {}
        by_name = _name_candidates(db, list(new))
        candidates: dict[str, set[str]] = {}
        _ann_candidates(bank, new, candidates, k)
        other_ids = {c for cs in [*candidates.values(), *by_name.values()] for c in cs} - set(new)
        others = {i: c for i, c in db.get_objects(list(other_ids)).items()
                  if isinstance(c, Claim) and c.status.value == "active"}
        claims = {**others, **new}
        for cid, named_with in by_name.items():
            a = claims.get(cid)
            candidates.setdefault(cid, set()).update(
                other for other, shared in named_with.items()
                if a is not None and other in claims and _same_lead(a, claims[other], shared))
        pairs: set[tuple[str, str]] = set()
        for cid, cands in candidates.items():
            a = claims.get(cid)
            if a is None:
                continue
            for other in cands:
                b = claims.get(other)
                if b is None or b.id == a.id or set(a.source_ids) & set(b.source_ids):
                    continue
                pairs.add(tuple(sorted((a.id, b.id))))
        pairs = seen.add_new(pairs)
        entities = _referenced_entities(db, {c for p in pairs for c in p})
        sources = {d.id: d for d in db.sources_by_ids(list({s for p in pairs for c in p
                                                            for s in claims[c].source_ids}))}
        # the same subject in the graph: the two claims reference an entity of the same name, named in them
        # (worked out once per claim: a claim is in many pairs)
        in_pairs = {c for p in pairs for c in p}
        titles = {c: _title_of(claims[c], sources) for c in in_pairs}
        named = {c: _named_in(entities.get(c, {}), claims[c], titles[c]) for c in in_pairs}
        subject = {c: _subject_name(claims[c]) for c in in_pairs}  # or the same proper-name subject
        pairs = {p for p in pairs if _share_a_name(named[p[0]], named[p[1]], titles[p[0]], titles[p[1]])
                 or subject[p[0]] and subject[p[0]] == subject[p[1]]}
        ctr_ids = {p: stable_id("ctr", *p) for p in pairs}
        where, params = id_filter("id", list(ctr_ids.values()))
        existing = {r[0] for r in db.sql(f"SELECT id FROM objects WHERE {where}", params)}
    todo = [(claims[p[0]], claims[p[1]]) for p in sorted(pairs) if ctr_ids[p] not in existing]
    todo = [(a, b) for a, b in todo if not _different_document_subjects(a, b, sources)]
    return todo, sources, ctr_ids


def _referenced_names(db, claim_ids: Iterable[str], kind: str | None = None) -> dict[str, set[str]]:
    """Normalised names of the entities (and concepts) each claim references (graph edges in DuckDB)."""
    ids = list(claim_ids)
    names_by_claim: dict[str, set[str]] = defaultdict(set)
    if not ids:
        return names_by_claim
    rows = db.sql(
        "SELECT e.head, n.name FROM edges e JOIN names n ON n.object_id = e.tail "
        "WHERE e.edge_type = 'references' AND e.head IN (SELECT unnest(?))"
        + (" AND n.type = ?" if kind else ""), [ids, kind] if kind else [ids])
    for head, name in rows:
        if len(name) >= 3 and not name.isdigit() and ":" not in name:  # not a blocking key
            names_by_claim[head].add(name)
    return names_by_claim


def _subject_name(claim: Claim) -> str:
    """The claim's proper-name subject ('Okafor' and 'Dr. Okafor' give 'okafor', 'Lumen DB 2.0'): the
    extractor's subject, titles dropped; '' for pronouns and common nouns ('it', 'the film'), which never
    match. Documents about different people of one name are told apart by `_different_document_subjects`."""
    words = [w for w in re.findall(r"[\w.]+", claim.subject) if _fold(w).strip(".") not in _TITLES]
    return _fold(" ".join(words)) if words and all(w[:1].isupper() or w[:1].isdigit() for w in words) else ""


def _share_a_name(a: dict[str, str], b: dict[str, str], title_a: str = "", title_b: str = "") -> bool:
    """Whether two claims' entities ({normalised name: kind}) name the same subject: the same name of two
    words or more, or one that ends the other ('ilse brandauer' / 'composer ilse brandauer'). A one-word
    name counts only when it is not a person and both documents' titles contain it ('quillpad'): a lone
    first name or surname ('george', 'neugebauer') does not identify anyone across documents."""
    sa, sb = set(a), set(b)
    titles = (f" {_base_title(title_a)} ", f" {_base_title(title_b)} ")
    for name in sa & sb:
        if len(name.split()) >= 2:
            return True
        if "person" not in (a[name], b[name]) and all(f" {name} " in t for t in titles):
            return True
    # one name ends the other ('ilse brandauer' / 'composer ilse brandauer'): compare word suffixes,
    # not all pairs (a canonical entity can carry dozens of names)
    return bool(_suffixes(sa) & sb or _suffixes(sb) & sa)


def _named_in(names: dict[str, str], claim: Claim, title: str) -> dict[str, str]:
    """The names of a claim's entities that the claim or its document's title uses. A canonical entity
    carries every alias of its members: "After Charles died in 1574" references the canonical "Charles",
    whose aliases include "Earl Charles", a name that says nothing about whom this claim means."""
    words = f" {normalise_name(claim.statement)} {normalise_name(title)} "
    return {name: kind for name, kind in names.items() if f" {name} " in words}


def _suffixes(names: set[str]) -> set[str]:
    """The endings of two words or more of each name, without the name itself."""
    out = set()
    for name in names:
        words = name.split()
        out.update(" ".join(words[i:]) for i in range(1, len(words) - 1))
    return out


def _referenced_entities(db, claim_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """{claim id: {normalised entity name: entity kind}} for the entities each claim references."""
    ids = list(claim_ids)
    out: dict[str, dict[str, str]] = defaultdict(dict)
    if not ids:
        return out
    rows = db.sql(
        "SELECT e.head, n.name, n.object_id FROM edges e "
        "JOIN names n ON n.object_id = e.tail AND n.type IN ('entity', 'canonical_entity') "
        "WHERE e.edge_type = 'references' AND e.head IN (SELECT unnest(?))", [ids])
    rows = [r for r in rows if len(r[1]) >= 3 and not r[1].isdigit() and ":" not in r[1]]  # not 'acronym:ll'
    # the kinds in a second query: joining `objects` into the first read every object's JSON (3x slower)
    where, params = id_filter("id", sorted({r[2] for r in rows}))
    kinds = dict(db.sql(f"SELECT id, json_extract_string(data, '$.entity_kind') FROM objects WHERE {where}", params))
    for head, name, entity in rows:
        out[head][name] = kinds.get(entity) or "other"
    return out


def _name_candidates(db, claim_ids: list[str]) -> dict[str, dict[str, set[str]]]:
    """{claim: {other claim: the normalised names of entities/concepts both reference}}."""
    names_by_claim = _referenced_names(db, claim_ids)
    all_names = sorted({n for ns in names_by_claim.values() for n in ns})
    out: dict[str, dict[str, set[str]]] = {c: defaultdict(set) for c in claim_ids}
    if not all_names:
        return out
    fan = db.sql(
        "WITH refs AS (SELECT n.name, replace(n.type, 'canonical_', '') AS type, e.head FROM names n "
        "              JOIN edges e ON e.tail = n.object_id "
        "              AND e.edge_type = 'references' WHERE n.name IN (SELECT unnest(?))), "
        "     counts AS (SELECT name, type, count(*) AS c FROM refs GROUP BY name, type) "
        "SELECT r.name, r.head FROM refs r JOIN counts USING (name, type) "
        "WHERE (r.type = 'entity' AND counts.c <= ?) OR (r.type = 'concept' AND counts.c <= ?)",
        [all_names, _MAX_NAME_FANOUT["entity"], _MAX_NAME_FANOUT["concept"]])
    claims_by_name: dict[str, set[str]] = defaultdict(set)
    for name, head in fan:
        if head.startswith("clm-"):
            claims_by_name[name].add(head)
    for cid, names in names_by_claim.items():
        for name in names:
            for other in claims_by_name.get(name, ()):
                out[cid][other].add(name)
    return out


def _same_lead(a: Claim, b: Claim, shared: set[str]) -> bool:
    """Whether two claims that name the same things (`shared`) may state incompatible things about one of
    them: one is about it (its subject: 'Dr. Ilse Brandauer' is about 'ilse brandauer'), or both do the same
    to it ("A hosted the Symposium in 2024", "B hosted the Symposium in 2024"). Claims that merely both
    mention a name ("X joined Lumen Labs", "Y left Lumen Labs") say different things about different
    subjects; they were half of the pairs judged at 10,000 documents, and the rules found nothing in them."""
    if a.predicate and a.predicate == b.predicate:
        return True
    subjects = (_subject_key(a.subject), _subject_key(b.subject))
    return any(subject.endswith(f" {name}") for subject in subjects for name in shared)


@lru_cache(maxsize=100_000)
def _subject_key(subject: str) -> str:
    """A subject as the names table keys it ("AT&T" as "at and t")."""
    return f" {exact_key(subject)}"


def _ann_candidates(bank, new: dict[str, Claim], out: dict[str, set[str]], k: int) -> None:
    """The k nearest claims by embedding that say something else (the caller keeps the active ones)."""
    if k <= 0:
        return
    try:
        vectors = bank.vectors_of(list(new))
    except Exception:  # noqa: BLE001 - a missing vector store only loses the ANN half of the candidates
        return
    ids = sorted(vectors)  # batched queries: one query per claim cost most of the phase on 150k vectors
    # any claim: the caller keeps only active ones (it reads every candidate from DuckDB anyway)
    for cid, found in zip(ids, bank.nearest([vectors[i] for i in ids], k + 1, prefix=f"{Claim.id_prefix}-",
                                                over=8, below=IDENTICAL)):
        out.setdefault(cid, set()).update(other for other, _score in found if other != cid)


_PRONOUN_START = re.compile(r"^(He|She|It|They)\b(?!')")


def _judged_text(claim: Claim, sources: dict) -> str:
    """The statement, with a leading he/she/it/they replaced by the document's subject when the extractor
    resolved it to that subject ("He died in 2016" in the article on X -> "X died in 2016"). Any other
    pronoun stays, and `judge` treats it as unknown."""
    statement = claim.statement
    if not _PRONOUN_START.match(statement) or not claim.subject:
        return statement
    title = _title_of(claim, sources)
    if not title or _fold(claim.subject).strip() != _fold(title) or len(title.split()) > 8:
        return statement
    return _PRONOUN_START.sub(title, statement, count=1)


def _title_of(claim: Claim, sources: dict) -> str:
    title = next((sources[s].title for s in claim.source_ids if s in sources), "")
    return QUALIFIER.sub("", title).strip()


_HONORIFIC = re.compile(r"^(?:(?:Dr|Mr|Mrs|Ms|Prof|Sir|Dame)\.?\s+)+")


def _judged_pair(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """The two statements as judged, from (statement with its pronoun resolved, document title) each: the
    documents' titles, which name their subjects, become one opaque proper name, so that a title that
    reads like a sentence ("Drive a Crooked Road is a 1954 film ...") parses as the name it is; a title
    that is a name of capitalised words stands for its last word alone too ("Okafor founded ...")."""
    (ta, title_a), (tb, title_b) = a, b
    # "Dr. Mara Okafor" is "Mara Okafor"; the longer title first, so that a shorter one cannot take part of it
    for title in sorted({_HONORIFIC.sub("", title_a), _HONORIFIC.sub("", title_b)}, key=lambda t: (-len(t), t)):
        if len(title.split()) < 2 or len(title) > 80 or (title not in ta and title not in tb):
            continue
        ta, tb = _with_title(ta, title), _with_title(tb, title)
    return ta, tb


@lru_cache(maxsize=100_000)
def _with_title(text: str, title: str) -> str:
    """The text with the title (and its surname pattern) replaced by its opaque name. Cached: a claim is in
    dozens of pairs, nearly always with its own document's title."""
    name, patterns = _title_patterns(title)
    for pattern in patterns:
        text = _replace_title(pattern, name, text)
    return text


@lru_cache(maxsize=50_000)
def _title_patterns(title: str) -> tuple[str, tuple[re.Pattern, ...]]:
    """The opaque name a title becomes and the patterns it replaces: the title, and for a name of capitalised
    words its last word alone too ("Okafor" is Mara Okafor). Cached: a document's title is in many pairs, and
    compiling its patterns for each was a tenth of judging them."""
    digest = stable_id("t", _fold(title)).split("-")[1]
    name = "Zq" + "".join("bcdfghjklmnpqrstv"[int(ch, 16)] for ch in digest[:6])
    patterns = [re.compile(rf"(?<![\w'’]){re.escape(title)}(?![\w'’])(?!\s+[A-Z])")]
    words = title.split()
    if len(words) <= 4 and all(w[:1].isupper() for w in words):
        patterns.append(re.compile(rf"(?<![\w'’]){re.escape(words[-1])}(?![\w'’])(?!\s+[A-Z])"))
    return name, tuple(patterns)


def _replace_title(pattern: re.Pattern, name: str, text: str) -> str:
    """Occurrences of a title not inside a longer name: "Kevin Hennessy" in "Neil Kevin Hennessy" is not
    Kevin Hennessy (a capitalised word before it, other than a determiner, extends the name)."""
    def swap(m: re.Match) -> str:
        before = re.search(r"([A-Z][\w'’.-]*)\s+$", text[:m.start()])
        if before and before.group(1).lower().rstrip(".") not in ("dr", "mr", "mrs", "ms", "prof", "sir", "the", "a", "an", "in", "on", "at", "by", "for", "from",
                                                      "with", "of", "to", "and", "but", "when", "after", "before",
                                                      "since", "during", "while", "as", "its", "his", "her"):
            return m.group(0)
        return name
    return pattern.sub(swap, text)


def _different_document_subjects(a: Claim, b: Claim, sources: dict) -> bool:
    """Claims from documents about namesakes: 'John Smith (footballer)' and 'John Smith (politician)',
    'Newbury, Berkshire' and 'Newbury, Ohio'. Unlike a merge (where a bare 'Newbury' may be either
    namesake), a qualified title beside the bare one counts too: a contradiction needs one subject."""
    ta = next((sources[s].title for s in a.source_ids if s in sources), "")
    tb = next((sources[s].title for s in b.source_ids if s in sources), "")
    if not ta or not tb or ta == tb:
        return False
    if (split_qualifier(ta) or split_qualifier(tb)) and base_name(ta) == base_name(tb):
        return True  # one name that the titles' qualifiers tell apart, or a qualified one beside the bare one
    # "Juan Carlos" in the article "Juan Carlos I of Spain" and in the article "Juan Carlos Salazar": each
    # claim is about its own document's subject, and the titles extend the name differently
    ext_a, ext_b = _title_extension(a.subject, ta), _title_extension(b.subject, tb)
    return bool(ext_a and ext_b and ext_a != ext_b)


@lru_cache(maxsize=100_000)
def _title_extension(subject: str, title: str) -> str:
    """The capitalised words a title adds to a claim's subject name when the title contains that name:
    'Juan Carlos' in 'Juan Carlos I of Spain' -> 'spain', 'Neugebauer' in 'Gerry Neugebauer' -> 'gerry';
    '' when the title does not contain the subject or adds no name ('The history of Lumen Labs')."""
    subject_words = _base_title(subject).split()
    title_words = QUALIFIER.sub("", title).replace(",", " ").split()
    folded = [_fold(w).strip(".'’") for w in title_words]
    if not subject_words or not set(subject_words) <= set(folded):
        return ""
    extra = [f for w, f in zip(title_words, folded) if f not in subject_words and w[:1].isupper()
             and f not in _TITLES and f not in ("the", "a", "an", "i") and not f.isdigit()]
    return " ".join(extra)


@lru_cache(maxsize=100_000)
def _base_title(title: str) -> str:
    return _fold(QUALIFIER.sub("", title)).strip()


def _source_label(claim: Claim, sources: dict) -> str:
    doc = next((sources[s] for s in claim.source_ids if s in sources), None)
    return doc.path if doc is not None else (claim.source_ids[0] if claim.source_ids else "unknown source")


def _add(result: ContradictionResult, a: Claim, b: Claim, verdict: Verdict, ctr_id: str, sources: dict,
         run_id: str | None) -> None:
    where_a, where_b = _source_label(a, sources), _source_label(b, sources)
    subject = a.subject or b.subject or verdict.attribute
    title = f"Conflicting {verdict.attribute} of {subject}"[:200]
    description = (f"«{a.statement}» ({where_a}) contradicts «{b.statement}» ({where_b}). "
                   f"{verdict.kind}: {verdict.explanation}.")
    confidence = round(min(_CONFIDENCE.get(verdict.kind, 0.6), a.confidence + 0.2, b.confidence + 0.2), 3)
    ctr = Contradiction(
        id=ctr_id, title=title, description=description, claim_ids=[a.id, b.id], derived_from=[a.id, b.id],
        attribute=verdict.attribute, resolution="open", explanation=verdict.explanation,
        source_ids=list(dict.fromkeys([*a.source_ids, *b.source_ids])),
        source_spans=[*a.source_spans, *b.source_spans], confidence=confidence, tags=[verdict.kind],
        run_id=run_id,
    )
    question = Question(
        id=stable_id("qst", ctr.id), title=f"Which is right about {verdict.attribute} of {subject}?"[:200],
        question=f"Which is right: «{a.statement}» ({where_a}) or «{b.statement}» ({where_b})?",
        about=[a.id, b.id, ctr.id], derived_from=[ctr.id], source_ids=list(ctr.source_ids),
        tags=["contradiction", verdict.kind], confidence=confidence, run_id=run_id,
    )
    result.contradictions.append(ctr)
    result.questions.append(question)
    result.edges.append(Edge.between(ctr.id, a.id, EdgeType.CONTRADICTS))
    result.edges.append(Edge.between(ctr.id, b.id, EdgeType.CONTRADICTS))
