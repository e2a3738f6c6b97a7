"""Contradiction detection without an LLM: precision/recall of `judge` on labelled pairs, and the rate
of reported contradictions on a bank built from mutually consistent documents.

    python bench/contradictions.py [--show-errors] [--bank /tmp/wiki-bank] [--limit N] [--k 20]

Part 1 reads bench/data/contradiction_pairs.jsonl (fields id, a, b, label contradiction|compatible, kind,
note) and prints precision, recall and F1 overall, per gold kind, per predicted kind, the confusion, and
the same numbers on the odd and even ids separately (develop on one half, check on the other).
Part 2 (`--bank DIR`) opens an existing bank read-only, runs `find_contradictions` over its claims and
prints contradictions per 1,000 documents with a few examples; it never writes to the bank.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smb_core.evolve.contradictions import judge  # noqa: E402
from smb_core.evolve.contradictions.sentences import _analyse_many  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "contradiction_pairs.jsonl"
TARGET_PRECISION, TARGET_RECALL = 0.90, 0.70


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def scores(rows: list[dict]) -> dict:
    tp = sum(1 for r in rows if r["label"] == "contradiction" and r["verdict"] is not None)
    fp = sum(1 for r in rows if r["label"] != "contradiction" and r["verdict"] is not None)
    fn = sum(1 for r in rows if r["label"] == "contradiction" and r["verdict"] is None)
    tn = sum(1 for r in rows if r["label"] != "contradiction" and r["verdict"] is None)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": precision, "recall": recall, "f1": f1,
            "n": len(rows)}


def fmt(name: str, s: dict) -> str:
    return (f"{name:<24} n={s['n']:>3}  P={s['precision']:.3f}  R={s['recall']:.3f}  F1={s['f1']:.3f}  "
            f"(tp={s['tp']} fp={s['fp']} fn={s['fn']} tn={s['tn']})")


def run_pairs(show_errors: bool) -> dict:
    rows = load()
    judge("Warm-up was founded in 2001.", "Warm-up was founded in 2002.")  # load the spaCy model
    start = time.perf_counter()
    for r in rows:  # cold: every sentence is parsed on first sight
        judge(r["a"], r["b"])
    cold_ms = (time.perf_counter() - start) / len(rows) * 1000
    _analyse_many(t for r in rows for t in (r["a"], r["b"]))
    start = time.perf_counter()
    for r in rows:  # warm: parses cached, as when one claim meets many candidates
        r["verdict"] = judge(r["a"], r["b"])
    per_pair_ms = (time.perf_counter() - start) / len(rows) * 1000
    overall = scores(rows)
    print("== judge on labelled pairs ==")
    print(fmt("overall", overall))
    odd = [r for r in rows if int(r["id"].lstrip("p")) % 2 == 1]
    even = [r for r in rows if int(r["id"].lstrip("p")) % 2 == 0]
    print(fmt("odd ids", scores(odd)))
    print(fmt("even ids", scores(even)))
    print("\n-- per gold kind (recall for contradiction kinds; false alarms for compatible kinds) --")
    by_kind = defaultdict(list)
    for r in rows:
        by_kind[(r["label"], r["kind"])].append(r)
    for (label, kind), group in sorted(by_kind.items()):
        flagged = sum(1 for r in group if r["verdict"] is not None)
        what = "found" if label == "contradiction" else "flagged (false positives)"
        print(f"  {label:<13} {kind:<22} {flagged:>2}/{len(group):<2} {what}")
    print("\n-- per predicted kind (precision) --")
    pred = defaultdict(list)
    for r in rows:
        if r["verdict"] is not None:
            pred[r["verdict"].kind].append(r)
    for kind, group in sorted(pred.items()):
        correct = sum(1 for r in group if r["label"] == "contradiction")
        same = sum(1 for r in group if r["label"] == "contradiction" and r["kind"] == kind)
        print(f"  {kind:<22} {correct}/{len(group)} correct  ({same} with the gold kind)")
    print("\n-- confusion (rows: gold, columns: predicted) --")
    confusion = Counter(("contradiction" if r["label"] == "contradiction" else "compatible",
                         "contradiction" if r["verdict"] is not None else "compatible") for r in rows)
    print(f"  {'':<15}{'pred contra':>12}{'pred compat':>12}")
    for gold in ("contradiction", "compatible"):
        print(f"  {gold:<15}{confusion[(gold, 'contradiction')]:>12}{confusion[(gold, 'compatible')]:>12}")
    print(f"\nruntime: {cold_ms:.2f} ms per pair with parsing (one at a time), {per_pair_ms:.2f} ms with parses cached")
    ok = overall["precision"] >= TARGET_PRECISION and overall["recall"] >= TARGET_RECALL
    print(f"targets P>={TARGET_PRECISION} R>={TARGET_RECALL}: {'met' if ok else 'NOT met'}")
    if show_errors:
        print("\n-- false positives --")
        for r in rows:
            if r["label"] != "contradiction" and r["verdict"] is not None:
                print(f"  {r['id']} [{r['kind']}] {r['a']} || {r['b']}\n      -> {r['verdict']}")
        print("\n-- false negatives --")
        for r in rows:
            if r["label"] == "contradiction" and r["verdict"] is None:
                print(f"  {r['id']} [{r['kind']}] {r['a']} || {r['b']}")
    return overall


def run_bank(path: Path, limit: int | None, k: int, examples: int) -> None:
    from smb_core.bank import Bank
    from smb_core.evolve.contradictions import find_contradictions

    bank = Bank(path)
    with bank.reading() as db:
        sql = "SELECT id FROM objects WHERE type = 'claim' AND status = 'active' ORDER BY id"
        claim_ids = [r[0] for r in db.sql(sql)]
        if limit:
            claim_ids = claim_ids[:limit]
        # documents whose claims were scanned (a bank still being built has unextracted documents)
        documents = db.sql("SELECT count(DISTINCT s) FROM (SELECT unnest(source_ids) AS s FROM objects "
                           "WHERE id IN (SELECT unnest(?)))", [claim_ids])[0][0]
    print(f"\n== find_contradictions on {path} ({documents} documents with claims, {len(claim_ids)} claims, "
          f"k={k}) ==")
    start = time.perf_counter()
    result = find_contradictions(bank, claim_ids, run_id="bench", k=k)
    found, judged = result.contradictions, result.pairs_judged
    elapsed = time.perf_counter() - start
    per_1000 = len(found) / documents * 1000 if documents else 0.0
    print(f"pairs judged: {judged}, contradictions: {len(found)}, per 1,000 documents: {per_1000:.2f}, "
          f"time {elapsed:.1f}s ({elapsed / max(len(claim_ids), 1) * 1000:.1f} ms per claim)")
    kinds = Counter(c.tags[0] for c in found)
    print("by kind:", dict(kinds))
    for c in found[:examples]:
        print(f"  - [{c.tags[0]}] {c.description}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show-errors", action="store_true", help="print false positives and negatives")
    parser.add_argument("--bank", type=Path, help="an existing bank to scan (opened read-only)")
    parser.add_argument("--limit", type=int, default=None, help="scan only the first N claims of the bank")
    parser.add_argument("--k", type=int, default=20, help="nearest neighbours per claim")
    parser.add_argument("--examples", type=int, default=10)
    args = parser.parse_args()
    run_pairs(args.show_errors)
    if args.bank:
        run_bank(args.bank, args.limit, args.k, args.examples)


if __name__ == "__main__":
    main()
