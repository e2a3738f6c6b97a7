"""Evolution cycle cost: a full first cycle over a large bank, then an incremental cycle after new
documents, at two bank sizes, with peak RSS.

The bank is built from ../shared/eval/2wiki/corpus.json, about 25 memory objects per passage: the
default 4,000 passages make the issue's bank of about 100,000 objects, and 2,000 the half-size bank
that shows whether an increment's cost grows with the bank (`--sizes 3000,6119`, the default before,
still runs; 6,119 is the whole corpus, about 152,000 objects). The increment is the corpus's last
passages, held back from the first build at every size (about 1,000 new objects), so that the two
sizes' incremental cycles have the same new documents to digest.
Each cycle runs in a fresh process, as `smb evolve` and the Dagster daemon's runs do. The incremental
cycle is timed several times from a snapshot of each bank, the sizes taking turns (a machine's speed
drifts within the hour: timing one size after the other put the drift into the comparison), and the
medians and their ratio between sizes reported. Prints the seconds each layer took in both cycles and
the peak RSS of the largest cycle process.

    python bench/evolve.py [--sizes 2000,4000] [--increment 40] [--repeat 3] [--bank-root DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import in_child, load_2wiki, write_corpus  # noqa: E402

from smb_core.bank import Bank  # noqa: E402
from smb_core.settings import Settings  # noqa: E402


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ingest(settings: Settings) -> dict:
    from smb_pipeline.runner import run_ingest

    assert run_ingest(settings).success
    return {"objects": _object_count(settings)}


def _cycle(settings: Settings) -> dict:
    """One cycle as `smb evolve` runs it; in its own process, so its peak RSS is its own."""
    from smb_pipeline.runner import run_evolve

    started, wall = time.perf_counter(), time.time()
    _, report = run_evolve(settings)
    seconds = time.perf_counter() - started
    assert report.success, report.failures
    return {"seconds": seconds, "layers": _layer_seconds(settings, report.run_ids[0]), "rss_mb": _rss_mb(),
            "rewritten": _files_written_since(settings.memory_bank_dir, wall)}


def _files_written_since(bank_dir: Path, since: float) -> int:
    """Markdown files the cycle wrote (new or rewritten): what an incremental cycle's cost should follow."""
    from smb_core.stores.markdown import MarkdownStore

    return sum(1 for path in MarkdownStore(bank_dir).iter_paths() if path.stat().st_mtime >= since)


def build(size: int, increment: int, root: Path, reuse: bool = False) -> dict:
    """The bank of `size` documents less the increment, its full first cycle, then the increment ingested
    and the bank kept as a snapshot for the timed incremental cycles."""
    passages, _ = load_2wiki()
    # the same held-back passages at every size: the incremental cycles get the same new work to do
    base, extra = passages[: size - increment], passages[len(passages) - increment :]
    settings = _settings(root, size)
    if not (reuse and (settings.memory_bank_dir / "metadata.duckdb").exists()):
        write_corpus(base, settings.kbmd_dir)
        in_child(_ingest, settings)
    objects = _object_count(settings)
    full = in_child(_cycle, settings)
    for i, passage in enumerate(extra):  # new documents since the first cycle
        (settings.kbmd_dir / f"new-{i:04d}.md").write_text(f"# {passage['title']}\n\n{passage['text']}\n",
                                                          encoding="utf-8")
    before = _object_count(settings)
    added = in_child(_ingest, settings)["objects"] - before
    snapshot = _snapshot(root, size)
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(settings.memory_bank_dir, snapshot, symlinks=True)
    return {"size": size, "objects": objects, "full_s": full["seconds"], "added_objects": added,
            "rss_mb": full["rss_mb"], "full_layers": full["layers"], "runs": []}


def time_increments(rows: list[dict], root: Path, repeat: int) -> None:
    """The incremental cycle of each bank, `repeat` rounds with the sizes taking turns, each from its
    snapshot (copied back and flushed to disk first); adds the median run to each row."""
    for _ in range(repeat):
        for row in rows:
            settings = _settings(root, row["size"])
            shutil.rmtree(settings.memory_bank_dir)
            shutil.copytree(_snapshot(root, row["size"]), settings.memory_bank_dir, symlinks=True)
            os.sync()  # the copy's writeback would otherwise land inside the timed cycle
            row["runs"].append(in_child(_cycle, settings))
    for row in rows:
        shutil.rmtree(_snapshot(root, row["size"]))
        median = sorted(row["runs"], key=lambda r: r["seconds"])[len(row["runs"]) // 2]
        row.update(incremental_s=median["seconds"], incremental_runs=[round(r["seconds"], 1) for r in row["runs"]],
                   incremental_rewritten=median["rewritten"], incremental_layers=median["layers"],
                   rss_mb=max(row["rss_mb"], *(r["rss_mb"] for r in row["runs"])))


def _settings(root: Path, size: int) -> Settings:
    return Settings(memory_bank_dir=root / f"bank-{size}", kbmd_dir=root / f"kbmd-{size}")


def _snapshot(root: Path, size: int) -> Path:
    return root / f"bank-{size}-before-incremental"


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
    parser.add_argument("--sizes", default="2000,4000", help="documents per bank, comma-separated")
    parser.add_argument("--increment", type=int, default=40, help="documents added before the incremental cycle")
    parser.add_argument("--bank-root", type=Path, help="where to build the banks (default: a temporary folder)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of incremental cycles, the sizes taking turns (medians reported)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse banks already ingested under --bank-root (an unfinished cycle is run again)")
    args = parser.parse_args()
    root = args.bank_root or Path(tempfile.mkdtemp(prefix="smb-evolve-bench-"))
    rows = []
    for size in args.sizes.split(","):
        rows.append(build(int(size), args.increment, root, args.reuse))
        print(f"built: {rows[-1]}", flush=True)  # a long run shows each full cycle as soon as it is measured
    time_increments(rows, root, args.repeat)
    print(f"\n{'documents':>9} {'objects':>9} {'full cycle s':>13} {'added objects':>14} {'incremental s':>14} "
          f"{'peak RSS MB':>12}")
    for r in rows:
        print(f"{r['size']:>9} {r['objects']:>9} {r['full_s']:>13.1f} {r['added_objects']:>14} "
              f"{r['incremental_s']:>14.1f} {r['rss_mb']:>12.0f}")
    for r in rows:
        for label in ("full", "incremental"):
            layers = ", ".join(f"{k} {v:.0f}s" for k, v in r[f"{label}_layers"].items())
            print(f"{r['size']} documents, {label} cycle by layer: {layers}")
        print(f"{r['size']} documents, incremental cycles timed: {r['incremental_runs']} s; "
              f"markdown files it wrote: {r['incremental_rewritten']}")
    for smaller, larger in zip(rows, rows[1:]):
        print(f"incremental cycle, {smaller['size']} -> {larger['size']} documents "
              f"({larger['objects'] / smaller['objects']:.2f}x the objects): "
              f"{larger['incremental_s'] / smaller['incremental_s']:.2f}x the time")
    print("targets: full cycle <= 600 s at ~100k objects, incremental <= 60 s and not growing with the bank, "
          "peak RSS <= 4 GB")


if __name__ == "__main__":
    main()
