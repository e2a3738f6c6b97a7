"""Shared helpers for the benchmarks: the 2wiki data in ../shared, corpus files, timing, peak RSS."""

from __future__ import annotations

import json
import multiprocessing as mp
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


def in_child(target, *args) -> dict:
    """Run `target(*args, queue)` in a fresh (spawned) process and return what it puts on the queue:
    each side of a comparison then has its own peak RSS."""
    queue = mp.get_context("spawn").Queue()
    process = mp.get_context("spawn").Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result
