"""Confidence over time: decay without new evidence, reinforcement by new independent sources, and
dispute flags that follow a contradiction to everything derived from the claims it names.

An object's stored `confidence` is its value at `reinforced_at` (or `created`); the value now is
`effective_confidence`, computed when read. So a cycle never rewrites every object just to age it:
it rewrites only objects reinforced by this cycle's documents, objects whose decayed confidence fell
below the floor (deprecated with the reason, never deleted), and objects whose dispute flags changed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timezone

from smb_core.bank import Bank
from smb_core.evolve.cycle import Cycle
from smb_core.model import Claim, Edge, EdgeType, MemoryObject, Status, utcnow
from smb_core.stores.metadata import id_filter, naming_any_source

#: Knowledge that ages. Contradictions and questions never decay (they are never silently dropped);
#: groupings and layers 5-6 are recomputed every cycle from what they summarise.
DECAYING_TYPES = ("claim", "relationship", "entity", "concept", "canonical_entity", "canonical_concept",
                  "insight", "synthesis", "abstraction", "discovered_relationship")
#: Objects about a dispute, not derived knowledge that a dispute undermines.
NOT_DISPUTABLE = ("contradiction", "question", "agenda", "plan", "evolution")
#: Each new independent document closes this share of the gap between confidence and certainty.
REINFORCEMENT_GAIN = 0.25
#: A new claim restating an old one from another document (cosine at least this, same numbers) supports it.
RESTATEMENT_SIMILARITY = 0.9

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(r"\b(?:not|never|no|n't|neither|nor|without)\b", re.I)


def effective_confidence(obj: MemoryObject, half_life_days: float, now: datetime | None = None) -> float:
    """Confidence now: the stored value halved every `half_life_days` since the last reinforcement."""
    if half_life_days <= 0 or obj.type.value not in DECAYING_TYPES:
        return obj.confidence
    since = obj.reinforced_at or obj.created
    days = max(0.0, ((now or datetime.now(timezone.utc)) - since).total_seconds() / 86400)
    return obj.confidence * 0.5 ** (days / half_life_days)


def reinforced(confidence: float, new_sources: int) -> float:
    return 1.0 - (1.0 - confidence) * (1.0 - REINFORCEMENT_GAIN) ** new_sources


# ---- reinforcement ---------------------------------------------------------------------------


def reinforce(bank: Bank, cycle: Cycle) -> list[Edge]:
    """Raise the confidence of objects that this cycle's documents confirm independently: canonical
    entities and concepts newly named by another document, and claims that a new claim from another
    document restates (linked with `supports`). A new version of the same file is not independent."""
    if not cycle.source_ids:
        return []
    with bank.reading() as db:
        path_of = dict(db.sql("SELECT id, path FROM sources"))
        canonical = db.sql("SELECT id, source_ids FROM objects WHERE " + naming_any_source(
            "status = 'active' AND type IN ('canonical_entity', 'canonical_concept')"), [cycle.source_ids])
    new_paths = {path_of[s] for s in cycle.source_ids if s in path_of}
    boosts: dict[str, int] = {}
    for object_id, source_ids in canonical:
        paths = {path_of.get(s, s) for s in source_ids}
        added, older = paths & new_paths, paths - new_paths
        if added and older:
            boosts[object_id] = len(added)
    supports, claim_boosts = _restatements(bank, cycle, path_of, new_paths)
    for claim_id, count in claim_boosts.items():
        boosts[claim_id] = boosts.get(claim_id, 0) + count
    _apply_boosts(bank, cycle, boosts)
    bank.add_edges(supports, run_id=cycle.run_id)
    return supports


def _restatements(bank: Bank, cycle: Cycle, path_of: dict[str, str],
                  new_paths: set[str]) -> tuple[list[Edge], dict[str, int]]:
    """New claims that say the same as an older claim from another document: ANN neighbours with the
    same numbers and the same polarity (so '1874' never supports '1881'). When every claim of the bank
    is new (a first cycle), none can confirm another, and the search is skipped: at 50,000 documents it
    was about two million lookups that could find nothing."""
    with bank.reading() as db:
        if not _older_claims_may_exist(db, path_of, new_paths):
            return [], {}
        ids = db.object_ids_for_sources(cycle.source_ids, "type = 'claim' AND status = 'active'")
    edges, boosts = [], defaultdict(int)
    for start in range(0, len(ids), RESTATEMENT_CHUNK):
        with bank.reading() as db:
            where, params = id_filter("id", ids[start:start + RESTATEMENT_CHUNK])
            rows = db.sql(f"SELECT id, text, source_ids FROM objects WHERE {where} ORDER BY id", params)
        _restated(bank, rows, path_of, new_paths, edges, boosts)
    return edges, dict(boosts)


def _older_claims_may_exist(db, path_of: dict[str, str], new_paths: set[str]) -> bool:
    """Whether a claim may have a source outside this cycle's files: a document of another file, or a
    source that is no document of the bank (as `_restated` reads a claim's sources)."""
    if any(path not in new_paths for path in path_of.values()):
        return True
    return bool(db.sql("SELECT 1 FROM (SELECT unnest(source_ids) AS s FROM objects WHERE type = 'claim' "
                       "AND status = 'active') WHERE s NOT IN (SELECT id FROM sources) LIMIT 1"))


#: New claims looked up at once: a first cycle at 10,000 documents has 210,000 (about 1.5 million at
#: 50,000), whose texts, vectors and neighbours would otherwise all be held together.
RESTATEMENT_CHUNK = 5_000


def _restated(bank: Bank, rows: list[tuple], path_of: dict[str, str], new_paths: set[str],
              edges: list[Edge], boosts: dict[str, int]) -> None:
    """`_restatements` for some of the new claims (id, text, source ids): adds to `edges` and `boosts`."""
    vectors = bank.vectors_of([r[0] for r in rows])
    rows = [r for r in rows if r[0] in vectors]
    found = bank.nearest([vectors[r[0]] for r in rows], 6, prefix=f"{Claim.id_prefix}-")
    candidates = {other for hits in found for other, sim in hits if sim >= RESTATEMENT_SIMILARITY}
    with bank.reading() as db:
        where, params = id_filter("id", sorted(candidates))
        others = {r[0]: r[1:] for r in db.sql(f"SELECT id, text, source_ids FROM objects WHERE {where} "
                                               "AND status = 'active'", params)}
    for (claim_id, text, sources), hits in zip(rows, found):
        mine = {path_of.get(s, s) for s in sources}
        for other, similarity in hits:
            if other == claim_id or similarity < RESTATEMENT_SIMILARITY or other not in others:
                continue
            other_text, other_sources = others[other]
            theirs = {path_of.get(s, s) for s in other_sources}
            if theirs & mine or theirs <= new_paths or not _same_facts(text, other_text):
                continue  # same document, or both new (the older one of a pair is what gets confirmed)
            edges.append(Edge.between(claim_id, other, EdgeType.SUPPORTS, weight=round(similarity, 3)))
            boosts[other] += 1


def _same_facts(a: str, b: str) -> bool:
    return set(_NUMBER.findall(a)) == set(_NUMBER.findall(b)) and bool(_NEGATION.search(a)) == bool(_NEGATION.search(b))


def _apply_boosts(bank: Bank, cycle: Cycle, boosts: dict[str, int]) -> None:
    """Reinforce each object once per cycle (a re-run cycle finds its rows in `reinforcements`)."""
    with bank.reading() as db:
        done = {r[0] for r in db.sql("SELECT object_id FROM reinforcements WHERE cycle = ?", [cycle.key])}
        objects = db.get_objects(sorted(boosts.keys() - done))
    if not objects:
        return
    now = utcnow()
    half_life = bank.settings.confidence_half_life_days
    rows = []
    for obj in objects.values():
        before = effective_confidence(obj, half_life, now)
        obj.confidence, obj.reinforced_at = round(reinforced(before, boosts[obj.id]), 4), now
        if obj.status == Status.DEPRECATED and "confidence" in obj.status_reason:
            obj.status, obj.status_reason = Status.ACTIVE, f"reinforced by new sources in {cycle.key}"
        rows.append((obj.id, cycle.key, boosts[obj.id], round(before, 4), obj.confidence))
    with bank.writing() as db:  # together: a re-run finds the rows exactly when the objects were raised
        bank.update_objects(list(objects.values()))
        db.insert_rows("reinforcements", ["object_id", "cycle", "new_sources", "before", "after"], rows)


# ---- decay -----------------------------------------------------------------------------------


def deprecate_decayed(bank: Bank, cycle: Cycle) -> list[str]:
    """Mark deprecated (with the reason) the objects whose confidence decayed below the floor."""
    half_life, floor = bank.settings.confidence_half_life_days, bank.settings.confidence_floor
    if half_life <= 0:
        return []
    with bank.reading() as db:
        # Every cycle asks this of the whole bank, so the JSON (the widest column) is read only for objects
        # old enough to have decayed by their plain `created` column: confidence is set at `reinforced_at`
        # or else `created`, and an object is reinforced after it is created, so an object too young by
        # `created` is too young by both. The cycles of a growing bank mostly skip the JSON altogether.
        rows = db.sql(
            """
            WITH old_enough AS (
                SELECT id, confidence, created, data FROM objects
                WHERE status = 'active' AND type IN (SELECT unnest($types))
                  AND date_diff('second', created, now()) / 86400.0 / $half_life
                      > log2(greatest(confidence, 1e-9) / $floor)
            )
            SELECT id FROM old_enough
            WHERE confidence * pow(0.5, date_diff('second', coalesce(
                    TRY_CAST(json_extract_string(data, '$.reinforced_at') AS TIMESTAMPTZ), created), now())
                  / 86400.0 / $half_life) < $floor
            ORDER BY id
            """, {"types": list(DECAYING_TYPES), "half_life": half_life, "floor": floor})
        objects = db.get_objects([r[0] for r in rows])
    for obj in objects.values():
        obj.status = Status.DEPRECATED
        obj.status_reason = (f"confidence decayed below {floor} (half-life {half_life:g} days) without new "
                             f"sources; marked in {cycle.key}")
    bank.update_objects(list(objects.values()))
    return sorted(objects)


# ---- disputes --------------------------------------------------------------------------------


def dispute_map(bank: Bank) -> dict[str, list[str]]:
    """For every object a currently open contradiction undermines, the contradictions (sorted): the
    claims each one names, the relationships extracted from the same sentences, and, transitively,
    everything whose `derived_from` leads back to them."""
    with bank.reading() as db:
        rows = db.sql(
            """
            WITH RECURSIVE
            sides AS (
                SELECT o.id AS ctr, unnest(from_json(json_extract(o.data, '$.claim_ids'), '["VARCHAR"]')) AS id
                FROM objects o
                WHERE o.type = 'contradiction' AND json_extract_string(o.data, '$.resolution') = 'open'
            ),
            seeds AS (  -- the claims, and the relationships extracted from the very same sentence
                SELECT ctr, id FROM sides
                UNION
                SELECT s.ctr, r.id FROM sides s JOIN objects c ON c.id = s.id
                JOIN objects r ON r.type = 'relationship' AND r.text = c.text AND list_has_any(r.source_ids, c.source_ids)
            ),
            lineage AS (
                SELECT id, unnest(derived_from) AS parent FROM objects
                WHERE status <> 'merged' AND type NOT IN (SELECT unnest(?)) AND len(derived_from) > 0
            ),
            disputed(ctr, id) AS (
                SELECT ctr, id FROM seeds
                UNION
                SELECT d.ctr, l.id FROM disputed d JOIN lineage l ON l.parent = d.id
            )
            SELECT id, list(DISTINCT ctr ORDER BY ctr) FROM disputed GROUP BY id
            """, [list(NOT_DISPUTABLE)])
    return {r[0]: list(r[1]) for r in rows}


def flagged_now(bank: Bank) -> dict[str, list[str]]:
    """Objects whose stored `disputed_by` is not empty."""
    with bank.reading() as db:
        rows = db.sql("SELECT id, disputed_by FROM objects WHERE len(disputed_by) > 0")
    return {r[0]: sorted(r[1]) for r in rows}


def propagate_disputes(bank: Bank) -> tuple[int, int]:
    """Bring every object's `disputed_by` in line with the open contradictions; only objects whose
    flags change are rewritten. Returns (objects newly disputed, objects cleared)."""
    wanted, current = dispute_map(bank), flagged_now(bank)
    changed_ids = sorted(i for i in wanted.keys() | current.keys() if wanted.get(i, []) != current.get(i, []))
    if not changed_ids:
        return 0, 0
    with bank.reading() as db:
        objects = db.get_objects(changed_ids)
    for obj in objects.values():
        obj.disputed_by = wanted.get(obj.id, [])
    bank.update_objects(list(objects.values()))
    newly = sum(1 for i in changed_ids if i in objects and wanted.get(i) and not current.get(i))
    cleared = sum(1 for i in changed_ids if i in objects and current.get(i) and not wanted.get(i))
    return newly, cleared
