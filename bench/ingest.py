"""Ingest throughput: layers 0-1 through the Dagster pipeline vs a plain embed-and-store baseline.

Converts ../shared/eval/2wiki/corpus.json (6,119 passages) to markdown files, ingests them with
`smb_pipeline.runner.run_ingest` (what `smb ingest` does), and in the same run times a baseline that
only embeds the same passages with the same embedder and adds them to a Chroma collection.
Each side runs in its own child process so that peak RSS is measured per side.

    python bench/ingest.py [--limit N]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import in_child, load_2wiki, write_corpus  # noqa: E402


def _ours(corpus_dir: str, bank_dir: str) -> dict:
    from smb_core.bank import Bank
    from smb_core.settings import Settings
    from smb_pipeline.runner import run_ingest

    settings = Settings(memory_bank_dir=Path(bank_dir), kbmd_dir=Path(corpus_dir))
    started = time.perf_counter()
    report = run_ingest(settings)
    seconds = time.perf_counter() - started
    status = Bank(settings=settings).status()
    return {"seconds": seconds, "ok": report.success, "objects": sum(status["types"].values()),
            "documents": status["documents"], "consistent": status["consistent"],
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _baseline(texts: list[str], chroma_dir: str) -> dict:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    from smb_core.embed import MiniLMEmbedder
    from smb_core.stores.vectors import HNSW

    started = time.perf_counter()
    vectors = MiniLMEmbedder().embed(texts)
    client = chromadb.PersistentClient(path=chroma_dir, settings=ChromaSettings(anonymized_telemetry=False))
    collection = client.get_or_create_collection("baseline", embedding_function=None, configuration={"hnsw": HNSW})
    for start in range(0, len(texts), 4000):
        collection.add(ids=[str(i) for i in range(start, min(start + 4000, len(texts)))],
                       embeddings=vectors[start : start + 4000])
    return {"seconds": time.perf_counter() - started,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=0, help="only the first N passages")
    args = parser.parse_args()
    passages, _ = load_2wiki()
    if args.limit:
        passages = passages[: args.limit]
    work = Path(tempfile.mkdtemp(prefix="smb-ingest-bench-"))
    write_corpus(passages, work / "kbmd")
    texts = [f"{p['title']}\n\n{p['text']}" for p in passages]
    baseline = in_child(_baseline, texts, str(work / "baseline-chroma"))
    ours = in_child(_ours, str(work / "kbmd"), str(work / "bank"))
    n = len(passages)
    print(f"\ningest of {n} 2wiki passages (layers 0-1, embedded MiniLM, no LLM)")
    print(f"{'':<28} {'seconds':>8} {'docs/s':>8} {'objects/s':>10} {'peak RSS MB':>12}")
    print(f"{'ours (Dagster, 4 stores)':<28} {ours['seconds']:>8.1f} {n / ours['seconds']:>8.1f} "
          f"{ours['objects'] / ours['seconds']:>10.1f} {ours['rss_mb']:>12.0f}")
    print(f"{'baseline (embed + Chroma)':<28} {baseline['seconds']:>8.1f} {n / baseline['seconds']:>8.1f} "
          f"{n / baseline['seconds']:>10.1f} {baseline['rss_mb']:>12.0f}")
    print(f"ratio ours/baseline: {ours['seconds'] / baseline['seconds']:.2f} (target <= 3.0); "
          f"objects: {ours['objects']}; consistent: {ours['consistent']}; run ok: {ours['ok']}")
    print(json.dumps({"ratio": round(ours["seconds"] / baseline["seconds"], 3), "ours": ours, "baseline": baseline}))


if __name__ == "__main__":
    main()
