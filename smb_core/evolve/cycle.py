"""Evolution cycles: what each cycle consumed, so a cycle can be re-run and give the same result.

A cycle consumes the layer-0 versions ingested since the previous cycle (its "new" documents) and
records them with their sha256 (the document partitions' data versions). Re-materializing the same
cycle reads back the same set instead of taking whatever is new now: cycles are idempotent.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb

from smb_core.bank import Bank
from smb_core.model import Edge, EdgeType, MemoryObject, Relationship, Status, utcnow
from smb_core.stores.metadata import id_filter, looked_up_rows

#: Global passes (taxonomy, clusters, communities, insights, abstractions, meta-concepts,
#: discovered relationships) recompute a whole set from the whole bank. A cycle runs them when the
#: documents consumed since they last ran reach GLOBAL_REFRESH_SHARE of the bank, and on every
#: GLOBAL_REFRESH_CYCLES-th cycle at the latest; in between, their last results stand. So an
#: incremental cycle costs what its new documents cost, and no grouping lags more than a few percent
#: of the bank (or a day of hourly cycles) behind.
GLOBAL_REFRESH_SHARE = 0.05
GLOBAL_REFRESH_CYCLES = 24
GLOBAL_PASSES_SKIPPED = ("_Global passes not due this cycle (too few new documents since they last ran): "
                         "the previous groupings stand._")


@dataclass
class Cycle:
    key: str
    run_id: str | None
    source_ids: list[str]  # layer-0 versions first consumed by this cycle
    number: int
    counts: dict[str, int] = field(default_factory=dict)
    global_passes: bool = True  # whether this cycle recomputes the global groupings (see GLOBAL_REFRESH_SHARE)

    @property
    def tag(self) -> str:
        return f"cycle:{self.key}"


def digest_line(bank: Bank, label: str, obj: MemoryObject, note: str = "") -> str:
    """One bullet of a phase's markdown digest: what it made, linked to its file in the bank."""
    title = obj.title.replace("[", "(").replace("]", ")")
    return f"- {label}: [{title}]({(bank.root / obj.path()).as_uri()}){note}"


@dataclass
class PhaseResult:
    """What one phase of a cycle did: counts for the asset's metadata and a markdown summary."""

    counts: dict[str, int] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)


def next_cycle_key(bank: Bank) -> str:
    """`cycle-00001`, `cycle-00002`, ...: sortable, and safe as a Dagster partition key. A cycle that
    started but never finished comes first: it owns the documents it consumed, so it is run again."""
    with bank.reading() as db:
        unfinished = db.sql("SELECT key FROM cycles WHERE finished IS NULL ORDER BY number LIMIT 1")
        last = db.sql("SELECT max(number) FROM cycles")[0][0] or 0
    return unfinished[0][0] if unfinished else f"cycle-{last + 1:05d}"


def pending_source_count(bank: Bank) -> int:
    """Documents awaiting a cycle (what triggers an early one): active layer-0 versions that no cycle has
    consumed yet, and documents extracted again whose newly found objects no cycle has taken in."""
    with bank.reading() as db:
        waiting = ("UNION SELECT o.source FROM cycle_objects c JOIN objects o ON o.id = c.object_id "
                   "WHERE c.cycle IS NULL AND o.status = 'active'") if db.has_column("cycle_objects", "cycle") else ""
        return db.sql("SELECT count(*) FROM (SELECT id FROM sources WHERE status = 'active' "
                      f"AND id NOT IN (SELECT source_id FROM cycle_sources) {waiting})")[0][0]


def open_cycle(bank: Bank, key: str, run_id: str | None) -> Cycle:
    """Start (or, for a cycle that already ran, reload) the cycle `key` and its consumed documents.
    Each layer of a run opens its cycle; the layers after the first only read it (a write session costs
    more the larger the bank, and rewriting `started` made it the start of the last layer)."""
    with bank.reading() as db:
        row = db.sql("SELECT run_id FROM cycles WHERE key = ?", [key])
        if row and row[0][0] == run_id:
            return _load_cycle(db, key, run_id)
    with bank.writing() as db:
        if db.sql("SELECT 1 FROM cycles WHERE key = ?", [key]):  # a cycle another run started: this run's now
            db.con.execute("UPDATE cycles SET run_id = ?, started = ? WHERE key = ?", [run_id, utcnow(), key])
            return _load_cycle(db, key, run_id)
        number = (db.sql("SELECT max(number) FROM cycles")[0][0] or 0) + 1
        rows = db.sql("SELECT id, partition_key, sha256 FROM sources WHERE status = 'active' "
                      "AND id NOT IN (SELECT source_id FROM cycle_sources) ORDER BY id")
        global_passes = _global_passes_due(db, len(rows))
        db.con.execute("INSERT INTO cycles (key, number, run_id, started, global_passes) VALUES (?,?,?,?,?)",
                       [key, number, run_id, utcnow(), global_passes])
        db.insert_rows("cycle_sources", ["cycle", "source_id", "partition_key", "sha256"],
                       [(key, *r) for r in rows])
        db.con.execute("UPDATE cycle_objects SET cycle = ? WHERE cycle IS NULL", [key])
        return Cycle(key, run_id, [r[0] for r in rows], number, global_passes=global_passes)


def _load_cycle(db, key: str, run_id: str | None) -> Cycle:
    number, global_passes = db.sql("SELECT number, global_passes FROM cycles WHERE key = ?", [key])[0]
    sources = [r[0] for r in db.sql("SELECT source_id FROM cycle_sources WHERE cycle = ? ORDER BY source_id", [key])]
    return Cycle(key, run_id, sources, number, global_passes=global_passes is not False)


def _global_passes_due(db, new_documents: int) -> bool:
    """Whether a new cycle consuming `new_documents` should rerun the global passes."""
    # global_passes is NULL for cycles recorded before it existed: those always ran them
    last = db.sql("SELECT max(number) FROM cycles WHERE global_passes IS NOT false")[0][0]
    if last is None:
        return True
    cycles_since, documents_since = db.sql(
        "SELECT count(DISTINCT c.key), count(cs.source_id) FROM cycles c "
        "LEFT JOIN cycle_sources cs ON cs.cycle = c.key WHERE c.number > ?", [last])[0]
    bank_size = db.sql("SELECT count(*) FROM sources WHERE status = 'active'")[0][0]
    return (cycles_since + 1 >= GLOBAL_REFRESH_CYCLES
            or documents_since + new_documents >= GLOBAL_REFRESH_SHARE * max(bank_size, 1))


def finish_layer(bank: Bank, cycle: Cycle, layer: str) -> None:
    """Record that `layer` of the cycle is done, so that a run of the same cycle after one that died
    starts at the first layer not done (`layers_done`) instead of redoing an hour of finished layers."""
    with bank.writing() as db:
        db.con.execute("INSERT OR REPLACE INTO cycle_layers VALUES (?, ?, ?, ?)",
                       [cycle.key, layer, cycle.run_id, utcnow()])


def layers_done(bank: Bank, key: str) -> set[str]:
    """The layers of cycle `key` already done, if it started and did not finish; otherwise none (a new
    cycle, or a finished one materialized again, runs every layer)."""
    with bank.reading() as db:
        if not db.sql("SELECT 1 FROM cycles WHERE key = ? AND finished IS NULL", [key]):
            return set()
        try:
            return {r[0] for r in db.sql("SELECT layer FROM cycle_layers WHERE cycle = ?", [key])}
        except duckdb.CatalogException:  # a bank last written before layers were recorded
            return set()


def finish_cycle(bank: Bank, cycle: Cycle) -> None:
    """Mark the cycle done (after its last layer): the next cycle takes the documents ingested since."""
    with bank.writing() as db:
        db.con.execute("UPDATE cycles SET finished = ? WHERE key = ?", [utcnow(), cycle.key])


def sources_since_global_passes(bank: Bank, cycle: Cycle) -> list[str]:
    """The layer-0 versions consumed by this cycle and the cycles since the last one (before it) that
    ran the global passes: what the bank gained since its groupings were last recomputed."""
    with bank.reading() as db:
        rows = db.sql(
            "SELECT cs.source_id FROM cycle_sources cs JOIN cycles c ON c.key = cs.cycle "
            "WHERE c.number <= ? AND c.number > coalesce((SELECT max(number) FROM cycles "
            "WHERE number < ? AND global_passes IS NOT false), 0) ORDER BY cs.source_id",
            [cycle.number, cycle.number])
    return sorted({r[0] for r in rows} | set(cycle.source_ids))


def new_object_ids(bank: Bank, cycle: Cycle, types: tuple[str, ...]) -> list[str]:
    """Active objects of the given (layer-1) types extracted from the documents this cycle consumed.
    Such an object comes from one document, its `source`, looked up in that column's index (`lookups`):
    an incremental cycle's few documents cost the same in any bank. Also those this cycle took in from
    `cycle_objects`: found first when a document consumed before was extracted again."""
    with bank.reading() as db:
        rows = looked_up_rows(db, "objects", "source", cycle.source_ids, "id, type, status", "id, type",
                              "status = 'active'") if cycle.source_ids else []
        if db.has_column("cycle_objects", "object_id"):  # a bank last written before it existed has none
            rows += db.sql("SELECT o.id, o.type FROM cycle_objects c JOIN objects o ON o.id = c.object_id "
                           "WHERE c.cycle = ? AND o.status = 'active'", [cycle.key])
    return sorted({i for i, kind in rows if kind in types})


def batches_by_weight(weighted: Iterable[tuple[str, int]], limit: int) -> list[list[str]]:
    """Ids in the given order, cut where a batch's summed weights would pass `limit` (a heavier one goes
    alone): how a pass over a large bank bounds what it holds at once."""
    out, batch, total = [], [], 0
    for item, weight in weighted:
        if batch and total + (weight or 0) > limit:
            out.append(batch)
            batch, total = [], 0
        batch.append(item)
        total += weight or 0
    return out + [batch] if batch else out


def unchanged_ids(bank: Bank, objects: list[MemoryObject]) -> set[str]:
    """Ids of rebuilt objects (timelines, narratives, syntheses) whose stored active version says the
    same (title, body, citations): those are not rewritten, so they are not re-embedded and keep the
    run that made them."""
    where, params = id_filter("id", [o.id for o in objects])
    with bank.reading() as db:
        stored = {r[0]: r[1:] for r in db.sql(
            f"SELECT id, title, json_extract_string(data, '$.body'), derived_from, source_ids FROM objects "
            f"WHERE {where} AND status = 'active'", params)}
    return {o.id for o in objects
            if stored.get(o.id) == (o.title, o.body, list(o.derived_from), list(o.source_ids))}


def retire_stale(bank: Bank, cycle: Cycle, type: str, current: list[MemoryObject], kind: str | None = None,
                 keep: Iterable[str] = ()) -> int:
    """A pass that recomputes a whole set (a global pass such as clusters or communities, or the
    syntheses still standing) retires what it no longer produces: active objects of `type` not in
    `current` (nor in `keep`, ids) are superseded, not deleted; each keeps its file and points
    (`evolves_into`) to the new grouping that took most of its members. Only the stale objects are
    loaded: the set of active ones grows with the bank."""
    keep = {o.id for o in current} | set(keep)
    with bank.reading() as db:
        rows = db.sql("SELECT id, json_extract_string(data, '$.kind') FROM objects WHERE type = ? AND status = 'active'",
                      [type])
        stale = sorted(db.get_objects([i for i, k in rows if i not in keep and (kind is None or k == kind)]).values(),
                       key=lambda o: o.id)
    if not stale:
        return 0
    groupings_of: dict[str, list[str]] = defaultdict(list)  # member -> the current groupings listing it
    for obj in current:
        for member in set(getattr(obj, "members", [])):
            groupings_of[member].append(obj.id)
    edges = []
    for old in stale:
        old.status, old.status_reason = Status.SUPERSEDED, f"not found again by {cycle.key}"
        # the grouping sharing most members (the greatest id among equals); counted through the members,
        # not by intersecting every stale grouping with every current one (thousands by thousands)
        shared = Counter(g for m in set(getattr(old, "members", [])) for g in groupings_of.get(m, ()))
        overlap = max(((n, i) for i, n in shared.items()), default=(0, ""))
        if overlap[0]:
            edges.append(Edge.between(old.id, overlap[1], EdgeType.EVOLVES_INTO))
    with bank.writing():  # one write session: each costs more the larger the bank
        bank.update_objects(stale)
        bank.add_edges(edges, run_id=cycle.run_id)
        # a superseded relationship stops being an edge of the graph (its file and row remain)
        bank.remove_edges([(o.head, o.tail, o.id) for o in stale if isinstance(o, Relationship)])
    return len(stale)
