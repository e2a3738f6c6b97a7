"""Integrity checks over the stores, used by the Dagster asset checks and `smb status`."""

from __future__ import annotations

import hashlib

from smb_core.bank import Bank
from smb_core.model import ModelError, SourceDocument, from_markdown, markdown_body
from smb_core.stores.metadata import id_filter


def layer0_hash_mismatches(bank: Bank) -> list[str]:
    """Layer-0 copies whose bytes no longer match the sha256 recorded when they were ingested."""
    with bank.reading() as db:
        sources = db.sources()
    problems = []
    for doc in sources:
        path = bank.root / doc.file_path()
        try:
            body = markdown_body(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"{doc.path} v{doc.version}: layer-0 copy {path} is missing")
            continue
        except ModelError as exc:
            problems.append(f"{doc.path} v{doc.version}: layer-0 copy {path} is damaged: {exc}")
            continue
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != doc.sha256:
            problems.append(f"{doc.path} v{doc.version}: {path} does not match sha256 {doc.sha256[:12]}")
    return problems


def front_matter_errors(bank: Bank, object_ids: list[str]) -> list[str]:
    """Object files whose front matter does not parse or validate against the model, or has another id."""
    where, params = id_filter("id", object_ids)
    with bank.reading() as db:
        rows = db.sql(f"SELECT id, file_path FROM objects WHERE {where}", params)
    errors = []
    for object_id, file_path in rows:
        try:
            obj = from_markdown((bank.root / file_path).read_text(encoding="utf-8"))
        except (OSError, ModelError) as exc:
            errors.append(f"{file_path}: {exc}")
            continue
        if isinstance(obj, SourceDocument) or obj.id != object_id:
            errors.append(f"{file_path}: front matter names {obj.id}, expected {object_id}")
    return errors


def objects_of_run(bank: Bank, run_id: str, layer: int, sample: int = 2000) -> list[str]:
    """Ids written by a run (or, if it wrote none, a random sample of the layer) for spot checks."""
    with bank.reading() as db:
        ids = [r[0] for r in db.sql("SELECT id FROM objects WHERE run_id = ? AND layer = ?", [run_id, layer])]
        if not ids:
            # DuckDB takes no parameter in a sample clause, and samples before WHERE: filter in a subquery
            ids = [r[0] for r in db.sql(f"SELECT id FROM (SELECT id FROM objects WHERE layer = ?) "
                                        f"USING SAMPLE reservoir({int(sample)} ROWS)", [layer])]
    return ids


def dangling_references(bank: Bank, limit: int = 50) -> list[str]:
    """Edges, `derived_from` ids and merge pointers that name an id that does not exist."""
    with bank.reading() as db:
        rows = db.sql(
            """
            WITH ids AS (SELECT id FROM objects)
            SELECT 'edge ' || e.id || ' -> ' || x.ref FROM edges e,
                   LATERAL (SELECT unnest([e.head, e.tail]) AS ref) x
            WHERE x.ref NOT IN (SELECT id FROM ids)
            UNION ALL
            SELECT 'derived_from of ' || o.id || ' -> ' || d FROM objects o, unnest(o.derived_from) AS t(d)
            WHERE d NOT IN (SELECT id FROM ids) AND d NOT IN (SELECT id FROM sources)
            LIMIT ?
            """,
            [limit],
        )
    return [r[0] for r in rows]


def unresolved_merges(bank: Bank, limit: int = 50) -> list[str]:
    """Merged objects whose pointer does not lead to an active canonical object."""
    with bank.reading() as db:
        rows = db.sql(
            """
            SELECT o.id || ' -> ' || coalesce(json_extract_string(o.data, '$.merged_into'), 'nothing')
            FROM objects o LEFT JOIN objects s ON s.id = json_extract_string(o.data, '$.merged_into')
            WHERE o.status = 'merged' AND (s.id IS NULL OR s.status <> 'active') LIMIT ?
            """,
            [limit],
        )
    return [r[0] for r in rows]


def member_list_differences(db, limit: int | None = None) -> list[tuple[str, str, bool]]:
    """(canonical object, member, listed) where an active canonical object's `members` list and the
    layer-1 objects merged into it disagree: listed but not merged into it (True), or merged into it but
    not listed (False). Readers rely on the lists (syntheses find a theme's claims through them)."""
    return db.sql(
        f"""
        WITH listed AS (
            SELECT id AS canonical, unnest(CAST(json_extract(data, '$.members') AS VARCHAR[])) AS member
            FROM objects WHERE status = 'active' AND type IN ('canonical_entity', 'canonical_concept')
        ), pointing AS (
            SELECT json_extract_string(o.data, '$.merged_into') AS canonical, o.id AS member FROM objects o
            WHERE o.layer = 1 AND o.status = 'merged'
        )
        SELECT canonical, member, true FROM (SELECT * FROM listed EXCEPT SELECT * FROM pointing)
        UNION ALL
        SELECT canonical, member, false FROM (
            SELECT p.* FROM pointing p JOIN objects c ON c.id = p.canonical AND c.status = 'active'
            EXCEPT SELECT * FROM listed)
        ORDER BY 1, 2 {"LIMIT " + str(int(limit)) if limit else ""}
        """)


def member_list_mismatches(bank: Bank, limit: int = 50) -> list[str]:
    """Canonical objects whose member list names an object not merged into them, or misses one that is."""
    with bank.reading() as db:
        rows = member_list_differences(db, limit)
    return [f"{c} lists {m}, which is not merged into it" if listed else f"{c} does not list {m}, merged into it"
            for c, m, listed in rows]


def contradiction_counts(bank: Bank) -> list[tuple[str, int]]:
    """(cycle, contradictions existing after it) for every finished cycle, oldest first."""
    with bank.reading() as db:
        return db.sql("SELECT key, CAST(json_extract(counts, '$.contradictions_total') AS INTEGER) FROM cycles "
                      "WHERE counts IS NOT NULL ORDER BY number")


def unresolved_citations(bank: Bank, layers: tuple[int, ...] = (4, 5, 6), run_id: str | None = None,
                         limit: int = 50) -> list[str]:
    """Citations in active objects of these layers (statements, timeline events, agenda items, plan
    steps) that name an object or a source span that does not exist. With `run_id`, only in the objects
    that run wrote: nothing is ever deleted, so what resolved once still does, and a cycle's check costs
    what the cycle wrote rather than the whole bank."""
    with bank.reading() as db:
        rows = db.sql(
            """
            WITH checked AS (
                SELECT id, data FROM objects
                WHERE layer IN (SELECT unnest($layers)) AND status = 'active' AND ($run IS NULL OR run_id = $run)
            ), cited AS (  -- unnest in the select list: a lateral unnest took over 1 GB here
                SELECT id AS owner,
                       unnest(coalesce(from_json(json_extract(data, '$.statements[*].object_id'), '["VARCHAR"]'), [])
                              || coalesce(from_json(json_extract(data, '$.events[*].object_id'), '["VARCHAR"]'), [])
                              || coalesce(from_json(json_extract(data, '$.items[*].object_id'), '["VARCHAR"]'), [])
                              || coalesce(flatten(from_json(json_extract(data, '$.steps[*].cites'),
                                                            '[["VARCHAR"]]')), [])) AS ref
                FROM checked
                UNION ALL
                SELECT id, 'source ' || unnest(
                           coalesce(from_json(json_extract(data, '$.statements[*].span.source_id'), '["VARCHAR"]'), [])
                           || coalesce(from_json(json_extract(data, '$.events[*].span.source_id'), '["VARCHAR"]'), []))
                FROM checked
            )
            SELECT owner || ' cites ' || ref FROM cited  -- NOT EXISTS, not NOT IN: NOT IN's plan ran out
            WHERE ref IS NOT NULL AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.id = ref)  -- of a 256 MB
              AND NOT EXISTS (SELECT 1 FROM sources s WHERE 'source ' || s.id = ref)  -- limit at 3,000 documents
            LIMIT $limit
            """, {"layers": list(layers), "run": run_id, "limit": limit})
    return [r[0] for r in rows]


def thinly_derived(bank: Bank, limit: int = 50) -> list[str]:
    """Active layer-4 objects that derive from fewer than two objects: a synthesis or abstraction must
    rest on at least two things a reader can check."""
    with bank.reading() as db:
        rows = db.sql("SELECT id || ' derives from ' || len(derived_from) || ' id(s)' FROM objects "
                      "WHERE layer = 4 AND status = 'active' AND len(derived_from) < 2 ORDER BY id LIMIT ?", [limit])
    return [r[0] for r in rows]


def dispute_flag_mismatches(bank: Bank, limit: int = 50) -> list[str]:
    """Objects whose `disputed_by` differs from what the open contradictions imply."""
    from smb_core.evolve.confidence import dispute_map, flagged_now

    wanted, current = dispute_map(bank), flagged_now(bank)
    wrong = sorted(i for i in wanted.keys() | current.keys() if wanted.get(i, []) != current.get(i, []))
    return [f"{i}: flagged by {current.get(i, [])}, open contradictions imply {wanted.get(i, [])}" for i in wrong[:limit]]
