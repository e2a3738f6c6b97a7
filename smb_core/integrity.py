"""Integrity checks over the stores, used by the Dagster asset checks and `smb status`."""

from __future__ import annotations

import hashlib

from smb_core.bank import Bank
from smb_core.model import ModelError, SourceDocument, from_markdown


def layer0_hash_mismatches(bank: Bank) -> list[str]:
    """Layer-0 copies whose bytes no longer match the sha256 recorded when they were ingested."""
    with bank.reading() as db:
        sources = db.sources()
    problems = []
    for doc in sources:
        path = bank.root / doc.file_path()
        try:
            body = bank.markdown.read(doc.file_path()).body
        except FileNotFoundError:
            problems.append(f"{doc.path} v{doc.version}: layer-0 copy {path} is missing")
            continue
        if hashlib.sha256(body.encode("utf-8")).hexdigest() != doc.sha256:
            problems.append(f"{doc.path} v{doc.version}: {path} does not match sha256 {doc.sha256[:12]}")
    return problems


def front_matter_errors(bank: Bank, object_ids: list[str]) -> list[str]:
    """Object files whose front matter does not parse or validate against the model, or has another id."""
    with bank.reading() as db:
        rows = db.sql("SELECT id, file_path FROM objects WHERE id IN (SELECT unnest(?))", [object_ids])
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
            ids = [r[0] for r in db.sql("SELECT id FROM objects WHERE layer = ? USING SAMPLE reservoir(? ROWS)",
                                        [layer, sample])]
    return ids
