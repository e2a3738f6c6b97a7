"""How a predicate relates to the rest of its parse: its clause verb and subject, the identity of an
argument (which name or noun it stands for, and whether two are the same thing), its theme, which tokens
are attached to it, and the places a sentence names with their level and containers.

These are queries the rules make on two analysed sentences when comparing them, not part of the
once-per-sentence analysis in `sentences`.
"""

from __future__ import annotations

from collections.abc import Sequence

from smb_core.evolve.contradictions.lexicon import (
    _CATEGORY_NOUNS, _CLASSES, _LIGHT_VERBS, _OCCURRENCE_VERBS, _ORDINALS, _PHRASES, _PLACE_FEATURES,
    _REGION_LEVEL, _ROLE_ALWAYS, _ROLE_AT_TIME, _ROLE_MARKED,
)
from smb_core.evolve.contradictions.sentences import _Name, _Pred, _Sentence, _name_token, _names_match


def _clause_verb(tok):
    """The verb (or copula) whose clause contains tok."""
    t = tok
    seen = 0
    while t.pos_ not in ("VERB", "AUX") and t.dep_ != "ROOT" and seen < 30:
        t = t.head
        seen += 1
    return t


def _is_passive(v) -> bool:
    return any(c.dep_ in ("nsubjpass", "auxpass") for c in v.children) or \
        (v.tag_ == "VBN" and v.dep_ in ("acl", "advcl", "amod") and not any(c.dep_ == "nsubj" for c in v.children))


def _subject_of(v):
    """The subject of verb v, inherited through conj/xcomp/advcl/acl/relcl where it has none."""
    for _ in range(6):
        subjects = [c for c in v.children if c.dep_ in ("nsubj", "nsubjpass", "csubj", "expl")]
        if not subjects:  # a parse that left the subject unattached: "Stratus SDK 5 breaks ...", "Ledgerly charges"
            subjects = [c for c in v.children if c.i < v.i and (c.dep_ == "dep" and c.pos_ in ("PROPN", "NOUN") or
                                                               c.dep_ == "advmod" and c.pos_ == "ADV" and
                                                               _name_token(c))]
        # "The chemist Irene Vasquez was born": the parser may split an appositive into two subjects
        subj = next((c for c in subjects if c.pos_ == "PROPN"), subjects[0] if subjects else None)
        if subj is not None and subj.dep_ != "expl":
            return subj
        if v.dep_ in ("conj", "xcomp") and v.head.pos_ in ("VERB", "AUX"):
            v = v.head
            continue
        if v.dep_ in ("advcl",) and v.head.pos_ in ("VERB", "AUX"):
            s = next((c for c in v.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            return s
        if v.dep_ in ("acl", "relcl") and v.head.pos_ in ("NOUN", "PROPN", "PRON"):
            head = v.head
            # "an album by the band X, released in 1968": after a comma, the participle belongs to the
            # noun that the by/of-phrase modifies, not to the band
            top = head
            while top.dep_ in ("compound", "appos", "conj", "flat", "nmod") and top.head.i != top.i:
                top = top.head  # up to the noun phrase that contains the name
            if top.dep_ == "pobj" and top.head.head.pos_ in ("NOUN", "PROPN") and \
                    (top.head.lower_ == "by" or (top.head.lower_ in ("of", "from") and
                                                 any(t.text == "," for t in v.doc[top.i:v.i]))):
                head = top.head.head
            elif top is not head and top.pos_ == "NOUN":
                head = top  # "an album by the band, Blood, Sweat & Tears, released ...": the album
            # "'Salt Harbour' is a drama directed by ...": the drama is the copula's subject
            if head.dep_ == "attr" and head.head.pos_ in ("AUX", "VERB"):
                s = next((c for c in head.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                if s is not None:
                    return s
            return head
        return None
    return None


def _theme_tokens(sent: _Sentence, p: _Pred) -> list:
    """The argument a predicate is about: the patient of role/creation verbs, else the subject."""
    doc = sent.doc
    t = doc[p.i]
    if t.pos_ == "VERB":
        passive = _is_passive(t)
        if passive:
            s = next((c for c in t.children if c.dep_ == "nsubjpass" and c.pos_ == "PROPN"), None) or \
                next((c for c in t.children if c.dep_ == "nsubjpass"), None)
            return [s] if s is not None else ([_subject_of(t)] if _subject_of(t) is not None else [])
        obj = next((c for c in t.children if c.dep_ in ("dobj",) and (p.lemma, c.lower_) not in _PHRASES), None)
        agentive = p.classes & (_ROLE_ALWAYS | _ROLE_MARKED | _ROLE_AT_TIME | {"acquire", "sign", "build", "release",
                                                                             "hold_event", "open", "support",
                                                                             "accept", "contain", "require",
                                                                             "ended", "cancelled", "possess"})
        if obj is not None and p.lemma != "have" and agentive - {"support", "accept", "contain", "require", "possess"}:
            return [obj]  # "Solveig Andersen founded Nordic Loom": about Nordic Loom
        s = _subject_of(t)
        return [s] if s is not None else []
    if t.pos_ in ("NOUN", "PROPN") and t.dep_ == "ROOT" and t.tag_ in ("NNS", "VBZ"):
        # a verb the tagger took for a plural noun: "The Kairo web framework ships with ..."
        subj = [c for c in t.children if c.dep_ in ("compound", "nsubj") and c.i < t.i]
        if subj:
            return subj[-1:]
    if t.pos_ in ("NOUN", "PROPN"):
        # relational nouns: "the founder of X", "X's headquarters", "X has its headquarters"
        owners = [c for c in t.children if c.dep_ == "poss"]
        owners += [p2 for c in t.children if c.dep_ == "prep" and c.lower_ in ("of", "for") for p2 in c.children
                   if p2.dep_ == "pobj"]
        if owners:
            return owners
        if t.dep_ in ("dobj", "attr", "pobj", "conj"):
            v = _clause_verb(t)
            s = _subject_of(v) if v.pos_ in ("VERB", "AUX") else None
            return [s] if s is not None else []
        if t.dep_ in ("nsubj", "nsubjpass"):
            return []
        return []
    # adjectives: the copula's subject
    v = t.head if t.dep_ in ("acomp", "attr", "oprd") else _clause_verb(t)
    s = _subject_of(v) if v.pos_ in ("VERB", "AUX") else None
    if t.dep_ == "amod" and t.head.pos_ in ("NOUN", "PROPN"):
        if t.head.dep_ in ("attr", "oprd", "xcomp") and t.head.head.pos_ in ("AUX", "VERB"):
            s2 = _subject_of(t.head.head)  # "X remains an independent company", "X is a stable isotope"
            if s2 is not None:
                return [s2]
        return [t.head]
    return [s] if s is not None else []


def _identity(sent: _Sentence, tok, depth: int = 0) -> set:
    """Identity keys of the thing an NP head denotes: ('name', Name) or ('noun', lemma, frozenset(names))."""
    if tok is None or depth > 3:
        return set()
    out: set = set()
    if tok.i in sent.name_at:
        out.add(("name", sent.name_at[tok.i].key))
    elif tok.pos_ == "PRON":
        subj = _subject_of(_clause_verb(tok.head)) if tok.dep_ == "poss" else None
        if subj is not None and subj is not tok.head and subj.pos_ != "PRON" and depth < 3:
            out |= _identity(sent, subj, depth + 1)  # "Nordwind Airlines operated its first flight"
        elif tok.lower_ in ("it", "they", "he", "she", "its", "their", "his", "her", "this"):
            out.add(("pron", tok.lower_))
    else:
        owners: set[str] = set()
        compounds: set[str] = set()
        for c in tok.children:
            if c.dep_ == "poss":
                owners |= {k[1] for k in _identity(sent, c, depth + 1) if k[0] == "name"} or \
                    ({"<pron>"} if c.pos_ == "PRON" else set())
            elif c.dep_ in ("compound", "nmod", "amod") and c.i in sent.name_at:
                compounds.add(sent.name_at[c.i].key)
            elif c.dep_ == "compound" and c.pos_ == "NOUN":  # "the Rust programming language"
                compounds |= {sent.name_at[g.i].key for g in c.children
                              if g.dep_ in ("compound", "amod") and g.i in sent.name_at}
            elif c.dep_ == "prep" and c.lower_ in ("of",):
                for p in c.children:
                    if p.dep_ == "pobj":
                        keys = {k[1] for k in _identity(sent, p, depth + 1) if k[0] == "name"}
                        qualified = any(m.dep_ in ("compound", "amod") and m.pos_ in ("NOUN", "ADJ", "PROPN")
                                        and m.lower_ not in _ORDINALS for m in tok.children)
                        if tok.lemma_.lower() in _CATEGORY_NOUNS and not qualified:
                            compounds |= keys  # "the town of Vellmar", "version 2.4 of Fennel DB"
                        else:
                            owners |= keys
        for key in compounds:
            out.add(("name", key))  # "the Kairo web framework" is Kairo
        if compounds and tok.lemma_.lower() not in _CATEGORY_NOUNS:
            out.add(("noun", tok.lemma_.lower(), frozenset(compounds)))  # ... or a store of Halcyon Coffee
        if not compounds:
            if "<pron>" in owners:
                owners.discard("<pron>")
                subj = _subject_of(_clause_verb(tok))
                if subj is not None and subj is not tok:
                    owners |= {k[1] for k in _identity(sent, subj, depth + 1) if k[0] == "name"}
            definite = any(c.dep_ in ("det", "poss") and c.lower_ in _ANAPHORIC_DETS for c in tok.children)
            if definite and not owners and not any(c.dep_ == "appos" for c in tok.children):
                out.add(("pron", tok.lemma_.lower()))  # "the film", "this company": anaphoric, unknown
            else:
                out.add(("noun", tok.lemma_.lower(), frozenset(owners)))
    for c in tok.children:  # appositions name the same thing: "Edmund Hale, the founder of X"
        if c.dep_ == "appos" and not _aside(sent, c):
            out |= {k for k in _identity(sent, c, depth + 1) if k[0] == "name"}
    if tok.dep_ == "appos" and depth == 0 and not _aside(sent, tok):
        out |= {k for k in _identity(sent, tok.head, depth + 1) if k[0] == "name"}
    return out


def _aside(sent: _Sentence, appos) -> bool:
    """An apposition inside parentheses after other words, about something outside them: in "Cyrus Iveric
    (born February 1970, Upper Jorenell)" the parser makes the birthplace an apposition of the person, who is
    not Upper Jorenell. A name that opens the parentheses ("Lumen Labs (LL)") is another name."""
    doc, start = sent.doc, appos.left_edge.i
    opening = next((j for j in range(start - 1, -1, -1) if doc[j].text in ("(", ")")), None)
    return opening is not None and doc[opening].text == "(" and opening < start - 1 and appos.head.i < opening


_ANAPHORIC_DETS = {"the", "this", "that", "these", "those", "its", "his", "her", "their", "our", "such"}


def _ids_match(x: set, y: set, sx: _Sentence, sy: _Sentence) -> bool | None:
    """True/False when both identities are known; None when either is unknown (a pronoun, nothing)."""
    kx = {k for k in x if k[0] != "pron"}
    ky = {k for k in y if k[0] != "pron"}
    if not kx or not ky:
        return None
    names_x = [n for n in sx.names if ("name", n.key) in kx]
    names_y = [n for n in sy.names if ("name", n.key) in ky]
    if any(_names_match(a, b) for a in names_x for b in names_y):
        return True
    nouns_x = [k for k in kx if k[0] == "noun"]
    nouns_y = [k for k in ky if k[0] == "noun"]
    for a in nouns_x:
        for b in nouns_y:
            same_head = a[1] == b[1] or (_CLASSES.get(a[1], frozenset()) & _CLASSES.get(b[1], frozenset()))
            if not same_head:
                continue
            if not a[2] or not b[2]:
                return True  # one side does not say whose: underspecified, not different
            na = [n for n in sx.names if n.key in a[2]]
            nb = [n for n in sy.names if n.key in b[2]]
            if any(_names_match(p, q) for p in na for q in nb):
                return True
    return False


def _roles(sent: _Sentence, p: _Pred) -> tuple[list, list]:
    """(agent-ish tokens, patient tokens) of a verb: active subject / by-agent, and object / passive subject."""
    t = sent.doc[p.i]
    if t.pos_ != "VERB":
        return [], _theme_tokens(sent, p)
    if _is_passive(t):
        agent = [pp for c in t.children if c.dep_ == "agent" for pp in c.children if pp.dep_ == "pobj"]
        s = next((c for c in t.children if c.dep_ == "nsubjpass" and c.pos_ == "PROPN"), None) or \
            next((c for c in t.children if c.dep_ == "nsubjpass"), None) or _subject_of(t)
        return agent, [s] if s is not None else []
    s = _subject_of(t)
    obj = next((c for c in t.children if c.dep_ == "dobj" and (p.lemma, c.lower_) not in _PHRASES), None)
    if obj is None:
        return [], [s] if s is not None else []
    return [s] if s is not None else [], [obj]


def _clause_args(sent: _Sentence, p: _Pred) -> list:
    """Core arguments of the predicate's clause: roles of a verb; for a noun or adjective, its clause
    verb's subject, object and prepositional objects ('put their signatures to the Treaty')."""
    t = sent.doc[p.i]
    if t.pos_ == "VERB":
        return [x for r in _roles(sent, p) for x in r]
    v = _clause_verb(t)
    out = [c for c in v.children if c.dep_ in ("nsubj", "nsubjpass", "dobj")]
    out += [x for c in v.children if c.dep_ == "prep" and c.lower_ in ("to", "of", "for", "on", "with")
            for x in c.children if x.dep_ == "pobj"]
    return out


def _actor(sent: _Sentence, p: _Pred) -> list:
    """Who or what the clause is about: the by-agent of a passive, else the (inherited) subject."""
    t = sent.doc[p.i]
    agent = [pp for c in t.children if c.dep_ == "agent" for pp in c.children if pp.dep_ == "pobj"]
    if agent:
        return agent
    if t.pos_ == "VERB" and _is_passive(t):
        return []  # the subject of a passive is the patient, not who acts
    s = _subject_of(t)
    return [s] if s is not None and s.dep_ != "csubj" else []


def _names_in(ids: set) -> bool:
    """A name among the identity keys, directly or as the owner of a noun ('Halvard Berg's son')."""
    return any(k[0] == "name" or (k[0] == "noun" and k[2]) for k in ids)


def _has_name(ids: set) -> bool:
    return any(k[0] == "name" for k in ids)


def _ids_of(sent: _Sentence, tokens: list) -> set:
    out: set = set()
    for t in tokens:
        if t is not None:
            out |= _identity(sent, t)
    return out


def _same_theme(sa: _Sentence, pa: _Pred, sb: _Sentence, pb: _Pred, shared: list, lenient: bool = False) -> bool:
    """Whether two predicates are about the same thing; False whenever either side cannot tell (a pronoun,
    "the film"). `lenient` (polarity and states, whose objects are compared separately) also accepts the
    same subject when an object is a plain common noun ("served two terms" / "never served")."""
    ta, tb = sa.doc[pa.i], sb.doc[pb.i]
    if ta.pos_ == "VERB" and tb.pos_ == "VERB":
        _, pat_a = _roles(sa, pa)
        _, pat_b = _roles(sb, pb)
        ia, ib = _ids_of(sa, pat_a), _ids_of(sb, pat_b)
        match = _ids_match(ia, ib, sa, sb)
        if match and not lenient and not (_names_in(ia) or _names_in(ib)) and \
                not (sa.kind_subjects & sb.kind_subjects):
            return False  # "a trailer was launched" / "published a trailer": no name, no identity
        if match and not (_has_name(ia) or _has_name(ib)):
            # plain common-noun objects ("offline editing") say nothing about who: the actors must agree
            if _ids_match(_ids_of(sa, _actor(sa, pa)), _ids_of(sb, _actor(sb, pb)), sa, sb) is False:
                return False
        if lenient and not match and not (_has_name(ia) and _has_name(ib)):
            xa = _actor(sa, pa) or [x for x in [_subject_of(ta)] if x is not None]
            xb = _actor(sb, pb) or [x for x in [_subject_of(tb)] if x is not None]
            return bool(_ids_match(_ids_of(sa, xa), _ids_of(sb, xb), sa, sb))
        return bool(match)
    ia = _ids_of(sa, _theme_tokens(sa, pa))
    ib = _ids_of(sb, _theme_tokens(sb, pb))
    match = _ids_match(ia, ib, sa, sb)
    if match and not lenient and not (_names_in(ia) or _names_in(ib)) and not (sa.kind_subjects & sb.kind_subjects):
        return False
    if match:
        return True
    if match is False and (ta.pos_ == "VERB") != (tb.pos_ == "VERB"):
        # a noun against a verb ("put their signatures to the Treaty" / "the Treaty was signed"):
        # compare the noun's clause arguments with the verb's
        ca = _ids_of(sa, _clause_args(sa, pa)) | ia
        cb = _ids_of(sb, _clause_args(sb, pb)) | ib
        return bool(_ids_match(ca, cb, sa, sb))
    return False


#: Edges into a subject or similar argument: a date inside "Frederick (1122 - 1190)" is not the date of the
#: clause's event. (Objects are left out: "opened its first store in Vancouver" attaches the place to "store".)
_ARGUMENT_EDGES = {"nsubj", "nsubjpass", "attr", "appos", "poss", "csubj", "oprd", "dative", "agent"}


def _governs(sent: _Sentence, p: _Pred, tok_i: int, allow_conj: bool = True) -> int:
    """0 if token tok_i is not attached to predicate p; 1 attached directly; 2 through a conjoined verb."""
    doc = sent.doc
    pt = doc[p.i]
    anchors = {pt.i}
    if pt.pos_ != "VERB":
        v = _clause_verb(pt)
        if v.lemma_.lower() in _LIGHT_VERBS | _OCCURRENCE_VERBS | {"serve"} or pt.dep_ in ("acomp", "attr") or \
                any(c.startswith("first_event:") for c in p.classes):
            anchors.add(v.i)
    t = doc[tok_i]
    steps = 0
    while steps < 12:
        if t.i in anchors:
            return 1
        if steps > 0 and t.dep_ in _ARGUMENT_EDGES and t.head.i in anchors:
            break  # inside an argument ("Frederick (1122 – 1190) was ..."): not a value of the predicate
        if t.dep_ in ("relcl", "ccomp", "advcl", "csubj", "parataxis", "acl") and t.i not in anchors:
            if t.dep_ == "acl" and t.tag_ == "VBN" and t.i in anchors:
                return 1
            break
        if t.pos_ == "VERB" and t.i not in anchors and t.dep_ != "conj":
            break
        if t.dep_ == "conj" and t.pos_ == "VERB" and t.head.i in anchors and allow_conj:
            return 2
        if t.head is t:
            break
        t = t.head
        steps += 1
    return 0


def _attached(sent: _Sentence, p: _Pred, token_indices: Sequence[int]) -> list[int]:
    """Indices (from token_indices) attached to p; direct attachments win over ones through a conj verb."""
    direct = [i for i in token_indices if _governs(sent, p, i) == 1]
    if direct:
        return direct
    return [i for i in token_indices if _governs(sent, p, i) == 2]


# ---- places ---------------------------------------------------------------------------------

_LOC_PREPS = {"in", "at", "near", "outside", "inside", "within", "on", "out", "into"}


def _places(sent: _Sentence) -> list[tuple[_Name, int]]:
    """(place name, token index) for names used as a location: after in/at/near, or a host's subject."""
    doc = sent.doc
    out = []
    for n in sent.names:
        root = doc[n.start:n.end].root
        if any(doc[i].i in sent.date_tokens for i in range(n.start, n.end)):
            continue
        tok = root
        ok = False
        # the name may modify a noun ("a Seattle garage", "the Clydebank shipyard", "the village of Calder")
        if tok.dep_ in ("compound", "nmod", "amod") and tok.head.pos_ == "NOUN":
            tok = tok.head
        if tok.dep_ == "pobj" and tok.head.lower_ == "of" and tok.head.head.pos_ == "NOUN" and \
                tok.head.head.lemma_.lower() in _CATEGORY_NOUNS | {"town", "outskirts", "centre", "center",
                                                                   "heart", "suburbs", "area", "old"}:
            tok = tok.head.head
        if tok.dep_ == "poss" and tok.head.dep_ == "pobj":  # "in Tallinn's old town"
            tok = tok.head
        if tok.dep_ == "pobj" and tok.head.lower_ in _LOC_PREPS:
            ok = True
        if tok.dep_ == "appos" and tok.head.dep_ == "pobj" and tok.head.head.lower_ in _LOC_PREPS:
            ok = True  # "in Austin, Texas"
        if tok.dep_ == "conj":
            h = tok.head
            while h.dep_ == "conj":
                h = h.head
            if h.dep_ == "pobj" and h.head.lower_ in _LOC_PREPS:
                ok = True
        if root.dep_ == "nsubj" and root.head.lemma_.lower() == "host":
            ok = True
        if ok:
            if tok.dep_ == "pobj" and tok.head.lower_ == "on" and not \
                    any(w in n.key.split() for w in ("street", "road", "avenue", "square", "island")):
                continue
            out.append((n, root.i))
    return out


def _place_level(name: _Name) -> str:
    key = name.key
    if key in _REGION_LEVEL:
        return _REGION_LEVEL[key]
    words = key.split()
    if words and (words[-1] in _PLACE_FEATURES or words[0] in ("mount", "lake", "river", "cape", "port")):
        return "feature:" + (words[-1] if words[-1] in _PLACE_FEATURES else words[0])
    return "local"


def _containers(sent: _Sentence, tok_i: int) -> set[str]:
    """Names that contain a place in the same sentence: 'Austin, Texas', 'in the Atacama Desert in Chile'."""
    doc = sent.doc
    t = doc[tok_i]
    out = set()
    for c in t.subtree:
        if c.i != tok_i and c.i in sent.name_at and c.i not in range(sent.name_at[tok_i].start,
                                                                     sent.name_at[tok_i].end):
            out.add(sent.name_at[c.i].key)
    h = t.head
    if t.dep_ == "appos" and h.i in sent.name_at:
        out.add(sent.name_at[h.i].key)
    return out
