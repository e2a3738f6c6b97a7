"""Layers 0 and 1 as plain functions: store a document version, then extract its objects.

The Dagster assets and `smb remember` call these; they are safe to re-run: an unchanged file is a
no-op, and extraction of an already extracted version (same extractor version) is skipped.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from threadpoolctl import threadpool_limits

from smb_core.bank import Bank
from smb_core.corpus import (
    CorpusFile, DocumentError, content_sha256, read_document, rejection_fingerprint, scan,
)
from smb_core.embed import single_threaded
from smb_core.extract.base import Extraction, Extractor, authored_title
from smb_core.recall.names import document_names
from smb_core.model import SourceDocument, agent_run_id, stable_id
from smb_core.settings import Settings


#: Source records read at once by `extract_sources`, in batches (bounded memory at any corpus size).
SOURCE_BATCHES_PER_READ = 32


@dataclass
class SourceOutcome:
    """What happened to one corpus file in layer 0."""

    partition_key: str
    path: str
    status: str  # new | new_version | unchanged | rejected
    source_id: str | None = None
    sha256: str | None = None
    version: int | None = None
    reason: str = ""


@dataclass
class ExtractionSummary:
    documents: int = 0
    skipped: int = 0
    superseded: int = 0  # objects of documents extracted again that the new extraction did not find
    counts: Counter = field(default_factory=Counter)
    extractors: Counter = field(default_factory=Counter)
    preview: list[str] = field(default_factory=list)
    object_ids: list[str] = field(default_factory=list)


def files_for_partitions(root: Path, keys: list[str]) -> dict[str, CorpusFile | None]:
    """Map partition keys to the corpus files they name (None when the file is gone)."""
    by_key = {f.partition_key: f for f in scan(root)}
    return {key: by_key.get(key) for key in keys}


def ingest_sources(bank: Bank, files: list[CorpusFile], root: Path, run_id: str | None = None,
                   batch_size: int = 500, provenance: str = "corpus") -> list[SourceOutcome]:
    """Store each file as a new layer-0 version if its content is new, superseding the previous version.

    Files are read and validated outside the lock; each batch is then written in one short session.
    """
    outcomes: list[SourceOutcome] = []
    for start in range(0, len(files), batch_size):
        batch = files[start : start + batch_size]
        contents: dict[str, object] = {}
        for file in batch:
            try:
                contents[file.partition_key] = read_document(file, root, bank.settings.max_doc_bytes)
            except DocumentError as exc:
                contents[file.partition_key] = exc
        with bank.writing() as db:
            latest = db.latest_versions([f.partition_key for f in batch])
            stale = _versions_to_supersede(db, [f.partition_key for f in batch])
            new_docs, superseded, rejected = [], [], []
            for file in batch:
                outcome, content = SourceOutcome(file.partition_key, file.relative, "rejected"), contents[file.partition_key]
                outcomes.append(outcome)
                if isinstance(content, DocumentError):
                    outcome.reason = content.reason
                    rejected.append((file.partition_key, file.relative, content.reason,
                                     rejection_fingerprint(file, bank.settings.max_doc_bytes)))
                    continue
                previous = latest.get(file.partition_key)
                outcome.sha256 = content.sha256
                if previous is not None and previous.sha256 == content.sha256:
                    outcome.status, outcome.source_id, outcome.version = "unchanged", previous.id, previous.version
                    # older versions left active by a run that died before superseding them
                    superseded.extend(d for d in stale.get(file.partition_key, []) if d.id != previous.id)
                    continue
                version = (previous.version + 1) if previous else 1
                doc = SourceDocument(
                    id=source_id(file.relative, content.sha256, version), path=file.relative,
                    partition_key=file.partition_key, sha256=content.sha256, version=version, title=content.title,
                    bytes=len(content.text.encode("utf-8")), tags=content.tags,
                    supersedes=previous.id if previous else None, provenance=provenance, run_id=run_id,
                    body=content.text,
                )
                new_docs.append(doc)
                superseded.extend(stale.get(file.partition_key, []))
                outcome.status = "new_version" if previous else "new"
                outcome.source_id, outcome.version = doc.id, doc.version
            bank.add_sources(new_docs)
            bank.supersede_sources(superseded, run_id)
            if rejected:
                bank.record_rejections(rejected, run_id)
    return outcomes


#: SQL: the version `s` still has active objects of its own (a run died while superseding it).
_HAS_ACTIVE_OBJECTS = ("EXISTS (SELECT 1 FROM objects o WHERE o.status = 'active' AND len(o.source_ids) = 1 "
                       "AND o.source = s.id)")


def files_to_ingest(bank: Bank, files: list[CorpusFile],
                    extractor_version: str) -> tuple[list[CorpusFile], list[CorpusFile]]:
    """The files whose current content is not wholly in the bank: never stored (new, or rejected before
    and changed since), changed since their latest version, not yet extracted by this extractor version,
    or left with two active versions or active objects of a superseded one by a run that died half-way;
    and, apart, the files rejected before whose bytes, place and size limit have not changed since (they
    would be rejected again: trying them started a run that failed, every time).

    `smb ingest` runs over these only. Over all files it started a run per 5,000 unchanged documents,
    each recording every partition again and checking the whole of layer 0: minutes of no-op work on a
    large bank for a handful of new files. Each file is read and hashed here (exact, unlike times)."""
    with bank.reading() as db:
        stored = dict(db.sql(
            "SELECT partition_key, any_value(sha256) FROM sources s WHERE status = 'active' AND EXISTS "
            "(SELECT 1 FROM extractions e WHERE e.source_id = s.id AND e.version = ?) "
            "GROUP BY partition_key HAVING count(*) = 1", [extractor_version]))
        half_superseded = {r[0] for r in db.sql(
            f"SELECT DISTINCT partition_key FROM sources s WHERE status <> 'active' AND {_HAS_ACTIVE_OBJECTS}")}
        last_rejection = dict(db.sql("SELECT partition_key, arg_max(fingerprint, recorded_at) FROM rejections "
                                     "GROUP BY partition_key")) if db.has_column("rejections", "fingerprint") else {}
    pending, still_rejected = [], []
    for file in files:
        sha256 = stored.get(file.partition_key)
        if sha256 is not None and file.partition_key not in half_superseded and _file_sha256(file.path) == sha256:
            continue
        fingerprint = last_rejection.get(file.partition_key)
        if fingerprint is not None and rejection_fingerprint(file, bank.settings.max_doc_bytes) == fingerprint:
            still_rejected.append(file)
        else:
            pending.append(file)
    return pending, still_rejected


def _file_sha256(path: Path) -> str | None:
    try:
        return content_sha256(path.read_bytes())
    except OSError:
        return None  # unreadable or gone: the run says why


def source_id(relative: str, sha256: str, version: int) -> str:
    """The id of a layer-0 version. Versions after the first include their number, so a file changed
    back to earlier content (A, B, A) gets a third version instead of colliding with the first."""
    return stable_id("src", relative, sha256) if version == 1 else stable_id("src", relative, sha256, f"v{version}")


def _versions_to_supersede(db, partition_keys: list[str]) -> dict[str, list[SourceDocument]]:
    """Versions of these partitions that are active, or superseded with objects still active (a run that
    died half-way through superseding); superseding them again is idempotent."""
    rows = db.sql(
        f"SELECT id FROM sources s WHERE partition_key IN (SELECT unnest(?)) AND (status = 'active' OR {_HAS_ACTIVE_OBJECTS})",
        [list(partition_keys)],
    )
    found: dict[str, list[SourceDocument]] = {}
    for doc in db.sources_by_ids([r[0] for r in rows]):
        found.setdefault(doc.partition_key, []).append(doc)
    return found


def extract_sources(bank: Bank, source_ids: list[str], extractor: Extractor, run_id: str | None = None,
                    batch_size: int = 64, force: bool = False) -> ExtractionSummary:
    """Extract layer-1 objects from layer-0 versions, in batches, writing each batch to all four stores.

    Three stages overlap: this thread parses a batch while a thread embeds it (ONNX, which leaves
    Python's GIL) and a writer thread stores the one before (DuckDB, Chroma and file writes also leave
    it), so neither core waits for the other's stage; batches are still written one at a time, in
    order, and a failed write stops the run after the batches before it. Source records are read
    between writes (one process cannot read and write the DuckDB file at once).
    Each stage runs on one thread: the embedder (`single_threaded`) and BLAS (spaCy's matrix products)
    with more threads only took CPU from the other stages, threads spinning or meeting after small batches.
    """
    summary = ExtractionSummary()
    version = getattr(extractor, "version", extractor.name)
    with bank.reading() as db:
        done = set() if force else bank.extracted_sources(db, source_ids, version)
        todo = [s for s in source_ids if s not in done]
        again = bank.extracted_sources(db, todo)  # before: by an older extractor, or `force`
    summary.skipped = len(source_ids) - len(todo)
    chunk = batch_size * SOURCE_BATCHES_PER_READ
    embedder = single_threaded(bank.embedder)
    with threadpool_limits(limits=1, user_api="blas"), \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="smb-embed") as embedding, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="smb-write") as writer:
        writing: Future | None = None  # the batch being written
        pending = None  # the batch parsed before this one, still to be written
        found: dict[str, SourceDocument] = {}
        for start in range(0, len(todo), batch_size):
            if start % chunk == 0:  # the next source records; no write may run while this thread reads
                if writing is not None:
                    writing.result()
                with bank.reading() as db:
                    found = {d.id: d for d in db.sources_by_ids(todo[start : start + chunk])}
            docs = [found[i] for i in todo[start : start + batch_size] if i in found]
            items = [(doc, bank.read_source_text(doc)) for doc in docs]
            extractions = _run_extractor(extractor, items)
            objects = [o for e in extractions for o in e.objects()]
            vectors = embedding.submit(bank.embed_objects, objects, embedder)
            if pending is not None:
                if writing is not None:
                    writing.result()
                writing = writer.submit(_store_batch, bank, *pending, version, run_id, again, summary)
            pending = (items, extractions, objects, vectors)
        if writing is not None:
            writing.result()
        if pending is not None:
            _store_batch(bank, *pending, version, run_id, again, summary)
    return summary


def _store_batch(bank: Bank, items: list[tuple[SourceDocument, str]], extractions: list[Extraction],
                 objects: list, vectors: Future, version: str, run_id: str | None, again: set[str],
                 summary: ExtractionSummary) -> None:
    """Write one extracted batch in one session: objects, edges, document names, extraction records.
    Documents extracted before (`again`) are reconciled with what they had first (`reconcile_extraction`)."""
    rows = vectors.result()  # before taking the lock: other processes wait only for the writes
    with bank.writing():
        summary.superseded += bank.reconcile_extraction(
            {doc.id: e.objects() for (doc, _), e in zip(items, extractions) if doc.id in again}, version, run_id)
        bank.write(objects, [edge for e in extractions for edge in e.edges], run_id=run_id, vectors=rows)
        bank.set_document_names([(doc.id, name, weight) for (doc, text), extraction in zip(items, extractions)
                                 for name, weight in (extraction.names
                                                      or document_names(authored_title(doc, text), None))])
        bank.record_extractions([(doc.id, version, extraction.extractor, extraction.counts(), run_id)
                                 for (doc, _), extraction in zip(items, extractions)])
    for (doc, _), extraction in zip(items, extractions):
        summary.documents += 1
        summary.counts.update(extraction.counts())
        summary.extractors[extraction.extractor] += 1
        summary.object_ids.extend(o.id for o in extraction.objects())
        if len(summary.preview) < 12:
            summary.preview.append(_preview(doc, extraction))


def _run_extractor(extractor: Extractor, items: list[tuple[SourceDocument, str]]) -> list[Extraction]:
    if hasattr(extractor, "extract_many"):
        return extractor.extract_many(items)
    return [extractor.extract(doc, text) for doc, text in items]


def _preview(doc: SourceDocument, extraction: Extraction) -> str:
    entities = ", ".join(e.title for e in extraction.entities[:6])
    claim = extraction.claims[0].statement[:160] if extraction.claims else ""
    return f"- **{doc.title}** (`{doc.path}` v{doc.version}): {entities}" + (f"; e.g. _{claim}_" if claim else "")


def get_extractor(settings: Settings) -> Extractor:
    """The NLP extractor, or the LLM extractor (falling back to NLP per document) when `SMB_LLM=ollama`."""
    from smb_core.extract.nlp import NLPExtractor

    if settings.llm == "ollama":
        from smb_core.extract.llm import LLMExtractor
        from smb_core.llm import OllamaClient

        return LLMExtractor(OllamaClient(settings), fallback=NLPExtractor())
    return NLPExtractor()


def remember_note(bank: Bank, text: str, title: str | None, tags: list[str], agent: str) -> SourceDocument:
    """An agent's free-text note becomes a layer-0 document (provenance `agent:<name>`) and is extracted."""
    import hashlib

    if not text.strip():
        raise DocumentError("<note>", "note is empty")
    content = f"# {title.strip()}\n\n{text.strip()}\n" if title else text.strip() + "\n"
    sha = hashlib.sha256(content.encode("utf-8")).hexdigest()
    relative = f"agent-notes/{agent}/{sha[:16]}.md"
    doc = SourceDocument(
        id=stable_id("src", relative, sha), path=relative, partition_key=f"note-{sha[:16]}", sha256=sha, version=1,
        title=title or text.strip().split("\n", 1)[0][:80], bytes=len(content.encode("utf-8")), tags=tags,
        provenance=agent_run_id(agent), run_id=agent_run_id(agent), body=content,
    )
    bank.add_sources([doc])
    extract_sources(bank, [doc.id], get_extractor(bank.settings), run_id=agent_run_id(agent))
    return doc
