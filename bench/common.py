"""Shared helpers for the benchmarks: the 2wiki data in ../shared, corpus files, timing, peak RSS."""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import re
import resource
from pathlib import Path

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "2wiki"


def load_2wiki() -> tuple[list[dict], list[dict]]:
    """(passages, questions) from ../shared/eval/2wiki (never copied into the repo)."""
    corpus = json.loads((SHARED / "corpus.json").read_text())
    questions = json.loads((SHARED / "dev_questions.json").read_text())
    return corpus, questions


def slug(title: str, index: int) -> str:
    return f"{index:05d}-" + (re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50] or "doc")


def write_corpus(passages: list[dict], folder: Path) -> dict[str, str]:
    """One markdown file per passage, title as `# heading`; returns relative path -> title."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for i, passage in enumerate(passages):
        relative = f"{slug(passage['title'], i)}.md"
        (folder / relative).write_text(f"# {passage['title']}\n\n{passage['text']}\n", encoding="utf-8")
        paths[relative] = passage["title"]
    return paths


def peak_rss_mb() -> float:
    """Peak resident memory of this process and its finished children, in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def current_rss_mb() -> float:
    """Resident memory of this process now, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def in_child(target, *args):
    """Run `target(*args)` in a fresh (spawned) process and return what it returns: each side of a
    comparison, and each step that a real deployment runs in its own process (`smb evolve`, a run the
    Dagster daemon launches), then has its own peak RSS and nothing cached from an earlier step. An
    exception in the child is raised here; a child that dies without a result (killed, out of memory)
    is an error, not a wait forever."""
    context = mp.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_return_through, args=(results, target, *args))
    process.start()
    while True:
        try:
            ok, value = results.get(timeout=1.0)
            break
        except queue.Empty:
            if not process.is_alive():
                try:  # it may have put its result just before it ended
                    ok, value = results.get(timeout=1.0)
                    break
                except queue.Empty:
                    raise RuntimeError(f"{target.__name__} ended (exit code {process.exitcode}) "
                                       "without a result") from None
    process.join()
    if not ok:
        raise value
    return value


def _return_through(results, target, *args) -> None:
    try:
        results.put((True, target(*args)))
    except BaseException as exc:  # raised again in the parent
        results.put((False, exc))
        raise
