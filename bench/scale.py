"""Scale: ingest, evolution, recall latency, memory, disk and sensor cost as the corpus grows.

For each size N a corpus of N markdown documents is built: the first N passages of
../shared/eval/2wiki/corpus.json when N < 6,119, else all 6,119 passages plus N-6,119 generated
documents (bench/generate.py: seeded, fictional people, organisations, places, products and
events that mention each other; same N -> same files), shuffled so every tenth has the same mix.
Then, on a fresh bank, in a child process per size (so peak RSS is per size):

- ingest through the Dagster pipeline in 10 equal slices: write slice i's files, then ingest
  (`--ingest-mode run_ingest`, the default, calls `smb_pipeline.runner.run_ingest` as `smb ingest`
  does; `sensor` evaluates `kbmd_sensor` and runs exactly the runs it requests, as the daemon does);
  documents/s, memory objects/s, and the throughput of the first and the last tenth;
- one evolution cycle (`run_evolve`), timed;
- recall latency p50/p95 of `MemoryBank.recall_documents(q, k=8)` over 200 fixed queries (the 51
  2wiki dev questions, 49 rephrasings of them, 100 questions about generated entities), after one
  warm-up call, and of `MemoryBank.recall(q, k=10)` (objects, as agents recall) over the same
  queries; 2wiki dev Recall@5 (sizes >= 6,119) and Recall@5 of the generated questions;
- peak RSS (self and children), disk bytes per document (du of the bank folder / N), and the time of
  one `kbmd_sensor` tick against the bank's Dagster instance when nothing is new.

    python bench/scale.py [--sizes 1000,10000,50000] [--root DIR [--reuse]] [--ingest-mode sensor]
    python bench/scale.py --sizes 200              # a quick run
    python bench/scale.py --sizes 1000,6119,10000,50000   # with the 6,119-passage R@5 reference

With --reuse, a size whose bank exists under --root keeps its ingest and evolution figures (from
result-N.json) and is measured again (recall, sensor, disk) without ingesting. A run that stopped
part-way (50,000 documents take many hours here) goes on from where it stopped: each finished slice
and the cycle are recorded in progress-N.json as they finish, and `--reuse` skips them. A slice or
cycle that an earlier run had started is done again and marked resumed (its seconds then cover only
what was left of it, so a resumed first or last slice gives no tenth's throughput); peak RSS, sampled
into the record every 10 s, is the largest of every run's. Every sample is also logged with its time
(rss-N.log under --root), to tell which slice or layer of the cycle held the memory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import current_rss_mb, in_child, load_2wiki, peak_rss_mb, percentile, slug  # noqa: E402
from generate import generate_document, generated_questions  # noqa: E402

from smb_core.fsutil import atomic_write_text  # noqa: E402

SEED = 0
SLICES = 10
PASSAGES = 6119
QUERIES_2WIKI = 100
QUERIES_GENERATED = 100


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- corpus ------------------------------------------------------------------------------------

def corpus_plan(n: int, passages_available: int, seed: int = SEED) -> list[tuple[str, int]]:
    """The documents of a size-n corpus in ingest order: ("wiki", passage index) or ("gen", index)."""
    if n <= passages_available:
        return [("wiki", i) for i in range(n)]
    items = [("wiki", i) for i in range(passages_available)] + [("gen", j) for j in range(n - passages_available)]
    random.Random(f"{seed}/order/{n}").shuffle(items)
    return items


def write_item(item: tuple[str, int], passages: list[dict], folder: Path, seed: int = SEED) -> int:
    """Write one corpus file; returns its size in bytes."""
    kind, index = item
    if kind == "wiki":
        passage = passages[index]
        relative, text = f"{slug(passage['title'], index)}.md", f"# {passage['title']}\n\n{passage['text']}\n"
    else:
        doc = generate_document(index, seed)
        relative, text = doc.relative, doc.text
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(data)
    return len(data)


def slice_bounds(n: int, slices: int = SLICES) -> list[int]:
    return [round(k * n / slices) for k in range(slices + 1)]


# ---- queries -----------------------------------------------------------------------------------

_PREFIXES = ("Tell me: ", "I would like to know: ", "Quick question - ", "Can you find out: ")


def query_set(wiki_questions: list[dict], seed: int = SEED) -> list[dict]:
    """200 fixed queries: the 2wiki dev questions, rephrasings of them up to 100, then 100 generated."""
    queries = [dict(q, source="2wiki") for q in wiki_questions[:QUERIES_2WIKI]]
    i = 0
    while len(queries) < QUERIES_2WIKI:
        base = wiki_questions[i % len(wiki_questions)]
        prefix = _PREFIXES[(i // len(wiki_questions)) % len(_PREFIXES)]
        text = base["question"].rstrip("?")
        queries.append(dict(base, question=prefix + text[:1].lower() + text[1:] + "?", source="2wiki-variant"))
        i += 1
    queries += [dict(q, source="generated") for q in generated_questions(QUERIES_GENERATED, seed)]
    return queries


# ---- measurements ------------------------------------------------------------------------------

def du_bytes(folder: Path) -> int:
    """Disk usage of a folder like `du -s` (allocated blocks, symlinks not followed)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _resource(settings):
    from smb_pipeline.defs.resources import MemoryBankResource

    return MemoryBankResource(bank_dir=str(Path(settings.memory_bank_dir).resolve()),
                              kbmd_dir=str(Path(settings.kbmd_dir).resolve()))


def sensor_tick(settings, instance, cursor: str | None):
    """One evaluation of `kbmd_sensor`: (seconds, SensorResult, new cursor)."""
    import dagster as dg

    from smb_pipeline.defs.ingest.sensors import kbmd_sensor

    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"bank": _resource(settings)})
    started = time.perf_counter()
    result = kbmd_sensor(context)
    return time.perf_counter() - started, result, context.cursor


def ingest_by_sensor(settings, instance, cursor: str | None) -> str | None:
    """What the daemon does: a sensor tick, its new partitions, then each requested run in-process."""
    from smb_pipeline.definitions import defs
    from smb_pipeline.runner import (_failure_messages, _run_config, process_tags, release_dead_runs,
                                     use_compact_planned_events)

    use_compact_planned_events()
    release_dead_runs(instance)  # a stopped earlier run of this bench would hold the bank's pool slot
    _, result, cursor = sensor_tick(settings, instance, cursor)
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    job = defs().resolve_job_def("ingest")
    for request in result.run_requests or []:
        run = job.execute_in_process(instance=instance, run_config=_run_config(settings, "WARNING"),
                                     tags=request.tags | process_tags(), raise_on_error=False)
        if not run.success:
            raise RuntimeError(f"ingest run failed: {_failure_messages(run)}")
    return cursor


def load_progress(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"slices": []}


def save_progress(path: Path, progress: dict) -> None:
    """Atomically, so that a run killed while saving leaves the previous record."""
    atomic_write_text(path, json.dumps(progress, indent=1))


def record_peak_rss(path: Path, every_s: float = 10.0) -> threading.Event:
    """Keep the largest peak RSS of this and earlier runs in `path`, every `every_s`: a run stopped
    inside a slice or the cycle (killed for memory, say) would otherwise take its peak with it.
    Each sample's time and current RSS are also appended to `path` with `.log` for a suffix, to be
    read beside the Dagster run's step times: which layer of a cycle held the memory."""
    stop = threading.Event()
    timeline = path.with_suffix(".log")

    def sample() -> None:
        while True:
            earlier = json.loads(path.read_text())["rss_mb"] if path.exists() else 0.0
            atomic_write_text(path, json.dumps({"rss_mb": max(earlier, peak_rss_mb())}))
            with timeline.open("a") as out:
                out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {current_rss_mb():.0f}\n")
            if stop.wait(every_s):
                return

    threading.Thread(target=sample, name="peak-rss", daemon=True).start()
    return stop


def build(size: int, settings, passages: list[dict], mode: str, progress_path: Path) -> dict:
    """Write the corpus in 10 slices, ingesting after each; then one evolution cycle. What is already
    recorded in `progress_path` (by an earlier run of this size that stopped) is not done again."""
    Path(settings.kbmd_dir).mkdir(parents=True, exist_ok=True)
    progress = load_progress(progress_path)
    if progress.setdefault("mode", mode) != mode:
        raise SystemExit(f"{progress_path}: the stopped run ingested with --ingest-mode {progress['mode']}")
    rss_path = progress_path.with_name(f"rss-{size}.json")
    sampling = record_peak_rss(rss_path)
    try:
        return _build(size, settings, passages, mode, progress_path, progress, rss_path)
    finally:
        sampling.set()


def _build(size: int, settings, passages: list[dict], mode: str, progress_path: Path, progress: dict,
           rss_path: Path) -> dict:
    from smb_core.bank import Bank
    from smb_pipeline.runner import instance_for, run_evolve, run_ingest

    corpus = Path(settings.kbmd_dir)
    plan = corpus_plan(size, len(passages))
    bounds = slice_bounds(size)
    instance = instance_for(settings.memory_bank_dir)
    done = {s["slice"] for s in progress["slices"]}
    for k in range(SLICES):
        items = plan[bounds[k]:bounds[k + 1]]
        if not items or k in done:
            continue
        written = sum(write_item(item, passages, corpus) for item in items)
        resumed = progress.get("started") == k  # a run stopped inside this slice: part of it is ingested
        progress["started"] = k
        save_progress(progress_path, progress)
        started = time.perf_counter()
        if mode == "sensor":
            progress["cursor"] = ingest_by_sensor(settings, instance, progress.get("cursor"))
        else:
            report = run_ingest(settings, instance=instance)
            if not report.success:
                raise RuntimeError(f"ingest failed: {report.failures[:5]}")
        seconds = time.perf_counter() - started
        progress["slices"].append({"slice": k, "documents": len(items), "bytes": written, "seconds": seconds,
                                   "resumed": resumed})
        save_progress(progress_path, progress)
        log(f"N={size} slice {k + 1}/{SLICES}: {len(items)} documents in {seconds:.1f}s "
            f"({len(items) / seconds:.1f} docs/s){' (resumed)' if resumed else ''}")
    slices = sorted(progress["slices"], key=lambda s: s["slice"])
    ingest_seconds = sum(s["seconds"] for s in slices)
    status = Bank(settings=settings).status()
    objects = sum(status["types"].values())
    log(f"N={size} ingested {status['documents']} documents, {objects} objects in {ingest_seconds:.0f}s; "
        f"consistent: {status['consistent']}")
    cycle = progress.get("cycle")
    if cycle is None:
        resumed = progress.get("started") == "cycle"
        progress["started"] = "cycle"
        save_progress(progress_path, progress)
        started = time.perf_counter()
        key, report = run_evolve(settings, instance=instance)
        cycle = {"key": key, "seconds": time.perf_counter() - started, "ok": report.success,
                 "failures": report.failures[:5], "resumed": resumed}
        if report.success:  # a failed cycle is reported, and tried again by the next --reuse
            progress["cycle"] = cycle
            save_progress(progress_path, progress)
    log(f"N={size} evolution cycle {cycle['key']} in {cycle['seconds']:.1f}s, ok: {cycle['ok']}"
        f"{' (resumed)' if cycle['resumed'] else ''}")
    first, last = slices[0], slices[-1]
    rss = max(json.loads(rss_path.read_text())["rss_mb"] if rss_path.exists() else 0.0, peak_rss_mb())
    return {
        "size": size, "mode": mode, "documents": status["documents"], "objects": objects,
        "types": status["types"], "consistent": status["consistent"], "ingest_s": ingest_seconds,
        "docs_per_s": size / ingest_seconds, "objects_per_s": objects / ingest_seconds,
        # a resumed slice's seconds cover only what was left of it: no throughput from it
        "first_tenth_docs_per_s": None if first["resumed"] else first["documents"] / first["seconds"],
        "last_tenth_docs_per_s": None if last["resumed"] else last["documents"] / last["seconds"],
        "first_tenth_kb_per_s": None if first["resumed"] else first["bytes"] / 1024 / first["seconds"],
        "last_tenth_kb_per_s": None if last["resumed"] else last["bytes"] / 1024 / last["seconds"],
        "resumed": [s["slice"] + 1 for s in slices if s.get("resumed")] + (["cycle"] if cycle["resumed"] else []),
        "slices": slices, "evolve_s": cycle["seconds"], "evolve_ok": cycle["ok"],
        "evolve_failures": cycle["failures"], "build_rss_mb": rss,
    }


def measure(size: int, settings, questions: list[dict]) -> dict:
    """Recall latency and quality, sensor tick, disk."""
    from smb_core.corpus import scan
    from smb_core.query import MemoryBank
    from smb_pipeline.runner import instance_for

    from recall_2wiki import score

    bank = MemoryBank.open(settings.memory_bank_dir)
    bank.recall_documents("warm up the embedder and caches", k=8)
    latencies, r5 = [], {"2wiki": [], "generated": []}
    for q in query_set(questions):
        started = time.perf_counter()
        hits = bank.recall_documents(q["question"], k=8)
        latencies.append((time.perf_counter() - started) * 1000)
        if q["source"] in r5:
            r5[q["source"]].append(score([h.title for h in hits], q["gold_titles"])[1])
    bank.recall("warm up the object recall", k=10)
    object_latencies = []
    for q in query_set(questions):  # what an agent's `recall` pays: objects, the graph hop, sources
        started = time.perf_counter()
        bank.recall(q["question"], k=10)
        object_latencies.append((time.perf_counter() - started) * 1000)
    instance = instance_for(settings.memory_bank_dir)
    files = scan(Path(settings.kbmd_dir))
    cursor = json.dumps({"changed_ns": max((f.changed_ns for f in files), default=0)})
    sensor_tick(settings, instance, cursor)  # warm-up (imports, instance storage)
    tick_s, result, _ = sensor_tick(settings, instance, cursor)
    bank_bytes = du_bytes(Path(settings.memory_bank_dir))
    return {
        "queries": len(latencies), "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95),
        "objects_p50_ms": percentile(object_latencies, 50), "objects_p95_ms": percentile(object_latencies, 95),
        "r5_2wiki": sum(r5["2wiki"]) / len(r5["2wiki"]) if size >= PASSAGES else None,
        "r5_generated": (sum(r5["generated"]) / len(r5["generated"])
                         if size >= PASSAGES + QUERIES_GENERATED else None),
        "sensor_tick_s": tick_s, "sensor_run_requests": len(result.run_requests or []),
        "bank_bytes": bank_bytes, "disk_bytes_per_doc": bank_bytes / size,
    }


def finished_result(saved: Path) -> dict | None:
    """The recorded result of a size whose cycle succeeded. One whose cycle failed (a writer timed out, say)
    is not reused: the run goes on from its progress record, which has no cycle, and runs it again."""
    row = json.loads(saved.read_text()) if saved.exists() else None
    return row if row and row.get("evolve_ok", True) else None


def run_size(size: int, root: str, reuse: bool, mode: str) -> dict:
    try:
        from smb_core.settings import Settings

        root_dir = Path(root)
        settings = Settings(memory_bank_dir=root_dir / f"bank-{size}", kbmd_dir=root_dir / f"kbmd-{size}")
        saved, progress = root_dir / f"result-{size}.json", root_dir / f"progress-{size}.json"
        passages, questions = load_2wiki()
        if size > PASSAGES:
            assert len(passages) == PASSAGES, len(passages)
        exists = (Path(settings.memory_bank_dir) / "metadata.duckdb").exists()
        if reuse and exists and (row := finished_result(saved)):
            log(f"N={size}: reusing the bank and its ingest/evolution figures from {saved}")
        elif reuse and exists and progress.exists():
            log(f"N={size}: going on from what {progress} records")
            row = build(size, settings, passages, mode, progress)
            saved.write_text(json.dumps(row, indent=1))
        elif reuse and exists:
            from smb_pipeline.runner import run_evolve

            log(f"N={size}: reusing the bank (ingest not measured); running one evolution cycle")
            started = time.perf_counter()
            _, report = run_evolve(settings)
            row = {"size": size, "mode": "reused", "evolve_s": time.perf_counter() - started,
                   "evolve_ok": report.success, "evolve_failures": report.failures[:5]}
        else:
            if exists:
                raise SystemExit(f"{settings.memory_bank_dir} exists: pass --reuse or another --root")
            for stale in (progress, saved, progress.with_name(f"rss-{size}.json"),  # records without their bank
                          progress.with_name(f"rss-{size}.log")):
                stale.unlink(missing_ok=True)
            if Path(settings.kbmd_dir).exists():  # a corpus left without its bank: slice 1 would ingest all of it
                shutil.rmtree(settings.kbmd_dir)
            row = build(size, settings, passages, mode, progress)
            saved.write_text(json.dumps(row, indent=1))
        row.update(measure(size, settings, questions))
        row["rss_mb"] = max(peak_rss_mb(), row.get("build_rss_mb", 0))
        return row
    except Exception as exc:  # a row that says so; the other sizes still run
        return {"size": size, "error": f"{exc!r}\n{traceback.format_exc()}"}


# ---- report ------------------------------------------------------------------------------------

def _f(value, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def print_row(r: dict) -> None:
    print(f"{r['size']:>7} {_f(r.get('objects'), 'd', 8)} {_f(r.get('docs_per_s'), '.1f', 7)} "
          f"{_f(r.get('objects_per_s'), '.0f', 7)} {_f(r.get('first_tenth_docs_per_s'), '.1f', 8)} "
          f"{_f(r.get('last_tenth_docs_per_s'), '.1f', 8)} {_f(r.get('evolve_s'), '.1f', 8)} "
          f"{r['p50_ms']:>7.0f} {r['p95_ms']:>7.0f} {r['objects_p50_ms']:>7.0f} {r['objects_p95_ms']:>7.0f} "
          f"{_f(r.get('r5_2wiki'), '.3f', 6)} "
          f"{_f(r.get('r5_generated'), '.3f', 6)} {r['rss_mb']:>7.0f} {r['disk_bytes_per_doc'] / 1024:>8.1f} "
          f"{r['sensor_tick_s']:>7.2f}", flush=True)


HEADER = (f"{'docs':>7} {'objects':>8} {'docs/s':>7} {'obj/s':>7} {'1st10%':>8} {'last10%':>8} {'evolve s':>8} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'obj p50':>7} {'obj p95':>7} {'R@5 2w':>6} {'R@5 gen':>6} {'RSS MB':>7} {'KB/doc':>8} {'sensor s':>7}")


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def print_targets(rows: list[dict]) -> None:
    rows = sorted(rows, key=lambda r: r["size"])
    smallest, largest = rows[0], rows[-1]
    at = f"at {largest['size']:,}" + ("" if largest["size"] >= 50000 else " (target is at 50,000)")
    print(f"- recall p95 {at}: {largest['p95_ms']:.0f} ms (<= 250 ms): {verdict(largest['p95_ms'] <= 250)}")
    print(f"- object recall (`recall`, k=10) p95 {at}: {largest['objects_p95_ms']:.0f} ms (<= 250 ms): "
          f"{verdict(largest['objects_p95_ms'] <= 250)}")
    growth = largest["p50_ms"] / smallest["p50_ms"] if len(rows) > 1 and smallest["p50_ms"] else None
    print(f"- recall p50 growth {smallest['size']:,} -> {largest['size']:,}: "
          f"{'-' if growth is None else f'{growth:.2f}x'} (< 2x): {verdict(None if growth is None else growth < 2)}")
    for r in rows:
        if r.get("resumed") and not (r.get("first_tenth_docs_per_s") and r.get("last_tenth_docs_per_s")):
            print(f"- last/first tenth ingest throughput at {r['size']:,}: n/a (the first or last slice was "
                  f"resumed after a stop: {', '.join(map(str, r['resumed']))})")
        elif r.get("first_tenth_docs_per_s"):
            ratio = r["last_tenth_docs_per_s"] / r["first_tenth_docs_per_s"]
            resumed = f"; resumed after a stop: {', '.join(map(str, r['resumed']))}" if r.get("resumed") else ""
            print(f"- last/first tenth ingest throughput at {r['size']:,} ({r['mode']}{resumed}): {ratio:.2f} "
                  f"(>= 0.80): {verdict(ratio >= 0.8)}")
    reference = next((r for r in rows if r["size"] == PASSAGES), None)
    grown = [r for r in rows if r["size"] > PASSAGES and r.get("r5_2wiki") is not None]
    if reference is None:
        measured = ", ".join(f"{r['size']:,}: {r['r5_2wiki']:.3f}" for r in grown)
        print(f"- 2wiki R@5 drop: n/a (add {PASSAGES} to --sizes for the passages-only reference)"
              + (f"; measured {measured}" if grown else ""))
    elif not grown:
        print(f"- 2wiki R@5 drop: n/a (no size above {PASSAGES:,}); R@5 at {PASSAGES:,}: {reference['r5_2wiki']:.3f}")
    for r in grown if reference is not None else []:
        drop = reference["r5_2wiki"] - r["r5_2wiki"]
        print(f"- 2wiki R@5 {reference['r5_2wiki']:.3f} at {PASSAGES:,} -> {r['r5_2wiki']:.3f} at {r['size']:,}: "
              f"drop {drop:.3f} (<= 0.03): {verdict(drop <= 0.03)}")
    peak = max(r["rss_mb"] for r in rows)
    print(f"- peak RSS: {peak:.0f} MB (<= 6 GB): {verdict(peak <= 6144)}")
    print(f"- sensor tick {at}: {largest['sensor_tick_s']:.2f} s (<= 10 s): "
          f"{verdict(largest['sensor_tick_s'] <= 10)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,50000", help="documents per corpus, comma-separated")
    parser.add_argument("--root", type=Path, help="where corpora and banks go (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="skip ingest when a bank for that size exists")
    parser.add_argument("--ingest-mode", choices=("run_ingest", "sensor"), default="run_ingest",
                        help="each slice through run_ingest (as `smb ingest`) or a kbmd_sensor tick and its runs")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    root = args.root or Path(tempfile.mkdtemp(prefix="smb-scale-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    log(f"scale benchmark, sizes {sizes}, root {root}, ingest mode {args.ingest_mode}")
    rows = []
    print(HEADER, flush=True)
    for size in sizes:
        row = in_child(run_size, size, str(root), args.reuse, args.ingest_mode)
        if "error" in row:
            print(f"N={size} failed: {row['error']}", file=sys.stderr, flush=True)
            continue
        if not row.get("evolve_ok", True):
            print(f"N={size}: evolution cycle failed: {row.get('evolve_failures')}", file=sys.stderr)
        print_row(row)
        rows.append(row)
    if not rows:
        raise SystemExit("no size finished")
    print(f"\nscale benchmark ({root}; ingest per slice: {args.ingest_mode}; no LLM)")
    print(HEADER)
    for row in sorted(rows, key=lambda r: r["size"]):
        print_row(row)
    print("columns: docs/s and obj/s over the whole ingest; 1st10%/last10% docs/s of the first and last slice; "
          "R@5 2w = 2wiki dev Recall@5 (sizes >= 6,119), R@5 gen = generated questions; KB/doc = du(bank) / N; "
          "sensor s = one kbmd_sensor tick with nothing new")
    print("targets:")
    print_targets(rows)
    print(json.dumps([{k: v for k, v in r.items() if k not in ("slices", "types")} for r in rows]))


if __name__ == "__main__":
    main()
