"""The corpus folder (`SMB_KBMD_DIR`): finding documents, naming their partitions, validating content.

Bad input never reaches the stores: each problem raises `DocumentError` naming the file and reason.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from smb_core.model import ModelError, split_front_matter

SUFFIXES = (".md", ".markdown")
#: File timestamps come from a coarse kernel clock that can lag the process clock by a tick.
CLOCK_GRANULARITY_NS = 20_000_000


class DocumentError(ValueError):
    """A corpus file that cannot be ingested; the message names the file and the reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class CorpusFile:
    path: Path  # absolute path as found (may be a symlink)
    relative: str  # POSIX path relative to the corpus root: the document's identity
    partition_key: str
    changed_ns: int  # the later of mtime and ctime: a copy can preserve mtime, never ctime
    size: int


@dataclass(frozen=True)
class DocumentContent:
    text: str
    sha256: str
    title: str
    tags: list[str]


def partition_key(relative: str) -> str:
    """A Dagster-safe, stable key for a path: a readable slug plus a short hash of the exact path."""
    stem = re.sub(r"\.(md|markdown)$", "", relative, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:60].strip("-") or "doc"
    return f"{slug}-{hashlib.sha1(relative.encode('utf-8')).hexdigest()[:12]}"


def scan(root: Path) -> list[CorpusFile]:
    """Every markdown file below `root` (recursively, hidden folders skipped), sorted by path."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"corpus folder {root} does not exist")
    found: list[CorpusFile] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or not name.lower().endswith(SUFFIXES):
                continue
            path = Path(dirpath) / name
            relative = path.relative_to(root).as_posix()
            try:
                stat = path.stat()
            except OSError:  # dangling symlink: reported when read
                stat = path.lstat()
            found.append(CorpusFile(path, relative, partition_key(relative),
                                    max(stat.st_mtime_ns, stat.st_ctime_ns), stat.st_size))
    return found


def content_sha256(data: bytes) -> str:
    """The hash a layer-0 version is stored under: of the file's bytes as read."""
    return hashlib.sha256(data).hexdigest()


def rejection_fingerprint(file: CorpusFile, max_bytes: int) -> str | None:
    """What a rejection depended on: the file's bytes, where it really is (a symlink's target) and the
    size limit. While none of them changes, the file would be rejected again for the same reason."""
    try:
        real = file.path.resolve(strict=True)
        data = real.read_bytes()
    except (OSError, RuntimeError):
        return None  # gone or unreadable: cheap to try again
    return hashlib.sha256(f"{real}\0{max_bytes}\0".encode() + data).hexdigest()


def read_document(file: CorpusFile, root: Path, max_bytes: int) -> DocumentContent:
    """Read and validate one corpus file, or raise DocumentError saying what is wrong with it."""
    name = file.relative
    real_root = Path(root).resolve()
    try:
        real = file.path.resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise DocumentError(name, "file does not exist (deleted, or a dangling symlink)") from None
    if not real.is_relative_to(real_root):
        raise DocumentError(name, f"symlink points outside the corpus folder (to {real})")
    if not real.is_file():
        raise DocumentError(name, "not a regular file")
    size = real.stat().st_size
    if size == 0:
        raise DocumentError(name, "file is empty")
    if size > max_bytes:
        raise DocumentError(name, f"file is {size} bytes, over the SMB_MAX_DOC_BYTES limit of {max_bytes}")
    data = real.read_bytes()
    if b"\x00" in data:  # anywhere: a text file never contains NUL (memchr, so cheap)
        raise DocumentError(name, "binary file (contains NUL bytes), not markdown")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(name, f"not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") from None
    if not text.strip():
        raise DocumentError(name, "file has only whitespace")
    try:
        front, body = split_front_matter(text)
    except ModelError as exc:
        raise DocumentError(name, f"broken YAML front matter: {exc}") from None
    return DocumentContent(
        text=text, sha256=content_sha256(data), title=_title(front, body, name), tags=_tags(front)
    )


def _title(front: dict, body: str, relative: str) -> str:
    """The first `# ` heading, else the front matter's title, else the file name."""
    match = re.search(r"^#[ \t]+(.+?)[ \t#]*$", body, flags=re.MULTILINE)
    if match:
        return match.group(1).strip()
    if isinstance(front.get("title"), str) and front["title"].strip():
        return front["title"].strip()
    return Path(relative).stem.replace("-", " ").replace("_", " ").strip() or relative


def _tags(front: dict) -> list[str]:
    tags = front.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    return [str(t) for t in tags if str(t).strip()] if isinstance(tags, list) else []


@dataclass(frozen=True)
class CorpusChanges:
    new: list[CorpusFile]  # paths never seen: need a partition and a run
    modified: list[CorpusFile]  # known paths touched since the watermark: need a run
    watermark_ns: int  # the newest change seen, but never later than just before the scan began


def changes_since(files: list[CorpusFile], known_keys: set[str], watermark_ns: int,
                  scan_started_ns: int | None = None) -> CorpusChanges:
    """Which files need ingesting, from a scan, the known partition keys and the last watermark.

    Only file metadata is read; a touched file whose content did not change costs one cheap no-op run.
    The new watermark never passes the moment the scan started (less the file system clock's
    granularity), so a file changed while the scan ran is seen by the next tick.
    """
    new = [f for f in files if f.partition_key not in known_keys]
    modified = [f for f in files if f.partition_key in known_keys and f.changed_ns > watermark_ns]
    newest = max((f.changed_ns for f in files), default=watermark_ns)
    if scan_started_ns is not None:
        newest = min(newest, scan_started_ns - CLOCK_GRANULARITY_NS)
    return CorpusChanges(new, modified, max(watermark_ns, newest))


def contiguous_ranges(ordered_keys: list[str], wanted: set[str], max_size: int) -> list[tuple[str, str]]:
    """Group wanted keys into (first, last) ranges of consecutive keys, at most `max_size` keys each."""
    ranges: list[tuple[str, str]] = []
    start = last = None
    size = 0
    for key in ordered_keys:
        if key in wanted and start is not None and size < max_size:
            last, size = key, size + 1
            continue
        if start is not None:
            ranges.append((start, last))
            start = None
        if key in wanted:
            start = last = key
            size = 1
    if start is not None:
        ranges.append((start, last))
    return ranges
