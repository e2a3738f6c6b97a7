"""The judge: `judge(a, b)` and its rules. Some rule must be able to compare the two sentences at all
(`_comparable`, a cheap test on their predicates, states and numbers); they must share a subject and not
differ in version, qualifier or descriptor; then the rules run in order (exclusive states, polarity,
date, place, person in a unique role, number) and the first `Verdict` wins.

Each rule also checks that the aligned predicates are about the same thing at the same time, and says
nothing when it cannot tell: precision matters more than recall.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from smb_core.evolve.contradictions import sentences
from smb_core.evolve.contradictions.arguments import (
    _attached, _clause_verb, _containers, _identity, _ids_match, _is_passive, _place_level, _places, _same_theme,
    _subject_of, _theme_tokens,
)
from smb_core.evolve.contradictions.lexicon import (
    _CLASSES, _DIRECTION, _EVENT_STATES, _EXCLUSIVE, _GENDER, _GENERIC_PERSON, _LIGHT_VERBS, _NEEDS_MARK_DATE,
    _NEEDS_MARK_PLACE, _OBJECT_STATES, _OCCURRENCE_VERBS, _ORDER, _REPEATABLE, _ROLE_ALWAYS, _ROLE_AT_TIME,
    _ROLE_MARKED, _SCOPE, _SINGLE_EVENT, _SINGLE_PLACE, _fold, _stem,
)
from smb_core.evolve.contradictions.sentences import (
    _Name, _Pred, _Qty, _Sentence, _is_code, _names_match, _norm_version,
)


@dataclass(frozen=True)
class Verdict:
    """Why two claims contradict: `kind` is date|number|place|person_role|polarity|exclusive_predicate."""

    kind: str
    attribute: str
    explanation: str


def judge(a: str, b: str) -> Verdict | None:
    """Whether two claim sentences contradict; None when they are compatible or we cannot tell."""
    if not a or not b or _fold(a).strip() == _fold(b).strip():
        return None
    sentences._analyse_many([a, b])
    sa, sb = sentences._analyse(a), sentences._analyse(b)
    if not _comparable(sa, sb):
        return None
    shared = _shared_names(sa, sb)
    if not shared and not _shared_subject_noun(sa, sb):
        return None
    if _version_conflict(sa, sb) or _qualifier_conflict(sa, sb) or _descriptor_conflict(sa, sb):
        return None
    for rule in (_rule_exclusive, _rule_polarity, _rule_date, _rule_place, _rule_person, _rule_number):
        verdict = rule(sa, sb, shared)
        if verdict is not None:
            return verdict
    return None


def _comparable(sa: _Sentence, sb: _Sentence) -> bool:
    """What every rule needs, checked first because it is cheap: two predicates that can align (date,
    place, person, polarity), two exclusive states, or a number on each side. Five candidate pairs in six
    at 10,000 documents have none, and are settled without working out their names, dates or quantities."""
    return bool(sa.relation_keys & sb.relation_keys) or (sa.has_number and sb.has_number) or \
        any(frozenset({xa, xb}) in _EXCLUSIVE for xa, _ in sa.states for xb, _ in sb.states)


def _shared_names(sa: _Sentence, sb: _Sentence) -> list[tuple[_Name, _Name]]:
    return [(x, y) for x in sa.names for y in sb.names if _names_match(x, y)]


def _shared_subject_noun(sa: _Sentence, sb: _Sentence) -> bool:
    return bool(sa.kind_subjects & sb.kind_subjects)


def _version_conflict(sa: _Sentence, sb: _Sentence) -> bool:
    va, vb = sa.versions, sb.versions
    if not va or not vb:
        return False
    if va & vb:
        # shared designations; still different if each has one of the same kind the other lacks
        ka = {v.split(":")[0] for v in va - vb if ":" in v}
        kb = {v.split(":")[0] for v in vb - va if ":" in v}
        return bool(ka & kb)
    return True


def _core_nouns(sent: _Sentence) -> dict[str, list]:
    """Head nouns of the subject/object arguments (and their 'of' heads), by lemma."""
    out: dict[str, list] = defaultdict(list)
    for t in sent.doc:
        if t.pos_ not in ("NOUN", "PROPN"):
            continue
        core = t.dep_ in ("nsubj", "nsubjpass", "dobj", "attr", "ROOT", "appos")
        if not core and t.dep_ == "pobj" and t.head.head.dep_ in ("nsubj", "nsubjpass", "dobj", "attr"):
            core = True
        if not core and t.dep_ == "poss" and t.head.dep_ in ("nsubj", "nsubjpass", "dobj", "attr"):
            core = True
        if core:
            out[t.lemma_.lower()].append(t)
    return out


def _modifiers(sent: _Sentence, tok) -> dict[str, set[str]]:
    mods: dict[str, set[str]] = defaultdict(set)
    for c in tok.children:
        low = c.lower_.rstrip("'s").rstrip("’s")
        lemma = c.lemma_.lower()
        if c.dep_ in ("amod", "compound", "nmod", "poss", "npadvmod") or (c.dep_ == "advmod" and c.pos_ == "ADJ"):
            for word in {low, lemma}:
                if word in _DIRECTION:
                    mods["direction"].add(word.replace("ern", ""))
                elif word in _ORDER:
                    mods["order"].add(word)
                elif word in _GENDER:
                    mods["gender"].add(word.rstrip("s").replace("women", "woman").replace("men", "man")
                                       .replace("female", "woman").replace("male", "man"))
                elif word in _SCOPE:
                    mods["scope"].add(word.rstrip("s"))
            if c.i in sent.name_at:
                mods["name"].add(sent.name_at[c.i].key)
            for g in c.children:  # "the women's singles title": women's modifies singles
                if g.dep_ == "poss" and g.lower_ in _GENDER:
                    mods["gender"].add(g.lower_.replace("women", "woman").replace("men", "man"))
        if c.dep_ == "prep" and c.lower_ in ("in", "at", "for", "on"):
            for p in c.children:
                if p.dep_ == "pobj" and p.i in sent.name_at and p.i not in sent.date_tokens:
                    mods["name"].add(sent.name_at[p.i].key)
    return mods


def _qualifier_conflict(sa: _Sentence, sb: _Sentence) -> bool:
    """A shared noun qualified differently: the east wing / the west wing, the Ohio plant / the plant in Georgia."""
    na, nb = _core_nouns(sa), _core_nouns(sb)
    for lemma in set(na) & set(nb):
        if lemma in ("year", "time", "day"):
            continue
        for ta in na[lemma]:
            for tb in nb[lemma]:
                if ta.i in sa.name_at and tb.i in sb.name_at:
                    continue
                ma, mb = _modifiers(sa, ta), _modifiers(sb, tb)
                for cls in set(ma) & set(mb):
                    xa, xb = ma[cls], mb[cls]
                    if cls == "name":
                        xa = {k for k in xa if not _name_in(k, sa, sb)}
                        xb = {k for k in xb if not _name_in(k, sb, sa)}
                        if xa and xb:
                            return True
                    elif xa and xb and not (xa & xb):
                        return True
    return False


def _descriptors(sent: _Sentence) -> set[str]:
    """Nationalities describing the subject: 'X is an English footballer', 'the American chemist X'."""
    out = set()
    for ent in sent.doc.ents:
        if ent.label_ != "NORP":
            continue
        head = ent.root.head
        if head.pos_ in ("NOUN", "PROPN") and (head.dep_ in ("attr", "appos", "nsubj", "nsubjpass", "compound")
                                               or head.i in sent.name_at):
            out.add(_fold(ent.text))
    return out


def _descriptor_conflict(sa: _Sentence, sb: _Sentence) -> bool:
    """Two people or things of the same name told apart by nationality: an English footballer and an
    American politician called John Smith are not the same John Smith."""
    da, db = _descriptors(sa), _descriptors(sb)
    return bool(da and db and not (da & db))


def _name_in(key: str, own: _Sentence, other: _Sentence) -> bool:
    name = next((n for n in own.names if n.key == key), None)
    return name is not None and any(_names_match(name, m) for m in other.names)


def _aligned(sa: _Sentence, sb: _Sentence, wanted: set[str] | None = None,
             allow_stem: bool = True) -> list[tuple[_Pred, _Pred, set[str]]]:
    """Predicate pairs that express the same relation: same lemma, shared class, or shared stem."""
    out = []
    for pa in sa.preds:
        for pb in sb.preds:
            common = set(pa.classes & pb.classes)
            if pa.lemma == pb.lemma and not pa.classes:
                common.add(pa.lemma)
            if allow_stem and not common and len(pa.lemma) > 3 and _stem(pa.lemma) == _stem(pb.lemma) and \
                    pa.lemma not in _LIGHT_VERBS and pb.lemma not in _LIGHT_VERBS:
                common.add("stem:" + _stem(pa.lemma))
            if pa.lemma in _LIGHT_VERBS and pb.lemma in _LIGHT_VERBS:
                common -= {pa.lemma}
            if wanted is not None:
                common &= wanted
            if common:
                out.append((pa, pb, common))
    return out


def _attr_name(classes: Iterable[str]) -> str:
    names = {"bear": "birth", "die": "death", "found": "founding", "locate": "location", "direct": "director",
             "write": "author", "release": "release", "hold_event": "venue", "sign": "signing",
             "build": "construction", "open": "opening", "acquire": "acquisition", "consecrate": "consecration"}
    for c in sorted(classes):
        if c in names:
            return names[c]
    c = sorted(classes)[0]
    return c.replace("stem:", "")


def _dates_compatible(sa: _Sentence, sb: _Sentence) -> bool:
    """For timeless facts (who wrote a book): only explicit scoping or disjoint dates keep them apart."""
    scoped = {"since", "until", "till", "from-to", "as of", "formerly", "previously", "no longer"}
    if sa.temporal & scoped or sb.temporal & scoped:
        return False
    if sa.time_points and sb.time_points:
        return _times_overlap(sa, sb)
    return True


def _times_overlap(sa: _Sentence, sb: _Sentence) -> bool:
    """Some date of one sentence overlaps some date of the other."""
    return any(x[0] <= y[1] and y[0] <= x[1] for x in sa.time_points for y in sb.time_points)


def _time_compatible(sa: _Sentence, sb: _Sentence, allow_one_dated: bool = False) -> bool:
    """Both statements speak of the same time: same dates, or neither dated and no change markers."""
    scoped = {"since", "until", "till", "from-to", "as of", "formerly", "previously", "no longer", "now",
              "currently", "today"}
    if (sa.temporal & scoped) != (sb.temporal & scoped) and (sa.temporal & scoped or sb.temporal & scoped):
        return False
    if sa.time_points and sb.time_points:
        return _times_overlap(sa, sb)
    if sa.time_points or sb.time_points:
        return allow_one_dated and (sa.tense == sb.tense or not sa.tense or not sb.tense)
    return not sa.tense or not sb.tense or sa.tense == sb.tense


# ---- date -----------------------------------------------------------------------------------

def _rule_date(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    for pa, pb, common in _aligned(sa, sb):
        common = {c for c in common if c in _SINGLE_EVENT or c.startswith("first_event:")}
        if not common:
            continue
        if all(c.startswith("first_event:") for c in common):
            va, vb = _clause_verb(sa.doc[pa.i]), _clause_verb(sb.doc[pb.i])
            if not (va.lemma_.lower() in _OCCURRENCE_VERBS and vb.lemma_.lower() in _OCCURRENCE_VERBS or
                    va.lemma_.lower() == vb.lemma_.lower()):
                continue
            if not _same_occasion(sa, pa, sb, pb):
                continue
        single = common
        if common <= _NEEDS_MARK_DATE and not (sa.first and sb.first) and not _specific_event(sa, sb, pa, pb):
            continue
        if common & _REPEATABLE and _extra_qualifiers(sa, sb, pa, pb):
            continue
        if pa.neg or pb.neg:
            continue
        da = [d for d in sa.dates if not d.modifier and d.prep in ("", "in", "on", "at", "during", "of", "around")
              and _attached(sa, pa, [d.root])]
        db = [d for d in sb.dates if not d.modifier and d.prep in ("", "in", "on", "at", "during", "of", "around")
              and _attached(sb, pb, [d.root])]
        if not da or not db:
            continue
        if not _same_theme(sa, pa, sb, pb, shared):
            continue
        if any(x.lo <= y.hi and y.lo <= x.hi for x in da for y in db):
            continue
        attr = _attr_name(single)
        return Verdict("date", f"{attr} date",
                       f"{attr} date: {', '.join(d.text for d in da)} vs {', '.join(d.text for d in db)}")
    return None


#: Nouns that make "for the first time" an adverb of the whole clause rather than name an event of their own
#: ("its first flight" is one event; "visited Japan for the first time" is the first visit to Japan).
_OCCASION_NOUNS = {"time", "occasion"}


def _same_occasion(sa: _Sentence, pa: _Pred, sb: _Sentence, pb: _Pred) -> bool:
    """Whether two "for the first time" clauses are firsts of one event: their verbs take the same objects and
    places. "Attended the Calder Book Fair for the first time in 2011" and "attended the Ostend Music Week for
    the first time in 1998" are two firsts (on generated documents such pairs were most of what the date rule
    found); an object on one side only ("performed in Oslo for the first time") is a narrower first."""
    if sa.doc[pa.i].lemma_.lower() not in _OCCASION_NOUNS and sb.doc[pb.i].lemma_.lower() not in _OCCASION_NOUNS:
        return True
    ids_a = [_identity(sa, t) for t in _occasion_args(sa, pa)]
    ids_b = [_identity(sb, t) for t in _occasion_args(sb, pb)]
    if len(ids_a) != len(ids_b):
        return False
    return all(any(_ids_match(x, y, sa, sb) for y in ids_b) for x in ids_a) and \
        all(any(_ids_match(x, y, sa, sb) for x in ids_a) for y in ids_b)


def _occasion_args(sent: _Sentence, p: _Pred) -> list:
    """The clause verb's objects and prepositional objects, without the occasion noun itself and dates."""
    verb = _clause_verb(sent.doc[p.i])
    out = [c for c in verb.children if c.dep_ in ("dobj", "dative")]
    out += [x for c in verb.children if c.dep_ == "prep" for x in c.children if x.dep_ == "pobj"]
    return [t for t in out if t.i != p.i and t.i not in sent.date_tokens]


def _specific_event(sa, sb, pa, pb) -> bool:
    """The subject is one specific occurrence: it carries a year or an edition ('the 2017 final')."""
    return bool({v for v in sa.versions if v.startswith("year:")} & {v for v in sb.versions if v.startswith("year:")})


def _extra_qualifiers(sa, sb, pa, pb) -> bool:
    """A repeatable event with a place on one side only or different places ('released in the UK in 1990')."""
    pla = [n.key for n, i in _places(sa) if _attached(sa, pa, [i])]
    plb = [n.key for n, i in _places(sb) if _attached(sb, pb, [i])]
    return bool(pla or plb) and set(pla) != set(plb)


# ---- place ----------------------------------------------------------------------------------


def _rule_place(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    places_a, places_b = _places(sa), _places(sb)
    if not places_a or not places_b:
        return None
    for pa, pb, common in _aligned(sa, sb, _SINGLE_PLACE | {"ipo"}):
        if common <= _NEEDS_MARK_PLACE and not _unique_place_marked(sa, sb, pa, pb, common):
            continue
        if pa.neg or pb.neg:
            continue
        xa = [(n, i) for n, i in places_a if _attached(sa, pa, [i])]
        xb = [(n, i) for n, i in places_b if _attached(sb, pb, [i])]
        if not xa or not xb:
            continue
        if not _same_theme(sa, pa, sb, pb, shared):
            continue
        if "locate" in common and not _time_compatible(sa, sb):
            continue
        if common & {"hold_event", "open"} and not _time_compatible(sa, sb, allow_one_dated=True):
            continue
        # the place of the subject itself is not a value ("Mount Kellan", "Tallinn's old town")
        all_a = {n.key for n, _ in xa} | {c for _, i in xa for c in _containers(sa, i)}
        all_b = {n.key for n, _ in xb} | {c for _, i in xb for c in _containers(sb, i)}
        names_a = [n for n in sa.names if n.key in all_a]
        names_b = [n for n in sb.names if n.key in all_b]
        if any(_names_match(x, y) for x in names_a for y in names_b):
            continue
        # any place of one sentence among the other's places or their containers: containment we can see
        every_a = [n for n in sa.names if n.key in {m.key for m, _ in places_a} | {c for _, i in places_a
                                                                                  for c in _containers(sa, i)}]
        every_b = [n for n in sb.names if n.key in {m.key for m, _ in places_b} | {c for _, i in places_b
                                                                                  for c in _containers(sb, i)}]
        if any(_names_match(x, y) for x in names_a for y in every_b) or \
                any(_names_match(x, y) for x in names_b for y in every_a):
            continue
        levels_a = {_place_level(n) for n in names_a}
        levels_b = {_place_level(n) for n in names_b}
        comparable = [(x, y) for x, _ in xa for y, _ in xb if _place_level(x) == _place_level(y)]
        if not comparable:
            continue
        if levels_a != levels_b and (levels_a | levels_b) & {"continent", "region"}:
            continue
        x, y = comparable[0]
        attr = _attr_name(common)
        return Verdict("place", f"{attr} place", f"{attr} place: {x.key} vs {y.key}")
    return None


def _unique_place_marked(sa, sb, pa, pb, common) -> bool:
    if "locate" in common:
        # "X is headquartered in", "X is based in": one headquarters; "X has offices in": many
        if pa.lemma in ("headquarter", "headquarters", "base", "hq") or pb.lemma in ("headquarter", "headquarters",
                                                                                      "base", "hq"):
            return True
        return bool(sa.marks & {"main", "principal", "primary", "flagship", "sole", "only"} and
                    sb.marks & {"main", "principal", "primary", "flagship", "sole", "only"}) or \
            (_is_singular_definite(sa, pa) and _is_singular_definite(sb, pb))
    if "hold_event" in common:
        return (sa.first and sb.first) or _specific_event(sa, sb, pa, pb) or _named_event(sa, pa) and \
            _named_event(sb, pb)
    return sa.first and sb.first


def _is_singular_definite(sent: _Sentence, p: _Pred) -> bool:
    """'The Sunfield plant is located in': a named, singular subject (not 'offices', not 'a store')."""
    themes = _theme_tokens(sent, p)
    return bool(themes) and all(t.tag_ in ("NNP", "NN") and t.i in sent.name_at or
                                (t.tag_ == "NN" and any(c.i in sent.name_at for c in t.children))
                                for t in themes if t is not None)


def _named_event(sent: _Sentence, p: _Pred) -> bool:
    themes = _theme_tokens(sent, p)
    return any(t is not None and t.i in sent.name_at for t in themes)


# ---- person in a unique role ----------------------------------------------------------------


def _agents(sent: _Sentence, p: _Pred) -> list[_Name]:
    """Who fills the role: the subject of an active verb, the by-agent of a passive, the holder of a role noun."""
    doc = sent.doc
    t = doc[p.i]
    cands = []
    if t.pos_ == "VERB":
        if "win" in p.classes and p.lemma == "go":
            cands = [pp for c in t.children if c.dep_ == "prep" and c.lower_ == "to" for pp in c.children
                     if pp.dep_ == "pobj"]
        elif _is_passive(t):
            cands = [pp for c in t.children if c.dep_ == "agent" for pp in c.children if pp.dep_ == "pobj"]
        else:
            s = _subject_of(t)
            if s is not None:
                cands = [s]
                # "the first person to reach the summit ... was Ewan Harrow"
                if s.lemma_.lower() in _GENERIC_PERSON and s.dep_ == "nsubj" and s.head.pos_ == "AUX":
                    cands = [c for c in s.head.children if c.dep_ == "attr"]
            elif t.dep_ in ("relcl", "acl") and t.head.lemma_.lower() in _GENERIC_PERSON:
                h = t.head
                if h.dep_ == "nsubj" and h.head.pos_ == "AUX":
                    cands = [c for c in h.head.children if c.dep_ == "attr"]
    else:
        v = t.head
        if t.dep_ == "attr" and v.pos_ in ("AUX", "VERB"):
            cands = [c for c in v.children if c.dep_ in ("nsubj",)]
        elif t.dep_ == "nsubj" and v.pos_ in ("AUX",):
            cands = [c for c in v.children if c.dep_ == "attr"]
        elif t.dep_ == "pobj" and v.lower_ == "as" and v.head.pos_ == "VERB":
            s = _subject_of(v.head)
            cands = [s] if s is not None else []
        elif t.dep_ == "appos":
            cands = [v]
        elif t.dep_ == "dobj" and t.head.pos_ == "VERB":
            # "the first person to reach the summit ... was Ewan Harrow": the verb's agent
            verb = t.head
            return _agents(sent, _Pred(i=verb.i, lemma=verb.lemma_.lower(), classes=frozenset(), neg="",
                                       antonym=False))
        cands += [c for c in t.children if c.dep_ == "appos"]
        cands += [c for c in t.children if c.dep_ == "compound" and c.i in sent.name_at and c.pos_ == "PROPN"
                  and doc[sent.name_at[c.i].end - 1].i > t.i]
    out = []
    for c in cands:
        if c is None:
            continue
        ids = [sent.name_at[x.i] for x in [c, *[y for y in c.children if y.dep_ == "appos"]] if x.i in sent.name_at]
        out.extend(ids)
    return out


_SHARED_ROLE = re.compile(r"\bco-?(?:found|author|writ|direct|creat|own|chair|lead|produc)|\bone of the \w+ers\b", re.I)


def _rule_person(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    if _SHARED_ROLE.search(sa.doc.text) or _SHARED_ROLE.search(sb.doc.text):
        return None  # a co-founder or one of the authors shares the role: another holder is no conflict
    roles = _ROLE_ALWAYS | _ROLE_MARKED | _ROLE_AT_TIME
    for pa, pb, common in _aligned(sa, sb, roles, allow_stem=False):
        if pa.neg or pb.neg:
            continue
        if common <= _ROLE_MARKED:
            ok = (sa.first and sb.first) or (sa.marks & {"lead", "chief", "principal", "sole"} and
                                             sb.marks & {"lead", "chief", "principal", "sole"})
            if "win" in common:
                ok = ok or _specific_event(sa, sb, pa, pb)
            if not ok:
                continue
        if common <= _ROLE_AT_TIME or (common <= {"direct"} and sa.doc[pa.i].pos_ == sb.doc[pb.i].pos_ == "NOUN"):
            # offices held in turn ("the Director of the Secret Service"): one holder at a time
            if (sa.temporal | sb.temporal) & {"since", "until", "till", "from-to", "as of", "formerly", "no longer"} \
                    or any(v.startswith("ord:") for v in sa.versions | sb.versions):
                continue
            at_time = (sa.first and sb.first) or (sa.time_points and sb.time_points and _time_compatible(sa, sb))
            at_time = at_time or (not sa.time_points and not sb.time_points and _time_compatible(sa, sb) and
                                  sa.tense == sb.tense == "present")
            if not at_time:
                continue
        elif not _dates_compatible(sa, sb) and not (sa.first and sb.first):
            continue
        if not (_unique_role_noun(sa, pa) and _unique_role_noun(sb, pb)) or \
                _role_compounds(sa, pa) != _role_compounds(sb, pb):
            continue  # "an American film director of Westerns", "an associate art director"
        ag_a, ag_b = _agents(sa, pa), _agents(sb, pb)
        if not ag_a or not ag_b:
            continue
        # the persons must not be named in the other sentence at all (succession, co-authorship)
        if any(_names_match(x, y) for x in ag_a for y in sb.names) or \
                any(_names_match(x, y) for x in ag_b for y in sa.names):
            continue
        # and the role must be about the same thing, not about the persons
        theme_a = [n for n in sa.names if n not in ag_a]
        theme_b = [n for n in sb.names if n not in ag_b]
        if not any(_names_match(x, y) for x in theme_a for y in theme_b):
            continue
        if not _same_theme(sa, pa, sb, pb, shared) and not _role_noun_theme_match(sa, pa, sb, pb):
            continue
        attr = _attr_name(common)
        return Verdict("person_role", attr, f"{attr}: {ag_a[0].key} vs {ag_b[0].key}")
    return None


def _unique_role_noun(sent: _Sentence, p: _Pred) -> bool:
    """A role noun names the one holder only when definite ('the author', 'its first CEO'), not 'a director
    of Westerns'; and what it is the role of must not be a plural ('director of Westerns')."""
    t = sent.doc[p.i]
    if t.pos_ != "NOUN":
        return True
    dets = [c for c in t.children if c.dep_ in ("det", "poss")]
    if any(d.lower_ in ("a", "an", "one", "another", "some", "any") for d in dets):
        return False
    owners = [x for c in t.children if c.dep_ == "prep" and c.lower_ == "of" for x in c.children if x.dep_ == "pobj"]
    return not any(o.tag_ == "NNS" or (o.tag_ == "NNPS" and o.i not in sent.name_at) for o in owners)


def _role_compounds(sent: _Sentence, p: _Pred) -> frozenset[str]:
    t = sent.doc[p.i]
    if t.pos_ != "NOUN":
        return frozenset()
    return frozenset(c.lemma_.lower() for c in t.children if c.dep_ in ("compound", "amod") and c.pos_ == "NOUN")


def _role_noun_theme_match(sa, pa, sb, pb) -> bool:
    """Role nouns ('the author of X') vs verbs ('X was written by'): compare the names around them."""
    def owners(sent, p):
        ids = set()
        for t in _theme_tokens(sent, p):
            ids |= {k[1] for k in _identity(sent, t) if k[0] == "name"}
            ids |= {n for k in _identity(sent, t) if k[0] == "noun" for n in k[2]}
        return [n for n in sent.names if n.key in ids]
    oa, ob = owners(sa, pa), owners(sb, pb)
    return any(_names_match(x, y) for x in oa for y in ob)


# ---- number ---------------------------------------------------------------------------------


def _rule_number(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    if not sa.quantities or not sb.quantities:
        return None
    if not _time_compatible(sa, sb):
        return None
    for qa in sa.quantities:
        for qb in sb.quantities:
            if _yearlike(qa) or _yearlike(qb):
                continue
            if not _same_measure(qa, qb):
                continue
            if qa.lo <= qb.hi and qb.lo <= qa.hi:
                continue
            big = max(abs(qa.value), abs(qb.value)) or 1.0
            if abs(qa.value - qb.value) / big < 0.03:
                continue
            if not _number_subject_match(sa, sb, qa, qb, shared):
                continue
            attr = sorted(qa.nouns & qb.nouns or (qa.keys & qb.keys) - {k for k in qa.keys if k.startswith("stem:")}
                          or qa.nouns or {qa.dim or "value"})[0]
            return Verdict("number", attr, f"{attr}: {qa.text} vs {qb.text}")
    return None


def _yearlike(q: _Qty) -> bool:
    """'2011 lists', '628': a bare integer that may well be a year is not compared as a number."""
    if q.dim == "":
        return bool(re.fullmatch(r"\d{3,4}", q.text)) and 500 <= q.value <= 2100
    return q.dim.startswith("count:") and bool(re.fullmatch(r"\d{4}", q.text)) and 1000 <= q.value <= 2100


def _same_measure(qa: _Qty, qb: _Qty) -> bool:
    """Two numbers measure the same attribute in the same (or a convertible) unit."""
    da, db = qa.dim, qb.dim
    ka = {k for k in qa.keys if not k.startswith("count:")}
    kb = {k for k in qb.keys if not k.startswith("count:")}
    shared_keys = (ka & kb) - {"stem:" + _stem(w) for w in _LIGHT_VERBS}
    if da.startswith("count:") and db.startswith("count:"):
        if da != db and not (qa.count_classes & qb.count_classes):
            return False
        return bool(shared_keys)
    if da.startswith("count:") or db.startswith("count:"):
        count, other = (qa, qb) if da.startswith("count:") else (qb, qa)
        if other.dim != "":
            return False
        # "has a capacity of 28,500" vs "seats 42,000 spectators"; "population of 12,480" vs "31,900 residents"
        return bool(shared_keys & (other.keys - {count.dim[6:]})) and bool(other.nouns or other.keys)
    if da != db:
        return False
    if da == "":
        return bool(qa.nouns & qb.nouns) or bool(shared_keys & {k for k in ka if not k.startswith("stem:")}
                                                 - _LIGHT_VERBS)
    # the same physical unit: an explicit attribute on both sides must agree
    if qa.nouns and qb.nouns and not (qa.nouns & qb.nouns) and not shared_keys:
        return False
    if da in ("percent",) or da.startswith("money:") or da == "time":
        return bool(shared_keys)
    return bool(shared_keys) or not (qa.nouns and qb.nouns)


def _number_subject_match(sa, sb, qa, qb, shared) -> bool:
    """The numbers are about the same thing: the clause subjects (or what they belong to) match."""
    def subject_ids(sent, q):
        v = _clause_verb(sent.doc[q.token])
        s = _subject_of(v) if v.pos_ in ("VERB", "AUX") or v.dep_ == "ROOT" else None
        ids = _identity(sent, s) if s is not None else set()
        if s is not None and s.lemma_.lower() in _CLASSES or (s is not None and s.dep_ == "expl"):
            ids = {("noun", k[1], k[2]) for k in ids if k[0] == "noun" and k[2]}
            ids |= {("name", n) for k in _identity(sent, s) if k[0] == "noun" for n in k[2]}
        return ids
    ia, ib = subject_ids(sa, qa), subject_ids(sb, qb)
    # attribute nouns owned by a name: "Rennvik's population", "the battery in the Hexa X2"
    ia = _lift_attribute_owners(sa, ia, qa)
    ib = _lift_attribute_owners(sb, ib, qb)
    match = _ids_match(ia, ib, sa, sb)
    if match:
        return True
    if match is False:
        # one side's subject may be an attribute noun whose owner is named in a prepositional phrase
        return _owner_overlap(sa, ia, sb, ib) or _part_of_subject(sa, ia, sb, ib) or _part_of_subject(sb, ib, sa, ia)
    return False


def _lift_attribute_owners(sent: _Sentence, ids: set, q: _Qty) -> set:
    """An attribute noun as subject stands for its owner: "Rennvik's population", "the battery in the
    Hexa X2" (the battery is what the number measures), "There are 22 stations along the X line"."""
    out = set(ids)
    v = _clause_verb(sent.doc[q.token])
    subj = next((c for c in v.children if c.dep_ in ("nsubj", "nsubjpass", "expl")), None)
    if subj is None:
        return out
    attribute = subj.dep_ == "expl" or subj.lemma_.lower() in _CLASSES or subj.lemma_.lower() in q.nouns
    if not attribute:
        return out
    for k in ids:
        if k[0] == "noun" and k[2]:
            out |= {("name", n) for n in k[2]}
    scope = v.subtree if subj.dep_ == "expl" else subj.subtree
    for c in scope:
        if c.i in sent.name_at and c.i not in sent.date_tokens:
            out.add(("name", sent.name_at[c.i].key))
    return out


def _part_of_subject(sx: _Sentence, ix: set, sy: _Sentence, iy: set) -> bool:
    """'The Pro plan of Ledgerly costs $29' / 'Ledgerly charges $49 for its Pro tier': a part of X on one
    side, X on the other, and the part's qualifiers ('Pro') named on the other side too."""
    names_y = [n for n in sy.names if ("name", n.key) in iy]
    for k in ix:
        if k[0] != "noun" or not k[2]:
            continue
        owners = [n for n in sx.names if n.key in k[2]]
        if not any(_names_match(o, n) for o in owners for n in names_y):
            continue
        heads = [t for t in sx.doc if t.lemma_.lower() == k[1] and t.pos_ == "NOUN"]
        words = {t.lower_ for t in sy.doc}
        quals = {c.lower_ for h in heads for c in h.children if c.dep_ in ("amod", "compound")}
        if quals and quals <= words:
            return True
    return False


def _owner_overlap(sa, ia, sb, ib) -> bool:
    na = [n for n in sa.names if ("name", n.key) in ia]
    nb = [n for n in sb.names if ("name", n.key) in ib]
    return any(_names_match(x, y) for x in na for y in nb)


# ---- polarity -------------------------------------------------------------------------------


def _object_lemmas(sent: _Sentence, p: _Pred) -> set[str]:
    """Content words of what the predicate says about its subject (object, complement, key prepositions)."""
    doc = sent.doc
    t = doc[p.i]
    out: set[str] = set()
    heads = []
    for c in t.children:
        if c.dep_ in ("dobj", "attr", "acomp", "oprd", "xcomp", "dative"):
            heads.append(c)
        elif c.dep_ == "nsubjpass":
            heads.append(c)
        elif c.dep_ == "prep" and c.lower_ not in ("since", "until", "in", "on", "at", "during", "by", "after",
                                                   "before", "for", "from") or \
                (c.dep_ == "prep" and c.lower_ in ("to", "with", "of", "over", "under")):
            heads.extend(x for x in c.children if x.dep_ == "pobj")
        elif c.dep_ == "prt":
            out.add(c.lemma_.lower())
    if t.pos_ in ("NOUN", "ADJ"):
        for c in t.children:
            if c.dep_ in ("compound", "amod") and c.pos_ in ("NOUN", "PROPN", "ADJ"):
                out.add(c.lemma_.lower())
            if c.dep_ == "prep":
                heads.extend(x for x in c.children if x.dep_ == "pobj")
    if t.pos_ == "ADJ":
        out |= {c.lemma_.lower() for c in t.children if c.dep_ == "advmod" and c.pos_ == "ADV"
                and c.lower_ not in ("not", "never", "very", "also", "still", "now", "fully", "only")}
    for h in heads:
        for x in h.subtree:
            if x.like_num or _is_code(x.text):
                out.add(_norm_version(x.text))
            if x.pos_ in ("NOUN", "PROPN", "ADJ", "VERB") and not x.is_stop and x.i not in sent.date_tokens and \
                    x.lemma_.lower() not in ("only", "new", "other", "good", "well", "any", "own"):
                out.add(x.lemma_.lower())
    return out


def _rule_polarity(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    for pa, pb, common in _aligned(sa, sb):
        na = bool(pa.neg) != pa.antonym
        nb = bool(pb.neg) != pb.antonym
        if na == nb:
            continue
        if pa.lemma in _LIGHT_VERBS or pb.lemma in _LIGHT_VERBS:
            continue
        neg_p, neg_s, pos_p, pos_s = (pa, sa, pb, sb) if na else (pb, sb, pa, sa)
        if not _polarity_time_ok(neg_p, neg_s, pos_p, pos_s):
            continue
        if not _same_theme(sa, pa, sb, pb, shared, lenient=True):
            continue
        oa = _object_lemmas(sa, pa)
        ob = _object_lemmas(sb, pb)
        neg_obj = oa if na else ob
        pos_obj = ob if na else oa
        if neg_obj and pos_obj and not (neg_obj & pos_obj):
            continue  # "does not support A" / "supports B"
        if neg_obj and not pos_obj and sa.doc[pa.i].pos_ == "VERB" and sb.doc[pb.i].pos_ == "VERB":
            continue  # "does not support A" / "is supported": only an unrestricted negation clashes with anything
        attr = _attr_name(common)
        return Verdict("polarity", attr,
                       f"{attr}: '{sa.doc[pa.i].text}' {'negated' if na else 'asserted'} vs "
                       f"'{sb.doc[pb.i].text}' {'negated' if nb else 'asserted'}")
    return None


def _polarity_time_ok(neg_p, neg_s, pos_p, pos_s) -> bool:
    """An undated negation and an undated assertion clash; 'never' clashes with any date; 'no longer' with
    a present-tense assertion; anything scoped by since/until or different dates does not."""
    if neg_p.neg == "never":
        return not ({"until", "till", "before"} & pos_s.temporal)
    if neg_p.neg == "no longer":
        return pos_s.tense == "present" and not pos_s.dates and not (pos_s.temporal & {"since", "until", "as of"})
    return _time_compatible(neg_s, pos_s)


# ---- exclusive states -----------------------------------------------------------------------


def _rule_exclusive(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    sta, stb = sa.states, sb.states
    for xa, pa in sta:
        for xb, pb in stb:
            if frozenset({xa, xb}) not in _EXCLUSIVE:
                continue
            if not _same_theme(sa, pa, sb, pb, shared, lenient=True):
                continue
            if xa in _OBJECT_STATES or xb in _OBJECT_STATES:
                if not (_event_words(sa, pa) & _event_words(sb, pb)):
                    continue
            if not _exclusive_time_ok(xa, sa, xb, sb):
                continue
            if xa == "ended" and xb == "ongoing" or xb == "ended" and xa == "ongoing":
                ended_p, ended_s, on_p, on_s = (pa, sa, pb, sb) if xa == "ended" else (pb, sb, pa, sa)
                if not _ended_matches_ongoing(ended_s, ended_p, on_s, on_p):
                    continue
            return Verdict("exclusive_predicate", f"{xa}/{xb}",
                           f"'{sa.doc[pa.i].text}' ({xa}) vs '{sb.doc[pb.i].text}' ({xb})")
    return None


def _event_words(sent: _Sentence, p: _Pred) -> set[str]:
    """Nouns in the predicate's phrase other than its subject: 'crashed during its first test flight'."""
    t = sent.doc[p.i]
    subj = {x.i for c in t.children if c.dep_ in ("nsubj", "nsubjpass") for x in c.subtree}
    return {x.lemma_.lower() for x in t.subtree if x.pos_ == "NOUN" and x.i not in subj and x.i != t.i}


def _ended_matches_ongoing(es, ep, os_, op) -> bool:
    """'ceased publication' vs 'still published'; 'discontinued' vs 'operated without interruption'."""
    objs = {c.lemma_.lower() for c in es.doc[ep.i].children if c.dep_ in ("dobj", "xcomp")}
    if not objs:
        return True
    stems = {_stem(w) for w in objs}
    classes = {c for w in objs for c in _CLASSES.get(w, ())}
    return _stem(op.lemma) in stems or bool(classes & op.classes) or \
        op.lemma in ("stand", "operate", "exist", "run", "maintain")


def _exclusive_time_ok(xa: str, sa: _Sentence, xb: str, sb: _Sentence) -> bool:
    """An event state (died in 2019) clashes with the other state unless that one is dated before it."""
    if xa in _EVENT_STATES and xb not in _EVENT_STATES:
        event_s, other_s = sa, sb
    elif xb in _EVENT_STATES and xa not in _EVENT_STATES:
        event_s, other_s = sb, sa
    else:
        if {xa, xb} == {"cancelled", "completed"}:
            cs, ds = (sa, sb) if xa == "cancelled" else (sb, sa)
            if cs.time_points and ds.time_points:
                return _last_day(ds) >= _first_day(cs)
            return True
        return _time_compatible(sa, sb, allow_one_dated=True) or not (sa.time_points and sb.time_points)
    if {"until", "till", "before"} & other_s.temporal:
        return False
    if other_s.tense == "present" or "since" in other_s.temporal or "still" in other_s.temporal:
        return True
    if other_s.time_points and event_s.time_points:
        return _last_day(other_s) >= _first_day(event_s)
    return not other_s.time_points


def _first_day(sent: _Sentence) -> int:
    return min(lo for lo, _ in sent.time_points)


def _last_day(sent: _Sentence) -> int:
    return max(hi for _, hi in sent.time_points)
