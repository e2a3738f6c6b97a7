"""Retrieval quality on 2WikiMultihopQA (dev subset): lexical only vs vector only vs hybrid `recall`.

Builds a bank from ../shared/eval/2wiki/corpus.json (one markdown document per passage, title as
`# heading`) through the ingest pipeline, then scores the 51 dev questions with each retriever on the
same bank. Prints Recall@2, Recall@5, all-gold-in-top-8 and latency p50/p95 per retriever.

    python bench/recall_2wiki.py [--bank DIR] [--reuse]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load_2wiki, percentile, write_corpus  # noqa: E402

from smb_core.query import MemoryBank  # noqa: E402
from smb_core.settings import Settings  # noqa: E402


def build(bank_dir: Path, corpus_dir: Path) -> float:
    from smb_pipeline.runner import run_ingest

    passages, _ = load_2wiki()
    write_corpus(passages, corpus_dir)
    started = time.perf_counter()
    report = run_ingest(Settings(memory_bank_dir=bank_dir, kbmd_dir=corpus_dir))
    if not report.success:
        raise SystemExit(f"ingest failed: {report.failures}")
    return time.perf_counter() - started


def score(ranked_titles: list[str], gold: list[str]) -> tuple[float, float, bool]:
    gold_set = {g.lower() for g in gold}
    def at(k: int) -> float:
        return len(gold_set & {t.lower() for t in ranked_titles[:k]}) / len(gold_set)
    return at(2), at(5), at(8) == 1.0


def evaluate(name: str, retrieve, questions: list[dict]) -> dict:
    r2 = r5 = all8 = 0.0
    latencies = []
    misses = []
    for q in questions:
        started = time.perf_counter()
        titles = retrieve(q["question"])
        latencies.append((time.perf_counter() - started) * 1000)
        a, b, c = score(titles, q["gold_titles"])
        r2, r5, all8 = r2 + a, r5 + b, all8 + c
        if b < 1:
            misses.append((q["question"], q["gold_titles"], titles[:5]))
    n = len(questions)
    return {"name": name, "R@2": r2 / n, "R@5": r5 / n, "all@8": all8 / n,
            "p50": percentile(latencies, 50), "p95": percentile(latencies, 95), "misses": misses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bank", type=Path, help="bank folder (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true", help="reuse an already built --bank")
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="smb-2wiki-"))
    bank_dir = args.bank or workdir / "bank"
    if not (args.reuse and (bank_dir / "metadata.duckdb").exists()):
        seconds = build(bank_dir, workdir / "kbmd")
        print(f"built bank from 6,119 passages in {seconds:.0f}s at {bank_dir}")
    _, questions = load_2wiki()
    bank = MemoryBank.open(bank_dir)
    engine = bank._engine
    bank.recall_documents("warm up the embedder and caches")

    with bank._bank.reading() as db:
        title_by_id = {d.id: d.title for d in db.sources()}

    def lexical(question: str) -> list[str]:
        with bank._bank.reading() as db:
            return [title_by_id[i] for i, _ in engine.lexical_documents(db, question, 8)]

    def vector(question: str) -> list[str]:
        with bank._bank.reading() as db:
            return [title_by_id[i] for i, _ in engine.vector_documents(db, question, 8)]

    def hybrid(question: str) -> list[str]:
        return [hit.title for hit in bank.recall_documents(question, k=8)]

    results = [evaluate("lexical (BM25)", lexical, questions), evaluate("vector (MiniLM)", vector, questions),
               evaluate("recall (hybrid)", hybrid, questions)]
    print(f"\n2WikiMultihopQA dev, {len(questions)} questions, 6,119 passages, no LLM")
    print(f"{'retriever':<18} {'R@2':>6} {'R@5':>6} {'all@8':>6} {'p50 ms':>8} {'p95 ms':>8}")
    for r in results:
        print(f"{r['name']:<18} {r['R@2']:>6.3f} {r['R@5']:>6.3f} {r['all@8']:>6.3f} {r['p50']:>8.1f} {r['p95']:>8.1f}")
    print("targets for recall: R@5 >= 0.95, R@2 >= 0.85, p95 <= 150 ms")
    if args.show_misses:
        for question, gold, got in results[-1]["misses"]:
            print(f"- {question}\n    gold: {gold}\n    got:  {got}")


if __name__ == "__main__":
    main()
