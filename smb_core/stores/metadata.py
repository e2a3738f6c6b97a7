"""The metadata store on DuckDB: objects, provenance, edges, source documents and the lexical index.

Everything the pipeline and agents filter or aggregate on is a SQL query here. DuckDB allows one
read-write process per file, so connections are short-lived and opened under the bank's lock
(see `smb_core.locking`); readers open the file read-only, and keep it open after a session until a
writer wants it (`_ReadOnlyAttachments`).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from smb_core.locking import held_for_writing
from smb_core.model import MemoryObject, SourceDocument, model_for

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
#: DuckDB draws a progress bar for queries over two seconds, on the terminal and into run logs alike.
QUIET = "SET enable_progress_bar = false"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS sources (
    id VARCHAR PRIMARY KEY, path VARCHAR NOT NULL, partition_key VARCHAR NOT NULL, sha256 VARCHAR NOT NULL,
    version INTEGER NOT NULL, title VARCHAR, bytes BIGINT, ingested_at TIMESTAMPTZ, status VARCHAR NOT NULL,
    supersedes VARCHAR, provenance VARCHAR, run_id VARCHAR, tags VARCHAR[]
);
CREATE TABLE IF NOT EXISTS objects (
    id VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, layer INTEGER NOT NULL, status VARCHAR NOT NULL,
    title VARCHAR, text VARCHAR, confidence DOUBLE, created TIMESTAMPTZ, modified TIMESTAMPTZ,
    embedding_id VARCHAR, graph_node_id VARCHAR, run_id VARCHAR, file_path VARCHAR,
    source_ids VARCHAR[], tags VARCHAR[], derived_from VARCHAR[], disputed_by VARCHAR[], data JSON,
    source VARCHAR
);
CREATE TABLE IF NOT EXISTS spans (
    object_id VARCHAR NOT NULL, source_id VARCHAR NOT NULL, start_char INTEGER, end_char INTEGER,
    line_start INTEGER, line_end INTEGER
);
CREATE TABLE IF NOT EXISTS edges (
    id VARCHAR PRIMARY KEY, head VARCHAR NOT NULL, tail VARCHAR NOT NULL, edge_type VARCHAR NOT NULL,
    weight DOUBLE DEFAULT 1.0, object_id VARCHAR, run_id VARCHAR, created TIMESTAMPTZ DEFAULT now()
);
CREATE TABLE IF NOT EXISTS extractions (
    source_id VARCHAR PRIMARY KEY, version VARCHAR NOT NULL, extractor VARCHAR, counts JSON, run_id VARCHAR,
    recorded_at TIMESTAMPTZ DEFAULT now()
);
CREATE TABLE IF NOT EXISTS rejections (
    partition_key VARCHAR NOT NULL, path VARCHAR NOT NULL, reason VARCHAR NOT NULL, run_id VARCHAR,
    recorded_at TIMESTAMPTZ DEFAULT now()
);
-- what the rejection depended on (corpus.rejection_fingerprint); added after the table, hence not above
ALTER TABLE rejections ADD COLUMN IF NOT EXISTS fingerprint VARCHAR;
CREATE TABLE IF NOT EXISTS cycles (
    key VARCHAR PRIMARY KEY, number INTEGER NOT NULL, run_id VARCHAR, started TIMESTAMPTZ, finished TIMESTAMPTZ,
    counts JSON
);
ALTER TABLE cycles ADD COLUMN IF NOT EXISTS global_passes BOOLEAN;
CREATE TABLE IF NOT EXISTS cycle_layers (
    cycle VARCHAR NOT NULL, layer VARCHAR NOT NULL, run_id VARCHAR, finished TIMESTAMPTZ, PRIMARY KEY (cycle, layer)
);
CREATE TABLE IF NOT EXISTS cycle_sources (
    cycle VARCHAR NOT NULL, source_id VARCHAR NOT NULL, partition_key VARCHAR, sha256 VARCHAR
);
-- objects a document consumed before gained when extracted again; `cycle` is NULL until one takes them in
CREATE TABLE IF NOT EXISTS cycle_objects (cycle VARCHAR, object_id VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS merges (
    cycle VARCHAR, survivor VARCHAR NOT NULL, member VARCHAR NOT NULL, score DOUBLE, signals JSON,
    redirected_edges JSON, undone BOOLEAN DEFAULT false, recorded_at TIMESTAMPTZ DEFAULT now()
);
ALTER TABLE merges ADD COLUMN IF NOT EXISTS moved_from VARCHAR;
CREATE TABLE IF NOT EXISTS reinforcements (
    object_id VARCHAR NOT NULL, cycle VARCHAR NOT NULL, new_sources INTEGER, before DOUBLE, after DOUBLE,
    recorded_at TIMESTAMPTZ DEFAULT now(), PRIMARY KEY (object_id, cycle)
);
CREATE TABLE IF NOT EXISTS doc_names (name VARCHAR NOT NULL, source_id VARCHAR NOT NULL, weight DOUBLE NOT NULL);
CREATE INDEX IF NOT EXISTS doc_names_name ON doc_names (name);
CREATE INDEX IF NOT EXISTS doc_names_source ON doc_names (source_id);
CREATE TABLE IF NOT EXISTS names (name VARCHAR NOT NULL, object_id VARCHAR NOT NULL, type VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS lex_postings (term VARCHAR NOT NULL, unit VARCHAR NOT NULL, tf INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lex_units (unit VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, length INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS parses (key VARCHAR PRIMARY KEY, pipeline VARCHAR NOT NULL, doc BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS event_dates (key VARCHAR PRIMARY KEY, rules VARCHAR NOT NULL, mention JSON);
CREATE TABLE IF NOT EXISTS sentence_vectors (key VARCHAR PRIMARY KEY, embedder VARCHAR NOT NULL, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS contradiction_backlog (claim_id VARCHAR PRIMARY KEY, cycle VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS cooccurrence (cycle VARCHAR NOT NULL, max_links INTEGER NOT NULL, a VARCHAR NOT NULL,
    b VARCHAR NOT NULL, w BIGINT NOT NULL, claim VARCHAR);
CREATE INDEX IF NOT EXISTS objects_type ON objects (type);
CREATE INDEX IF NOT EXISTS objects_status ON objects (status);
CREATE INDEX IF NOT EXISTS objects_layer ON objects (layer);
CREATE INDEX IF NOT EXISTS objects_embedding ON objects (embedding_id);
CREATE INDEX IF NOT EXISTS objects_source ON objects (source);
CREATE INDEX IF NOT EXISTS spans_source ON spans (source_id);
CREATE INDEX IF NOT EXISTS edges_head ON edges (head);
CREATE INDEX IF NOT EXISTS edges_tail ON edges (tail);
CREATE INDEX IF NOT EXISTS names_name ON names (name);
-- Indexes no query looks values up in (DuckDB uses an index only for constants: `id_filter`). Each
-- write session loaded and rewrote them: at 32,000 documents these four held 300 MB of the ART
-- memory a commit needed and doubled a write session's time; older banks drop them.
DROP INDEX IF EXISTS spans_object;
DROP INDEX IF EXISTS names_object;
DROP INDEX IF EXISTS lex_term;
DROP INDEX IF EXISTS lex_unit;
CREATE INDEX IF NOT EXISTS sources_partition ON sources (partition_key);
"""


_SOURCE_COLUMNS = ["id", "path", "partition_key", "sha256", "version", "title", "bytes", "ingested_at", "status",
                   "supersedes", "provenance", "run_id", "tags"]

#: Files whose schema this process has already created (creating it again costs a round of DDL).
_SCHEMA_READY: set[Path] = set()

_OBJECT_COLUMNS = ["id", "type", "layer", "status", "title", "text", "confidence", "created", "modified",
                   "embedding_id", "graph_node_id", "run_id", "file_path", "source_ids", "tags", "derived_from",
                   "disputed_by", "data", "source"]


#: How long a process keeps the bank's file attached after its last read session, when no writer
#: wants it (see `_ReadOnlyAttachments`), and how often it looks for one.
LINGER_SECONDS = 30.0
WRITER_POLL_SECONDS = 0.05
#: A session that leaves DuckDB holding more than this (a scan of every object's JSON caches most of
#: the file) detaches at once, as before: a kept attachment must not keep a pipeline step's large
#: reads in memory while the step goes on. 200 recalls on a 10,000-document bank leave about 110 MB;
#: at 50,000 documents one recall leaves 400-850 MB, and with 512 MB here agents' object recall
#: re-attached the file, cold, nearly every question (p50 960-1,000 ms against 453-474 ms kept).
LINGER_MAX_BYTES = 1536 * 2**20


class _ReadOnlyAttachments:
    """Read sessions attach the bank's file, read-only, to one in-memory DuckDB instance per process.

    Starting a DuckDB instance costs about 15 ms (it registers every built-in function), more than
    most of an agent's reads: a recall made one read session, and spent a fifth of its time opening
    and closing the file. Attaching a file to a running instance costs about 2 ms, but a fresh
    attachment has none of the file's blocks and index nodes in memory yet: on a 10,000-document bank
    its first lookups were 4-6x slower, and recall took a p50 of 74 ms with a new attachment per query
    against 29 ms with one kept.

    So a file stays attached after its last session, for up to LINGER_SECONDS, unless the session left
    more than LINGER_MAX_BYTES in DuckDB's memory. DuckDB refuses to open a file read-write while
    another process has it attached, so writers must be let in: a session given the bank's
    `writer_lock` file lingers, and a thread detaches it as soon as any process holds that lock
    exclusively (a writer then waits about WRITER_POLL_SECONDS for DuckDB); `release` detaches at once
    for a writer in this process. Nothing can write the file while it is attached, so a kept
    attachment is never stale; a file replaced on disk is attached afresh.

    At exit the thread is stopped and the instance closed (`shutdown`), before Python finalizes: a
    daemon thread still inside DuckDB then is killed by a forced unwind that DuckDB's C++ swallows,
    and the process aborted ("FATAL: exception not rethrown") after its work was done.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._instance: duckdb.DuckDBPyConnection | None = None
        self._pid = 0
        self._sessions: dict[Path, int] = {}
        self._stamps: dict[Path, tuple] = {}  # attached files: their identity on disk when attached
        self._idle: dict[Path, tuple[float, Path]] = {}  # attached, no session: (since, writer lock file)
        self._watcher: threading.Thread | None = None
        self._stopping = threading.Event()
        atexit.register(self.shutdown)

    def open(self, path: Path, memory_limit: str | None) -> duckdb.DuckDBPyConnection:
        path = path.resolve()
        alias = _alias(path)
        with self._lock:
            if self._instance is None or self._pid != os.getpid():  # a forked child starts its own
                self._instance, self._pid = duckdb.connect(":memory:"), os.getpid()
                self._sessions, self._stamps, self._idle, self._watcher = {}, {}, {}, None
            self._idle.pop(path, None)
            if path in self._stamps and not self._sessions.get(path) and self._stamps[path] != _stamp(path):
                self._detach(path)
            if path not in self._stamps:
                if memory_limit:
                    self._instance.execute(f"SET memory_limit = {sql_literal(memory_limit)}")
                self._spill_next_to(path)
                self._instance.execute(f"ATTACH {sql_literal(path)} AS {alias} (READ_ONLY)")
                self._stamps[path] = _stamp(path)
            self._sessions[path] = self._sessions.get(path, 0) + 1
            cursor = self._instance.cursor()
        cursor.execute(f"USE {alias}")
        return cursor

    def _spill_next_to(self, path: Path) -> None:
        """Let a large query spill to `<file>.tmp`, beside the bank. Once the instance has spilled,
        DuckDB refuses to switch its temporary directory, even to the same one: a read session of a
        large bank that spilled then broke every later session of the process (a first cycle at
        10,000 documents failed in its semantic layer). The directory in use then stays."""
        try:
            self._instance.execute(f"SET temp_directory = {sql_literal(f'{path}.tmp')}")
        except duckdb.NotImplementedException:  # "cannot switch temporary directory after ... used"
            pass

    def close(self, path: Path, cursor: duckdb.DuckDBPyConnection, writer_lock: Path | None = None) -> None:
        """End a session; the file stays attached only if writers can make it let go (`writer_lock`)."""
        cursor.close()
        path = path.resolve()
        with self._lock:
            if self._pid != os.getpid() or path not in self._sessions:
                return
            self._sessions[path] -= 1
            if self._sessions[path]:
                return
            del self._sessions[path]
            if writer_lock is None or self._stopping.is_set() or self._memory_used() > LINGER_MAX_BYTES:
                self._detach(path)
                return
            self._idle[path] = (time.monotonic(), writer_lock)
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="smb-duckdb-linger", daemon=True)
                self._watcher.start()

    def release(self, path: Path) -> None:
        """Detach the file now unless a session of this process is reading it: this process will write."""
        path = path.resolve()
        with self._lock:
            if self._pid == os.getpid() and path in self._stamps and not self._sessions.get(path):
                self._detach(path)

    def _watch(self) -> None:
        """Detach idle files that a writer wants or that lingered long enough; stop when none is left."""
        while not self._stopping.wait(WRITER_POLL_SECONDS):
            with self._lock:
                if self._pid != os.getpid() or self._stopping.is_set():
                    return
                now = time.monotonic()
                for path, (since, writer_lock) in list(self._idle.items()):
                    if now - since >= LINGER_SECONDS or held_for_writing(writer_lock):
                        self._detach(path)
                if not self._idle:
                    self._watcher = None
                    return

    def shutdown(self) -> None:
        """Stop the watcher and close the instance; registered with `atexit` (see the class docstring)."""
        if self._pid != os.getpid():  # a forked child: the thread and instance are the parent's, and
            return  # the lock may have been held by a parent thread at the fork
        self._stopping.set()
        watcher = self._watcher  # the thread clears the attribute when it leaves
        if watcher is not None:
            watcher.join()
        with self._lock:
            if self._instance is not None:
                self._instance.close()
            self._instance, self._sessions, self._stamps, self._idle, self._watcher = None, {}, {}, {}, None

    def _memory_used(self) -> int:
        return self._instance.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchone()[0] or 0

    def _detach(self, path: Path) -> None:
        self._idle.pop(path, None)
        self._stamps.pop(path, None)
        self._instance.execute(f"DETACH {_alias(path)}")


def _stamp(path: Path) -> tuple:
    """The file's identity and size on disk: a different one means the file was replaced."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return ()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _alias(path: Path) -> str:
    return "bank_" + hashlib.sha1(str(path).encode()).hexdigest()[:16]


_READERS = _ReadOnlyAttachments()


class MetadataStore:
    """Thin typed wrapper over one DuckDB connection (open it with `connect`, close it when done)."""

    def __init__(self, path: Path, read_only: bool = False, memory_limit: str | None = None,
                 writer_lock: Path | None = None, wait_seconds: float = 0.0) -> None:
        """`writer_lock`: the bank's lock file, which lets a read session's file stay attached after it
        (`_ReadOnlyAttachments`). `wait_seconds`: how long a writer waits for such readers to let go."""
        self.path = path
        self.read_only = read_only
        self.memory_limit = memory_limit
        self.writer_lock = writer_lock
        self.wait_seconds = wait_seconds
        self.con: duckdb.DuckDBPyConnection | None = None
        self._attached = False  # a read session's cursor on the process's shared instance
        self._in_transaction = False

    def connect(self) -> MetadataStore:
        if self.read_only and not self.path.exists():
            self.con = duckdb.connect(":memory:")
            self.con.execute(_SCHEMA)
            return self
        if self.read_only:
            self.con, self._attached = _READERS.open(self.path, self.memory_limit), True
            return self
        if not self.path.exists():
            self._create()
        self.con = self._connect_for_writing()
        if self.path not in _SCHEMA_READY:
            self._add_older_banks_columns()
            self.con.execute("BEGIN TRANSACTION")  # tables a newer version adds: all of them or none
            self.con.execute(_SCHEMA)
            self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            self.con.execute("COMMIT")
            self._drop_object_postings()
            _SCHEMA_READY.add(self.path)
        return self

    def _create(self) -> None:
        """Make the bank's file with its whole schema, or not at all: DuckDB commits a script's
        statements one by one, so a process killed while it created the tables left a file with some
        of them, on which every read session then failed ("Table with name extractions does not
        exist"). The schema is written to a temporary file, which is renamed into place."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        for stale in (tmp, Path(f"{tmp}.wal"), Path(f"{self.path}.wal")):  # a log without its file is nobody's
            stale.unlink(missing_ok=True)
        try:
            con = duckdb.connect(str(tmp))
            try:
                con.execute(_SCHEMA)
                con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            finally:
                con.close()
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def _connect_for_writing(self) -> duckdb.DuckDBPyConnection:
        """A read-write connection, once other processes' read attachments have let go of the file."""
        _READERS.release(self.path)
        config = {"memory_limit": self.memory_limit} if self.memory_limit else {}
        deadline, delay = time.monotonic() + self.wait_seconds, 0.005
        while True:
            try:
                con = duckdb.connect(str(self.path), config=config)
                con.execute(QUIET)
                return con
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _add_older_banks_columns(self) -> None:
        """Columns that copy something out of an object for fast reads, added once to banks written
        before them. `disputed_by` (also in `data`) spares every cycle a scan of all objects' JSON
        (DuckDB rewrites the table: about a minute per 150,000 objects). `source`, the first of
        `source_ids`, is what `Bank.nearest` reads for each object of a text: fetching a list column's
        first element for scattered rows cost about 0.07 ms a row, a plain column about 0.003 ms."""
        self._add_objects_column("disputed_by", "VARCHAR[] DEFAULT []",
                                 "from_json(json_extract(data, '$.disputed_by'), '[\"VARCHAR\"]')",
                                 "NOT contains(data, '\"disputed_by\":[]')")
        self._add_objects_column("source", "VARCHAR", "coalesce(source_ids[1], '')")

    def _drop_object_postings(self) -> None:
        """Banks written before recall ranked only documents lexically also hold BM25 postings of every
        memory object (three quarters of the postings table), which nothing reads: removed once."""
        if not self.con.execute("SELECT 1 FROM lex_units WHERE kind <> 'source' LIMIT 1").fetchall():
            return
        log.warning("%s: removing the postings of memory objects (once for this bank)", self.path)
        with self.transaction():
            self.con.execute("DELETE FROM lex_postings WHERE unit IN "
                             "(SELECT unit FROM lex_units WHERE kind <> 'source')")
            self.con.execute("DELETE FROM lex_units WHERE kind <> 'source'")

    def _add_objects_column(self, column: str, declaration: str, value: str, where: str = "true") -> None:
        if self.con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'objects' AND column_name "
                            "IN ('data', ?)", [column]).fetchone()[0] != 1:
            return  # a new bank, or one that has the column
        log.warning("%s: adding the %s column to objects (once for this bank)", self.path, column)
        with self.transaction():  # a run that dies half-way leaves the bank as it was
            self.con.execute(f"ALTER TABLE objects ADD COLUMN {column} {declaration}")
            self.con.execute(f"UPDATE objects SET {column} = {value} WHERE {where}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One DuckDB transaction: what runs inside commits together or not at all. Nested calls join
        the outermost, so a caller can group several writes (a bank's write session is one)."""
        if self._in_transaction:
            yield
            return
        self.con.execute("BEGIN")
        self._in_transaction = True
        try:
            yield
        except BaseException:
            self._in_transaction = False
            self.con.execute("ROLLBACK")
            raise
        self._in_transaction = False
        self.con.execute("COMMIT")

    def close(self) -> None:
        if self.con is not None:
            if self._attached:
                _READERS.close(self.path, self.con, self.writer_lock)
            else:
                self.con.close()
            self.con, self._attached = None, False

    def sql(self, query: str, params: Sequence[Any] | None = None) -> list[tuple]:
        return self.con.execute(query, params or []).fetchall()

    def has_column(self, table: str, column: str) -> bool:
        """Whether the bank's file has this column yet: a bank an older version made gets new columns at
        its next write session, so a read session before that must do without them."""
        return bool(self.sql("SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() "
                             "AND table_name = ? AND column_name = ?", [table, column])[0][0])

    @contextmanager
    def naming_the_memory_limit(self) -> Iterator[None]:
        """DuckDB running out of memory in a session (a query, or a commit appending to the indexes)
        says which setting raises its limit."""
        try:
            yield
        except duckdb.Error as exc:
            if "out of memory" not in str(exc).lower():
                raise
            raise type(exc)(f"{exc}\nThe bank's DuckDB sessions may use {self.memory_limit}: "
                            "raise SMB_DUCKDB_MEMORY_LIMIT.") from exc

    # ---- writes ---------------------------------------------------------------------------

    def insert_sources(self, docs: Sequence[SourceDocument]) -> None:
        """Insert new layer-0 version rows (their status is the only thing that ever changes later)."""
        self.insert_rows("sources", _SOURCE_COLUMNS, [
            (d.id, d.path, d.partition_key, d.sha256, d.version, d.title, d.bytes, d.ingested_at, d.status.value,
             d.supersedes, d.provenance, d.run_id, d.tags) for d in docs
        ])

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                    replace: bool = False) -> None:
        """Bulk insert in one columnar statement (DuckDB's executemany costs milliseconds per row)."""
        if not rows:
            return
        params = {f"c{i}": [row[i] for row in rows] for i in range(len(columns))}
        select = ", ".join(f"unnest(${name})" for name in params)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        self.con.execute(f"{verb} INTO {table} ({', '.join(columns)}) SELECT {select}", params)

    def upsert_objects(self, objects: Sequence[MemoryObject]) -> None:
        """Insert or replace objects with their spans and linkable names, in one transaction."""
        objects = list({o.id: o for o in objects}.values())
        if not objects:
            return
        ids = [o.id for o in objects]
        rows = [
            (o.id, o.type.value, o.layer, o.status.value, o.title, o.text(), o.confidence, o.created,
             o.modified, o.embedding_id, o.graph_node_id, o.run_id, o.path(), o.source_ids, o.tags,
             o.derived_from, o.disputed_by, o.model_dump_json(), o.source_ids[0] if o.source_ids else "")
            for o in objects
        ]
        spans = [
            (o.id, s.source_id, s.start, s.end, s.line_start, s.line_end) for o in objects for s in o.source_spans
        ]
        names = [(n, o.id, o.type.value) for o in objects for n in _linkable_names(o)]
        with self.transaction():
            self._delete_where_in("spans", "object_id", ids)
            self._delete_where_in("names", "object_id", ids)
            self.insert_rows("objects", _OBJECT_COLUMNS, rows, replace=True)
            self.insert_rows("spans", ["object_id", "source_id", "start_char", "end_char", "line_start", "line_end"],
                             spans)
            self.insert_rows("names", ["name", "object_id", "type"], names)

    def upsert_edges(self, edges: Iterable[tuple[str, str, str, str, float, str | None, str | None]]) -> None:
        """Edges as (id, head, tail, edge_type, weight, object_id, run_id)."""
        rows = list({row[0]: row for row in edges}.values())
        self.insert_rows("edges", ["id", "head", "tail", "edge_type", "weight", "object_id", "run_id"], rows,
                         replace=True)

    def add_postings(self, units: Sequence[tuple[str, str, dict[str, int]]]) -> None:
        """Index new retrieval units (unit id, kind, term counts) for BM25, in one transaction. Units are
        layer-0 versions, whose text never changes: there is nothing to replace, and deleting first
        scanned the whole postings table on every write."""
        units = list({u[0]: u for u in units}.values())
        if not units:
            return
        with self.transaction():
            self.insert_rows("lex_units", ["unit", "kind", "length"],
                             [(u, kind, sum(c.values())) for u, kind, c in units])
            self.insert_rows("lex_postings", ["term", "unit", "tf"],
                             [(t, u, n) for u, _, c in units for t, n in c.items()])

    def _delete_where_in(self, table: str, column: str, values: Sequence[str]) -> None:
        self.con.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest(?))", [list(values)])

    def add_parses(self, parses: dict[str, bytes], pipeline: str) -> None:
        """Store serialized parses by key (a key always names the same parse); parses made by any
        other pipeline (an upgraded model) can never be read again, so they are dropped."""
        self._store_by_key("parses", ("pipeline", pipeline), "doc", parses)

    def add_event_dates(self, mentions: dict[str, str | None], rules: str) -> None:
        """Store claims' event dates (JSON, or None: no date) by key; dates found by other rules are dropped."""
        self._store_by_key("event_dates", ("rules", rules), "mention", mentions)

    def add_sentence_vectors(self, vectors: dict[str, bytes], embedder: str) -> None:
        """Store sentence vectors (float32 bytes) by key; vectors of any other embedder are dropped."""
        self._store_by_key("sentence_vectors", ("embedder", embedder), "vector", vectors)

    def _store_by_key(self, table: str, made_by: tuple[str, str], column: str, values: dict[str, Any]) -> None:
        """Insert or replace derived-data rows {key: value}, dropping the rows that `made_by` (the
        version column and this version) says another version made: their keys can never be asked for."""
        version_column, version = made_by
        self.con.execute(f"DELETE FROM {table} WHERE {version_column} <> ?", [version])
        self.insert_rows(table, ["key", version_column, column], [(k, version, v) for k, v in sorted(values.items())],
                         replace=True)

    # ---- reads ----------------------------------------------------------------------------

    def event_dates(self, keys: Sequence[str]) -> dict[str, str | None]:
        """The stored event dates among `keys`."""
        return self._by_key("event_dates", "mention", keys)

    def sentence_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored sentence vectors among `keys`."""
        return self._by_key("sentence_vectors", "vector", keys)

    def parses(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored parses among `keys`."""
        return self._by_key("parses", "doc", keys)

    def _by_key(self, table: str, column: str, keys: Sequence[str]) -> dict[str, Any]:
        """{key: column} of the rows of a derived-data table among `keys` (none in a bank written
        before the table existed)."""
        if not keys:
            return {}
        where, params = id_filter("key", keys)
        try:
            return dict(self.sql(f"SELECT key, {column} FROM {table} WHERE {where}", params))
        except duckdb.CatalogException:
            return {}

    def contradiction_backlog_size(self) -> int:
        """Claims waiting for the contradiction check (none in a bank written before the backlog existed)."""
        try:
            return self.sql("SELECT count(*) FROM contradiction_backlog")[0][0]
        except duckdb.CatalogException:
            return 0

    def get_object(self, object_id: str) -> MemoryObject | None:
        row = self.con.execute("SELECT type, data FROM objects WHERE id = ?", [object_id]).fetchone()
        return model_for(row[0]).model_validate_json(row[1]) if row else None

    def get_objects(self, ids: Sequence[str]) -> dict[str, MemoryObject]:
        if not ids:
            return {}
        where, params = id_filter("id", ids)
        rows = self.con.execute(f"SELECT id, type, data FROM objects WHERE {where}", params).fetchall()
        return {r[0]: model_for(r[1]).model_validate_json(r[2]) for r in rows}

    def object_summaries(self, ids: Sequence[str]) -> list[tuple[str, str, str, str | None]]:
        """(id, type, status, title) of the given objects, without parsing their JSON."""
        if not ids:
            return []
        where, params = id_filter("id", ids)
        return self.sql(f"SELECT id, type, status, title FROM objects WHERE {where}", params)

    def graph_nodes_of_types(self, types: Sequence[str]) -> list[str]:
        """The graph node ids of the objects of these memory types (each has one), sorted."""
        if not types:
            return []
        return [r[0] for r in self.sql("SELECT graph_node_id FROM objects WHERE type IN (SELECT unnest(?)) "
                                       "ORDER BY 1", [list(types)])]

    def edges_touching(self, nodes: Sequence[str], edge_type: str | None = None) -> list[tuple[str, str, str, str]]:
        """(head, tail, edge type, edge id) of the edges out of or into `nodes`, by edge id: a hop
        through the head and tail indexes, so that a reader need not load the whole graph to take it."""
        if not nodes:
            return []
        typed, more = (" AND edge_type = ?", [edge_type]) if edge_type else ("", [])
        heads, head_params = id_filter("head", nodes)
        tails, tail_params = id_filter("tail", nodes)
        return self.sql(f"SELECT head, tail, edge_type, id FROM edges WHERE {heads}{typed} UNION "
                        f"SELECT head, tail, edge_type, id FROM edges WHERE {tails}{typed} ORDER BY id",
                        head_params + more + tail_params + more)

    def spans_of_sources(self, source_ids: Sequence[str]) -> list[tuple[str, int, str]]:
        """(source id, start char, object id) of every object span in the given documents."""
        if not source_ids:
            return []
        where, params = id_filter("source_id", source_ids)
        return self.sql(f"SELECT source_id, start_char, object_id FROM spans WHERE {where}", params)

    def list_objects(
        self, type: str | None = None, status: str | None = None, layer: int | None = None,
        limit: int | None = 100, offset: int = 0,
    ) -> list[MemoryObject]:
        """Objects in creation order; `limit=None`: all of them (a pass that needs every community)."""
        where, params = _filters(type=type, status=status, layer=layer)
        page = "LIMIT ? OFFSET ?" if limit is not None else "OFFSET ?"
        rows = self.con.execute(
            f"SELECT type, data FROM objects {where} ORDER BY created, id {page}",
            [*params, *([limit] if limit is not None else []), offset],
        ).fetchall()
        return [model_for(t).model_validate_json(d) for t, d in rows]

    def get_source(self, source_id: str) -> SourceDocument | None:
        rows = self._sources("WHERE id = ?", [source_id])
        return rows[0] if rows else None

    def sources_by_ids(self, ids: Sequence[str]) -> list[SourceDocument]:
        if not ids:
            return []
        where, params = id_filter("id", ids)
        return self._sources(f"WHERE {where}", params)

    def latest_versions(self, partition_keys: Sequence[str]) -> dict[str, SourceDocument]:
        """The newest version of each partition that has one."""
        docs = self._sources(
            "WHERE (partition_key, version) IN (SELECT (partition_key, max(version)) FROM sources "
            "WHERE partition_key IN (SELECT unnest(?)) GROUP BY partition_key)", [list(partition_keys)]
        )
        return {d.partition_key: d for d in docs}

    def sources(self, status: str | None = None) -> list[SourceDocument]:
        return self._sources("WHERE status = ?" if status else "", [status] if status else [])

    def sources_for_partition(self, partition_key: str) -> list[SourceDocument]:
        return self._sources("WHERE partition_key = ?", [partition_key])

    def active_source_ids_for_partitions(self, keys: Sequence[str]) -> list[str]:
        rows = self.sql("SELECT id FROM sources WHERE status = 'active' AND partition_key IN (SELECT unnest(?)) "
                        "ORDER BY path", [list(keys)])
        return [r[0] for r in rows]

    def _sources(self, where: str, params: list) -> list[SourceDocument]:
        rows = self.con.execute(
            f"SELECT {', '.join(_SOURCE_COLUMNS)} FROM sources {where} ORDER BY path, version", params
        ).fetchall()
        return [SourceDocument.model_validate(dict(zip(_SOURCE_COLUMNS, r))) for r in rows]

    def count_by_type(self, status: str | None = None) -> dict[str, int]:
        where, params = _filters(status=status)
        return dict(self.sql(f"SELECT type, count(*) FROM objects {where} GROUP BY type ORDER BY type", params))

    def object_ids_for_sources(self, source_ids: Sequence[str], where: str = "true") -> list[str]:
        """Ids of the objects matching `where` (which binds nothing) that have any of these documents among
        their sources. A layer-1 object has one source, its indexed `source` column; the objects of the
        layers above (fewer, in row groups of their own) are searched through their whole lists. Agents'
        recall asks this for every question: list_has_any over the table took 290 ms at a million objects,
        growing with the bank; an index lookup of 20 documents' objects among 3 million about 9 ms."""
        if not source_ids:
            return []
        first, params = indexed_objects("source", list(source_ids), "*")
        rows = self.sql(f"SELECT id FROM {first} WHERE {where} UNION "
                        f"SELECT id FROM objects WHERE {naming_any_source(f'layer >= 2 AND ({where})')}",
                        [*params, list(source_ids)])
        return sorted(r[0] for r in rows)


def _filters(**conditions: Any) -> tuple[str, list]:
    parts, params = [], []
    for column, value in conditions.items():
        if value is not None:
            parts.append(f"{column} = ?")
            params.append(value.value if hasattr(value, "value") else value)
    return ("WHERE " + " AND ".join(parts)) if parts else "", params


#: Up to this many values, `id_filter` writes an IN list of constants (DuckDB's index_scan_max_count).
INDEX_LOOKUP_MAX = 2048


def id_filter(column: str, values: Sequence[str]) -> tuple[str, list]:
    """A `column IN ...` condition. DuckDB looks values up in an ART index (primary key or CREATE
    INDEX) only for an IN list of constants, never for a bound list: for a few hundred ids among
    150k rows that is ~2 ms instead of a ~12 ms scan. Longer lists bind one parameter (a scan is as
    fast then). Constants are quoted by doubling quotes, so any string is safe."""
    values = list(values)
    if not values:
        return "false", []
    if len(values) > INDEX_LOOKUP_MAX:
        return f"{column} IN (SELECT unnest(?))", [values]
    return f"{column} IN ({', '.join(sql_literal(v) for v in values)})", []


#: Rows a scan reads in the time an index probe takes for one constant of `id_filter`: 100-170 on the
#: objects and edges of a 4,000-document bank (100k-200k rows, warm), about 1,150 at 6.9 million objects.
ROWS_PER_PROBE = 1000


def lookups(db: "MetadataStore", table: str, column: str, values: Sequence[str],
            columns: str) -> list[tuple[str, list]]:
    """FROM items, one per query: `columns` of the rows of `table` whose `column` is one of `values`, for
    the caller to filter further (`indexed_objects`'s form). The values go as constants in chunks (index
    probes, `id_filter`) while they are few next to the table's rows, else as one bound list, which
    DuckDB answers with a scan of the table. Probes cost the same in any bank, a scan grows with it: a
    cycle that reads what a few hundred subjects name stays flat in a large bank, and in a small one the
    scan is faster."""
    values = list(values)
    if not values:
        return []
    if len(values) * ROWS_PER_PROBE > db.sql(f"SELECT count(*) FROM {table}")[0][0]:
        conditions = [(f"{column} IN (SELECT unnest(?))", [values])]
    else:
        conditions = [id_filter(column, values[i:i + INDEX_LOOKUP_MAX])
                      for i in range(0, len(values), INDEX_LOOKUP_MAX)]
    return [(_looked_up(table, columns, where), params) for where, params in conditions]


def looked_up_rows(db: "MetadataStore", table: str, column: str, values: Sequence[str], columns: str,
                   select: str, where: str = "true") -> list[tuple]:
    """`SELECT select ... WHERE where` over the rows of `table` whose `column` is one of `values`, found
    as `lookups` finds them (`columns`: those `select` and `where` read; `where` binds nothing)."""
    return [row for found, params in lookups(db, table, column, values, columns)
            for row in db.sql(f"SELECT {select} FROM {found} WHERE {where}", params)]

def indexed_objects(column: str, values: Sequence[str], columns: str) -> tuple[str, list]:
    """A FROM item: `columns` of the objects whose `column` is one of `values`, looked up in its index
    (`id_filter`), for the caller to filter further. DuckDB uses the index only when the lookup is the
    scan's one filter: with any other condition beside it, it scanned the whole table (at 6.9 million
    objects, 200 ms for a recall's texts against 8 ms for the lookup alone)."""
    where, params = id_filter(column, values)
    return _looked_up("objects", columns, where), params


def _looked_up(table: str, columns: str, where: str) -> str:
    """The rows matching `where` materialised first, so that the caller's own filters come after the lookup."""
    return f"(WITH found AS MATERIALIZED (SELECT {columns} FROM {table} WHERE {where}) FROM found)"


def naming_any_source(where: str, param: str = "?") -> str:
    """An `objects` condition: `where` holds and the object's `source_ids` share an id with the list
    bound to `param` (`where` must bind nothing itself). DuckDB's list_has_any(source_ids, list) walks
    the whole list for each row: 400,000 rows against 20,000 sources took 110 s, so a first cycle over a
    large bank (every document new) grew with its square. Unnesting the rows' lists and semi-joining
    the list is a hash join (0.07 s there)."""
    return (f"{where} AND id IN (SELECT id FROM (SELECT id, unnest(source_ids) AS s FROM objects WHERE {where}) "
            f"WHERE s IN (SELECT unnest({param}::VARCHAR[])))")


def sql_literal(value: object) -> str:
    """`value` as a quoted SQL string constant (quotes doubled), for statements that cannot bind it:
    ATTACH and SET, file paths in read_parquet or COPY, IN lists DuckDB looks up in an index."""
    return "'" + str(value).replace("'", "''") + "'"


def _linkable_names(obj: MemoryObject) -> list[str]:
    """Normalised names under which an entity or concept can be found from a question."""
    from smb_core.extract.base import blocking_keys

    if not hasattr(obj, "aliases"):
        return []
    return sorted({k for name in [obj.title, *obj.aliases] for k in blocking_keys(name)})
