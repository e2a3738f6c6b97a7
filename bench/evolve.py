"""Evolution cycle cost: a full first cycle over a large bank, then an incremental cycle after new
documents, at two bank sizes, with peak RSS.

The bank is built from ../shared/eval/2wiki/corpus.json (about 25 memory objects per passage); the
increment is the corpus's last passages, held back from the first build at every size (about 1,000
new objects), so that the two sizes' incremental cycles have the same new documents to digest.
Prints the seconds each layer took in both cycles.

    python bench/evolve.py [--sizes 3000,6119] [--increment 40] [--bank-root DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import load_2wiki, write_corpus  # noqa: E402

from smb_core.bank import Bank  # noqa: E402
from smb_core.settings import Settings  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_size(size: int, increment: int, root: Path, reuse: bool = False) -> dict:
    from smb_pipeline.runner import run_evolve, run_ingest

    passages, _ = load_2wiki()
    # the same held-back passages at every size: the incremental cycles get the same new work to do
    base, extra = passages[: size - increment], passages[len(passages) - increment :]
    corpus = root / f"kbmd-{size}"
    settings = Settings(memory_bank_dir=root / f"bank-{size}", kbmd_dir=corpus)
    if not (reuse and (settings.memory_bank_dir / "metadata.duckdb").exists()):
        write_corpus(base, corpus)
        assert run_ingest(settings).success
    objects = _object_count(settings)
    started = time.perf_counter()
    _, report = run_evolve(settings)
    full = time.perf_counter() - started
    assert report.success, report.failures
    full_layers = _layer_seconds(settings, report.run_ids[0])
    before = _object_count(settings)
    for i, passage in enumerate(extra):  # new documents since the first cycle
        (corpus / f"new-{i:04d}.md").write_text(f"# {passage['title']}\n\n{passage['text']}\n", encoding="utf-8")
    assert run_ingest(settings).success
    added = _object_count(settings) - before
    started = time.perf_counter()
    _, report = run_evolve(settings)
    incremental = time.perf_counter() - started
    assert report.success, report.failures
    return {"size": size, "objects": objects, "full_s": full, "added_objects": added, "incremental_s": incremental,
            "rss_mb": _rss_mb(), "full_layers": full_layers,
            "incremental_layers": _layer_seconds(settings, report.run_ids[0])}


def _object_count(settings: Settings) -> int:
    return sum(Bank(settings=settings).status()["types"].values())


def _layer_seconds(settings: Settings, run_id: str) -> dict[str, float]:
    """Seconds per layer (Dagster step) of a run, from the instance's step statistics."""
    from smb_pipeline.runner import instance_for

    layers = ("semantic", "reflective", "synthetic", "narrative", "executive")
    out = dict.fromkeys((*layers, "asset checks"), 0.0)
    for step in instance_for(settings.memory_bank_dir).get_run_step_stats(run_id):
        out[step.step_key if step.step_key in layers else "asset checks"] += (step.end_time or 0) - (step.start_time or 0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="3000,6119", help="documents per bank, comma-separated")
    parser.add_argument("--increment", type=int, default=40, help="documents added before the incremental cycle")
    parser.add_argument("--bank-root", type=Path, help="where to build the banks (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse banks already ingested under --bank-root (an unfinished cycle is run again)")
    args = parser.parse_args()
    root = args.bank_root or Path(tempfile.mkdtemp(prefix="smb-evolve-bench-"))
    rows = []
    for size in args.sizes.split(","):
        rows.append(run_size(int(size), args.increment, root, args.reuse))
        print(f"done: {rows[-1]}", flush=True)  # a long run shows each size as soon as it is measured
    print(f"\n{'documents':>9} {'objects':>9} {'full cycle s':>13} {'added objects':>14} {'incremental s':>14} "
          f"{'peak RSS MB':>12}")
    for r in rows:
        print(f"{r['size']:>9} {r['objects']:>9} {r['full_s']:>13.1f} {r['added_objects']:>14} "
              f"{r['incremental_s']:>14.1f} {r['rss_mb']:>12.0f}")
    for r in rows:
        for label in ("full", "incremental"):
            layers = ", ".join(f"{k} {v:.0f}s" for k, v in r[f"{label}_layers"].items())
            print(f"{r['size']} documents, {label} cycle by layer: {layers}")
    print("targets: full cycle <= 600 s at ~100k objects, incremental <= 60 s and not growing with the bank, "
          "peak RSS <= 4 GB")


if __name__ == "__main__":
    main()
