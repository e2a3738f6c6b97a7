"""Entity and concept merging without an LLM: precision and recall of one cycle's merge on labelled pairs.

    python bench/merges.py [--show-errors]

bench/data/merge_pairs.jsonl holds pairs of short documents written for this benchmark (fields id, label
same|different, kind, a and b, each with title, text and the name it mentions). Every document goes into
one fresh bank, through ingest and one cycle's merge, as `smb evolve` runs it. A pair counts as merged when
the two names' layer-1 objects end up in one canonical object. Precision is over the pairs merged, recall
over the pairs labelled `same`; pairs whose name the extractor did not pick up are listed, not scored.
Every pair uses its own names, so that pairs do not merge into each other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smb_core.bank import Bank  # noqa: E402
from smb_core.corpus import scan  # noqa: E402
from smb_core.evolve import merge  # noqa: E402
from smb_core.evolve.cycle import new_object_ids, open_cycle  # noqa: E402
from smb_core.extract.base import QUALIFIER, normalise_name  # noqa: E402
from smb_core.ingest import extract_sources, get_extractor, ingest_sources  # noqa: E402
from smb_core.settings import Settings  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "merge_pairs.jsonl"
TARGET_PRECISION, TARGET_RECALL = 0.95, 0.70


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_documents(pairs: list[dict], corpus: Path) -> None:
    for pair in pairs:
        for side in ("a", "b"):
            doc = pair[side]
            (corpus / f"{pair['id']}-{side}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n", encoding="utf-8")


def merged_pairs(bank: Bank, pairs: list[dict]) -> dict[str, bool | None]:
    """{pair id: whether its two names share a canonical object; None if a name was not extracted}."""
    with bank.reading() as db:
        paths = dict(db.sql("SELECT id, path FROM sources"))
        rows = db.sql("SELECT id, title, source_ids, data->>'merged_into' FROM objects "
                      "WHERE type IN ('entity', 'concept')")
    canonical: dict[tuple[str, str], set[str]] = defaultdict(set)  # (document, normalised name) -> canonical ids
    for object_id, title, source_ids, merged_into in rows:
        for source in source_ids:  # "The Long Winter (1954 film)", the title's entity, is The Long Winter
            for name in {normalise_name(title), normalise_name(QUALIFIER.sub("", title))}:
                canonical[(Path(paths[source]).stem, name)].add(merged_into or object_id)
    out: dict[str, bool | None] = {}
    for pair in pairs:
        a = canonical.get((f"{pair['id']}-a", normalise_name(pair["a"]["name"])))
        b = canonical.get((f"{pair['id']}-b", normalise_name(pair["b"]["name"])))
        out[pair["id"]] = None if not a or not b else bool(a & b)
    return out


def scores(pairs: list[dict], merged: dict[str, bool | None]) -> dict:
    scored = [p for p in pairs if merged[p["id"]] is not None]
    tp = sum(1 for p in scored if p["label"] == "same" and merged[p["id"]])
    fp = sum(1 for p in scored if p["label"] == "different" and merged[p["id"]])
    fn = sum(1 for p in scored if p["label"] == "same" and not merged[p["id"]])
    tn = sum(1 for p in scored if p["label"] == "different" and not merged[p["id"]])
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"n": len(scored), "tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": precision, "recall": recall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show-errors", action="store_true", help="print every pair decided wrongly")
    args = parser.parse_args()
    pairs = load()
    with tempfile.TemporaryDirectory(prefix="smb-merges-") as tmp:
        corpus, bank_dir = Path(tmp) / "kbmd", Path(tmp) / "bank"
        corpus.mkdir()
        write_documents(pairs, corpus)
        bank = Bank(settings=Settings(memory_bank_dir=bank_dir, kbmd_dir=corpus))
        start = time.perf_counter()
        outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="bench")
        extract_sources(bank, [o.source_id for o in outcomes if o.source_id], get_extractor(bank.settings), "bench")
        ingested = time.perf_counter()
        cycle = open_cycle(bank, "cycle-00001", "bench")
        merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
        merged = merged_pairs(bank, pairs)
        done = time.perf_counter()
    s = scores(pairs, merged)
    print(f"== merge on labelled pairs ({len(pairs)} pairs, {2 * len(pairs)} documents; ingest "
          f"{ingested - start:.1f} s, merge {done - ingested:.1f} s) ==")
    print(f"overall  n={s['n']:>3}  P={s['precision']:.3f}  R={s['recall']:.3f}  "
          f"(tp={s['tp']} fp={s['fp']} fn={s['fn']} tn={s['tn']})")
    print("\n-- per kind (merged / pairs) --")
    by_kind: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for p in pairs:
        by_kind[(p["label"], p["kind"])][{True: "merged", False: "apart", None: "not extracted"}[merged[p["id"]]]] += 1
    for (label, kind), c in sorted(by_kind.items()):
        total = sum(c.values())
        extra = f", {c['not extracted']} not extracted" if c["not extracted"] else ""
        print(f"  {label:<9} {kind:<22} {c['merged']}/{total} merged{extra}")
    missing = [p["id"] for p in pairs if merged[p["id"]] is None]
    if missing:
        print(f"\nnames not extracted (not scored): {', '.join(missing)}")
    if args.show_errors:
        print("\n-- errors --")
        for p in pairs:
            if merged[p["id"]] is not None and merged[p["id"]] != (p["label"] == "same"):
                print(f"  {p['id']} {p['label']}/{p['kind']}: {p['a']['name']!r} ({p['a']['title']}) vs "
                      f"{p['b']['name']!r} ({p['b']['title']})")
    met = s["precision"] >= TARGET_PRECISION and s["recall"] >= TARGET_RECALL
    print(f"\ntargets: precision >= {TARGET_PRECISION}, recall >= {TARGET_RECALL}: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
