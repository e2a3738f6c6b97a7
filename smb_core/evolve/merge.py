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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from smb_core.bank import Bank
from smb_core.evolve import llm_judge
from smb_core.evolve.cycle import Cycle
from smb_core.evolve.contexts import context_vectors
from smb_core.extract.base import QUALIFIER, blocking_keys, normalise_name, partner_keys
from smb_core.integrity import member_list_differences
from smb_core.model import (
    CanonicalConcept, CanonicalEntity, Edge, EdgeType, Entity, EntityKind, MemoryObject, Status,
    model_for, stable_id,
)

NAME_SIMILAR = 0.88
VECTOR_SIMILAR = 0.86
CONTEXT_SIMILAR = 0.5
ANN_NEIGHBOURS = 8
#: Objects taken from one blocking key per new object. A common name ("film", "American") is shared by
#: thousands of mentions; comparing all of them is quadratic, while linking each to the same few
#: (lowest ids) is enough: groups are unions, so every mention still reaches one canonical object.
MAX_PER_KEY = 25
#: How far the similarity signals (cosines and name ratios, 0..1) may move before a pair counts as
#: borderline. Half the +0.1 the rule itself asks of context to call a kind conflict clearly overruled;
#: on names it puts a lone surname (0.90, "Okafor" ~ "Mara Okafor") inside the band and a full token
#: match (0.95) outside it, and on vectors it covers cosines 0.81-0.91 around VECTOR_SIMILAR.
BORDERLINE = 0.05


@dataclass
class MergeResult:
    canonical: list[MemoryObject] = field(default_factory=list)
    merged_members: int = 0
    groups: int = 0
    redirected_edges: int = 0


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
    "Jordan") also needs its contexts to agree; a similar name needs a close vector or context.
    Contexts or shared neighbours can overrule a kind conflict, because NER kinds are noisy.
    (Concepts are terms: the same term is one concept, and `split` later separates its senses.)"""
    agreeing_context = context >= CONTEXT_SIMILAR or shared >= 1
    if conflict and not (context >= CONTEXT_SIMILAR + 0.1 or shared >= 2):
        return False
    if names == 1.0:
        return multiword or agreeing_context
    return names >= NAME_SIMILAR and (vector >= VECTOR_SIMILAR or agreeing_context)


def is_borderline(names: float, vector: float, context: float, shared: int, multiword: bool, conflict: bool) -> bool:
    """Whether `decide` changes its answer when the similarity signals move by BORDERLINE either way:
    then the rule is too close to call, and an LLM (when configured) decides. A name similarity of 1.0
    is a blocking-key match, not a measurement, so it does not move; counts and kinds do not either."""
    def at(delta: float) -> bool:
        moved = names if names == 1.0 else min(names + delta, 0.999)
        return decide(moved, vector + delta, context + delta, shared, multiword, conflict)
    return at(-BORDERLINE) != at(BORDERLINE)


@lru_cache(maxsize=500_000)
def name_similarity(a: str, b: str) -> float:
    """1.0 when two names share a blocking key (same name, or acronym and expansion), else string similarity."""
    if partner_keys(blocking_keys(a)) & blocking_keys(b):
        return 1.0
    return max(difflib.SequenceMatcher(None, normalise_name(a), normalise_name(b)).ratio(), _token_match(a, b))


def _token_match(a: str, b: str) -> float:
    """Share of the shorter name's words found in the longer one, allowing abbreviations
    ("Labs" ~ "Laboratories") and a surname standing for a full name ("Okafor" ~ "Mara Okafor")."""
    short, long = sorted((normalise_name(QUALIFIER.sub("", a)).split(), normalise_name(QUALIFIER.sub("", b)).split()),
                         key=len)
    if not short:
        return 0.0

    def same(x: str, y: str) -> bool:
        x, y = x.rstrip("s"), y.rstrip("s")
        return x == y or (min(len(x), len(y)) >= 3 and (x.startswith(y) or y.startswith(x)))

    matched = sum(any(same(w, v) for v in long) for w in short)
    if matched < len(short):
        return 0.0
    if len(short) == 1 and len(long) > 1:
        return 0.9 if same(short[0], long[-1]) else 0.0  # a lone surname, never a lone first word
    return 0.95


def _neighbour_names(db, ids: list[str]) -> dict[str, set[str]]:
    """Names of the entities that share a claim with each object: its context in the graph."""
    rows = db.sql(
        """
        SELECT e1.tail, n.name FROM edges e1
        JOIN edges e2 ON e2.head = e1.head AND e2.tail <> e1.tail AND e2.edge_type = 'references'
        JOIN names n ON n.object_id = e2.tail
        WHERE e1.edge_type = 'references' AND e1.tail IN (SELECT unnest(?))
        """,
        [ids],
    )
    out: dict[str, set[str]] = defaultdict(set)
    for object_id, name in rows:
        out[object_id].add(name)
    return out


def _similar_names(bank: Bank, new: dict[str, MemoryObject], vectors: dict) -> dict[str, list[str]]:
    """Layer-1 objects of the same type whose name vectors are close (VECTOR_SIMILAR) to each new one's.

    An entity's or concept's vector embeds its name alone, so objects of one name share one vector: the
    index is asked once per (type, name), not once per object (a third fewer queries on 2wiki)."""
    asked: dict[tuple[str, str], list[str]] = defaultdict(list)  # (type, name) -> the new objects it stands for
    for oid, obj in new.items():
        if oid in vectors:
            asked[(obj.type.value, obj.text())].append(oid)
    out: dict[str, list[str]] = {}
    for type_ in sorted({t for t, _ in asked}):
        keys = [key for key in asked if key[0] == type_]
        prefix = f"{model_for(type_).id_prefix}-"  # layer-1 ids only: canonical objects have their own prefix
        found = bank.vectors.query_many([vectors[asked[key][0]] for key in keys], ANN_NEIGHBOURS, prefix)
        for key, hits in zip(keys, found):
            close = [other for other, similarity in hits if similarity >= VECTOR_SIMILAR]
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
        vectors = bank.vectors.get_embeddings(list(new))
        for oid, found in _similar_names(bank, new, vectors).items():
            candidates[oid].update(found)
        other_ids = sorted({c for cs in candidates.values() for c in cs} - set(new))
        others = {**new, **db.get_objects(other_ids)}
        context = _neighbour_names(db, sorted(others))
    other_vectors = bank.vectors.get_embeddings(other_ids)
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
            names = name_similarity(a.title, b.title)
            if names < name_floor:
                continue
            cosine = float(all_vectors[oid] @ all_vectors[cid]) if oid in all_vectors and cid in all_vectors else 0.0
            shared = len(context.get(oid, set()) & context.get(cid, set()))
            multiword = len(normalise_name(QUALIFIER.sub("", a.title)).split()) >= 2 or not isinstance(a, Entity)
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
    unique = {(a, b): (a, b, score, sig) for a, b, score, sig in pairs}
    return [unique[key] for key in sorted(unique)]


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


def _groups(pairs: list[tuple[str, str, float, dict]]) -> list[set[str]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, *_ in pairs:
        parent[find(a)] = find(b)
    groups: dict[str, set[str]] = defaultdict(set)
    for x in list(parent):
        groups[find(x)].add(x)
    return [g for g in groups.values() if len(g) > 1]


def merge(bank: Bank, cycle: Cycle, new_ids: list[str]) -> MergeResult:
    """Merge the new objects with what they duplicate; extend existing canonical objects when possible."""
    pairs = find_pairs(bank, new_ids)
    result = MergeResult()
    groups = _groups(pairs)
    if not groups:
        return result
    signals: dict[str, tuple[float, dict]] = {}  # the first pair each member was accepted in
    for a, b, score, sig in pairs:
        signals.setdefault(a, (score, sig))
        signals.setdefault(b, (score, sig))
    with bank.reading() as db:
        members = db.get_objects(sorted({m for g in groups for m in g}))
        existing_ids = sorted({m.merged_into for m in members.values() if getattr(m, "merged_into", None)})
        existing = {i: o for i, o in db.get_objects(existing_ids).items() if o.status == Status.ACTIVE}
        edge_rows = db.sql("SELECT id, head, tail, edge_type, weight, object_id FROM edges "
                           "WHERE head IN (SELECT unnest($ids)) OR tail IN (SELECT unnest($ids))",
                           {"ids": sorted(members)})
    edges_of: dict[str, list[tuple]] = defaultdict(list)
    for row in edge_rows:
        edges_of[row[1]].append(row)
        if row[2] != row[1]:
            edges_of[row[2]].append(row)
    canonical_objects, updated_members, new_edges, removed, records = [], [], [], [], []
    for group in groups:
        objs = sorted((members[m] for m in group if m in members), key=lambda o: (-o.mentions, o.id))
        prior = next((existing[o.merged_into] for o in objs if getattr(o, "merged_into", None) in existing), None)
        # A member of another active canonical object stays there: moving it would leave that object's
        # member list naming it, and would pull mentions out of the senses a split made.
        objs = [o for o in objs if getattr(o, "merged_into", None) not in existing
                or o.merged_into == (prior.id if prior else None)]
        canonical_id = prior.id if prior else _canonical_id(objs[0])
        joining = [o for o in objs if o.status != Status.MERGED or o.merged_into != canonical_id]
        member_ids = {o.id for o in objs}
        redirected = []  # (edge, its row) for the members' edges, now the canonical object's
        for edge_id, head, tail, kind, weight, object_id in {row[0]: row for m in sorted(member_ids)
                                                             for row in edges_of.get(m, [])}.values():
            new_head = canonical_id if head in member_ids else head
            new_tail = canonical_id if tail in member_ids else tail
            if new_head != new_tail:
                redirected.append((Edge.between(new_head, new_tail, kind, weight),
                                   {"id": edge_id, "head": head, "tail": tail, "edge_type": kind, "weight": weight,
                                    "object_id": object_id}))
        if not joining and not redirected:
            continue  # links between members it already has: nothing to rewrite
        canonical = _canonical(objs, prior, cycle)
        canonical_objects.append(canonical)
        for member in joining:
            member.status, member.merged_into, member.run_id = Status.MERGED, canonical.id, cycle.run_id
            member.status_reason = f"merged into {canonical.id} in {cycle.key}"
        updated_members += joining
        new_edges += [edge for edge, _ in redirected]
        removed += [row for _, row in redirected]
        new_edges.extend(Edge.between(canonical.id, m, EdgeType.DERIVES_FROM) for m in sorted(member_ids))
        moved = {o.id for o in joining} | {r[k] for _, r in redirected for k in ("head", "tail")}
        for member in sorted(member_ids & moved):
            score, sig = signals.get(member, (1.0, {}))
            records.append((cycle.key, canonical.id, member, score, json.dumps(sig)))
    bank.write(canonical_objects, new_edges, run_id=cycle.run_id)
    bank.update_objects(updated_members)
    bank.remove_edges([(r["head"], r["tail"], r["id"]) for r in removed])
    with bank.writing() as db:
        by_member = defaultdict(list)
        for r in removed:
            by_member[r["head"]].append(r)
            by_member[r["tail"]].append(r)
        db.insert_rows("merges", ["cycle", "survivor", "member", "score", "signals", "redirected_edges"],
                       [(*rec, json.dumps(by_member.get(rec[2], []))) for rec in records])
    result.canonical, result.groups = canonical_objects, len(canonical_objects)
    result.merged_members, result.redirected_edges = len(updated_members), len(removed)
    return result


def _canonical(objs: list[MemoryObject], prior: MemoryObject | None, cycle: Cycle) -> MemoryObject:
    """The canonical object of a group: the most mentioned name, everything else as aliases."""
    lead = objs[0]
    members = sorted({*(prior.members if prior else []), *(o.id for o in objs)})
    aliases = sorted({n for o in objs for n in [o.title, *getattr(o, "aliases", [])]} - {lead.title}
                     | set(prior.aliases if prior else []))
    fields = dict(
        title=prior.title if prior else lead.title,
        description=lead.description,
        aliases=aliases[:50],
        mentions=sum(o.mentions for o in objs) + (prior.mentions if prior else 0),
        members=members,
        confidence=max([o.confidence for o in objs] + ([prior.confidence] if prior else [])),
        source_ids=sorted({s for o in objs for s in o.source_ids} | set(prior.source_ids if prior else [])),
        tags=sorted({t for o in objs for t in o.tags if t != "document-subject"} | set(prior.tags if prior else [])),
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
    for obj in canonical.values():
        wrong = {m for c, m, listed in differences if c == obj.id and listed}
        missing = {m for c, m, listed in differences if c == obj.id and not listed}
        obj.members = sorted(set(obj.members) - wrong | missing)
        obj.derived_from = list(obj.members)
        obj.run_id = cycle.run_id
    bank.update_objects(list(canonical.values()))
    return len(canonical)


def undo_merge(bank: Bank, canonical_id: str) -> int:
    """Restore the members of a canonical object and their original edges; returns members restored."""
    with bank.reading() as db:
        rows = db.sql("SELECT member, redirected_edges FROM merges WHERE survivor = ? AND NOT undone", [canonical_id])
        members = db.get_objects([r[0] for r in rows])
        canonical = db.get_object(canonical_id)
        current_edges = db.sql("SELECT head, tail, id FROM edges WHERE head = ? OR tail = ?",
                               [canonical_id, canonical_id])
    restored_edges = {}
    for _, blob in rows:
        for e in json.loads(blob):
            restored_edges[e["id"]] = Edge(id=e["id"], head=e["head"], tail=e["tail"], edge_type=e["edge_type"],
                                           weight=e["weight"], object_id=e["object_id"])
    for member in members.values():
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

