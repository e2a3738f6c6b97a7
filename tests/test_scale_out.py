"""Scaling past one machine, on real servers started for the test: the Dagster instance on PostgreSQL
(deploy/dagster-postgres.yaml), vectors in a Chroma server, and the ingest job's steps executed by
Celery workers over Redis (deploy/celery_definitions.py). See "Scaling past one machine" in README."""

from __future__ import annotations

import glob
import json
import os
import pwd
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import dagster as dg
import pytest
import yaml

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.settings import Settings, get_settings
from smb_pipeline.defs.ingest.sensors import range_tags
from smb_pipeline.defs.partitions import documents
from smb_pipeline.runner import RUN_LIMITS, dagster_home, instance_for, instance_yaml, run_ingest
from tests.conftest import REPO, write_doc

DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent  # the venv's console scripts: chroma, dagster, dagster-celery
DOCS = {
    "aurora.md": "# The Aurora Index\n\nTomas Varga designed the Aurora index in Berlin in 2019.\n",
    "lumen labs.md": "# Lumen Labs\n\nMara Okafor founded Lumen Labs in Lisbon in 2017. "
                     "Lumen Labs builds vector databases.\n",
}


# ---- helpers ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_binary(name: str, package: str, debian_glob: str) -> str:
    """A server binary from PATH or Debian's package folder. Missing: a skip on a developer's machine,
    a failure in CI, whose .ci/run installs the package."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(debian_glob), reverse=True)), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; .ci/run should have installed {package}")
        pytest.skip(f"{name} is not installed (apt-get install {package})")
    return found


def _start(command: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> subprocess.Popen:
    """A server in its own process group, so that teardown stops it and everything it forked."""
    with log.open("wb") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    """Stop a server and whatever it forked (its process group): SIGTERM, then SIGKILL after 30 s."""
    for sig, seconds in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        deadline = time.monotonic() + seconds
        try:
            os.killpg(process.pid, sig)
            while time.monotonic() < deadline:
                process.poll()  # reap the leader, so that only live members keep the group
                os.killpg(process.pid, 0)
                time.sleep(0.1)
        except ProcessLookupError:  # the group is gone
            break
    process.wait(timeout=10)


def _wait_until(ready: Callable[[], bool], process: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}:\n{log.read_text()}")
        try:
            if ready():
                return
        except Exception:  # not listening yet
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{process.args[0]} did not become ready in {seconds}s:\n{log.read_text()}")


def _corpus(folder: Path) -> list[str]:
    for name, text in DOCS.items():
        write_doc(folder, name, text)
    return [f.partition_key for f in scan(folder)]


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """SMB_* variables set by a test reach the Dagster resource through `get_settings()`."""
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


# ---- DAGSTER_HOME and the committed instance config -------------------------------------------


def test_smb_uses_dagster_home_when_set_and_the_bank_home_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    bank = tmp_path / "bank"
    assert dagster_home(bank) == bank.resolve() / ".dagster"
    home = bank.resolve() / ".dagster"
    assert (home / "dagster.yaml").read_text() == instance_yaml(home)

    shared = tmp_path / "shared-home"
    shared.mkdir()
    (shared / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(shared))
    assert dagster_home(tmp_path / "other-bank") == shared
    assert (shared / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"  # the user's config is kept
    assert not (tmp_path / "other-bank").exists()

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "new-home"))  # an empty home gets smb's config
    assert (dagster_home(bank) / "dagster.yaml").read_text() == instance_yaml(tmp_path / "new-home")


def test_smb_keeps_its_own_instance_config_current_and_leaves_edited_ones_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    old = tmp_path / "old-bank"
    config = dagster_home(old) / "dagster.yaml"
    config.write_text("# Written by `smb`. Runs that write the memory bank share the pool `smb_bank`.\n" + RUN_LIMITS)
    assert (dagster_home(old) / "dagster.yaml").read_text() == instance_yaml(old / ".dagster")  # upgraded

    moved = tmp_path / "moved-bank"
    old.rename(moved)
    home = dagster_home(moved)
    assert str(moved / ".dagster" / "history" / "runs") in (home / "dagster.yaml").read_text()
    assert str(old) not in (home / "dagster.yaml").read_text()

    edited = RUN_LIMITS.replace("limit: 1", "limit: 2")  # the user deleted smb's first line and edited
    (home / "dagster.yaml").write_text(edited)
    assert (dagster_home(moved) / "dagster.yaml").read_text() == edited


def test_the_postgres_instance_config_keeps_smbs_run_limits():
    deploy = yaml.safe_load((DEPLOY / "dagster-postgres.yaml").read_text())
    ours = yaml.safe_load(RUN_LIMITS)
    assert set(deploy) == set(ours) | {"storage"}
    assert {k: deploy[k] for k in ours} == ours
    connection = deploy["storage"]["postgres"]["postgres_db"]
    assert connection.pop("scheme") == "postgresql+psycopg2"
    assert all(list(value) == ["env"] for value in connection.values())  # no credentials in the repo


def test_the_celery_code_location_sends_every_job_to_celery():
    defs = runpy.run_path(str(DEPLOY / "celery_definitions.py"))["defs"]()
    dg.Definitions.validate_loadable(defs)
    assert {defs.resolve_job_def(name).executor_def.name for name in ("ingest", "evolve")} == {"smb_celery"}


# ---- 1. the Dagster instance on PostgreSQL ----------------------------------------------------


@pytest.fixture
def postgres() -> Iterator[int]:
    """A throwaway PostgreSQL server on 127.0.0.1; yields its port. initdb refuses to run as root,
    so as root the server runs as `nobody`, in a folder under /tmp that `nobody` can reach."""
    bin_dir = Path(_server_binary("initdb", "postgresql", "/usr/lib/postgresql/*/bin/initdb")).resolve().parent
    root = Path(tempfile.mkdtemp(prefix="smb-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = ["runuser", "-u", "nobody", "--"]
    data, port = root / "data", _free_port()

    def pg(*args: str, check: bool = True) -> None:
        subprocess.run([*as_user, *args], cwd=root, check=check, capture_output=True, timeout=120)

    try:
        pg(str(bin_dir / "initdb"), "-D", str(data), "-U", "smb", "--auth=trust", "--no-locale", "-E", "UTF8")
        pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
           "-o", f"-h 127.0.0.1 -p {port} -k {root}", "start")
        import psycopg2

        with closing(psycopg2.connect(host="127.0.0.1", port=port, user="smb", dbname="postgres")) as conn:
            conn.autocommit = True  # CREATE DATABASE refuses to run in a transaction
            conn.cursor().execute("CREATE DATABASE dagster")
        yield port
    finally:
        pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_ingest_records_its_runs_in_postgres(postgres, settings, tmp_path, monkeypatch):
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage
    import psycopg2

    home = tmp_path / "dagster-home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster-postgres.yaml", home / "dagster.yaml")
    for name, value in {"HOST": "127.0.0.1", "PORT": str(postgres), "DB": "dagster", "USERNAME": "smb",
                        "PASSWORD": "unused-with-trust-auth"}.items():
        monkeypatch.setenv(f"DAGSTER_PG_{name}", value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    keys = _corpus(settings.kbmd_dir)

    with instance_for(settings.memory_bank_dir) as instance:  # what `smb ingest` and `smb evolve` open
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        report = run_ingest(settings, instance=instance)
    assert report.success, report.failures
    assert not (settings.memory_bank_dir / ".dagster").exists()
    assert list(home.rglob("*.db")) == []  # no SQLite run or event storage beside it

    with closing(psycopg2.connect(host="127.0.0.1", port=postgres, user="smb", dbname="dagster")) as conn:
        cursor = conn.cursor()
        cursor.execute("SELECT run_id, status FROM runs")
        assert sorted(cursor.fetchall()) == sorted((run_id, "SUCCESS") for run_id in report.run_ids)
        cursor.execute("SELECT asset_key, partition FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
        materialized = cursor.fetchall()
        cursor.execute("SELECT partition FROM dynamic_partitions WHERE partitions_def_name = %s", [documents.name])
        partitions = [row[0] for row in cursor.fetchall()]
    assert sorted(materialized) == sorted((json.dumps([asset]), key) for asset in ("source", "extracted")
                                          for key in keys)
    assert sorted(partitions) == sorted(keys)
    assert Bank(settings=settings).status()["documents"] == 2


# ---- 2. vectors in a Chroma server ------------------------------------------------------------


@pytest.fixture
def chroma_server(tmp_path) -> Iterator[int]:
    """`chroma run` on a free port of 127.0.0.1, persisting under tmp_path; yields the port."""
    import httpx

    port, log = _free_port(), tmp_path / "chroma.log"
    server = _start([str(BIN / "chroma"), "run", "--path", str(tmp_path / "chroma-server"),
                     "--host", "127.0.0.1", "--port", str(port)], log)
    try:
        _wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").status_code == 200, server, log)
        yield port
    finally:
        _stop(server)


@pytest.mark.slow
def test_ingest_and_recall_with_vectors_in_a_chroma_server(chroma_server, tmp_path, monkeypatch, fresh_settings):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    from smb_core.query import MemoryBank
    from smb_core.stores.vectors import COLLECTION

    # The Dagster run reads the server's address from the environment, as `smb ingest` does.
    monkeypatch.setenv("SMB_CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("SMB_CHROMA_PORT", str(chroma_server))
    settings = Settings(memory_bank_dir=tmp_path / "bank", kbmd_dir=tmp_path / "kbmd", lock_timeout_seconds=20)
    assert (settings.chroma_host, settings.chroma_port) == ("127.0.0.1", chroma_server)
    _corpus(settings.kbmd_dir)

    with dg.instance_for_test() as instance:
        report = run_ingest(settings, instance=instance)
    assert report.success, report.failures

    status = Bank(settings=settings).status()
    assert status["consistent"] is True and status["documents"] == 2
    assert not (settings.memory_bank_dir / "chroma").exists()  # no embedded store beside the bank
    server = chromadb.HttpClient(host="127.0.0.1", port=chroma_server, settings=ChromaSettings(anonymized_telemetry=False))
    assert server.get_collection(COLLECTION).count() == status["stores"]["texts"] > 0

    with MemoryBank.open(settings.memory_bank_dir, settings=settings) as bank:
        assert bank.recall_documents("Who founded Lumen Labs?", k=2)[0].path == "lumen labs.md"
        hit = bank.recall("Where was the Aurora index designed?", k=3)[0]
        assert hit.source.path == "aurora.md"


# ---- 3. the ingest job's steps on Celery workers ----------------------------------------------


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    """A throwaway Redis server on a free port of 127.0.0.1 (the Celery broker); yields its URL."""
    import redis

    binary = _server_binary("redis-server", "redis-server", "/usr/bin/redis-server")
    port, log = _free_port(), tmp_path / "redis.log"
    server = _start([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                     "--dir", str(tmp_path)], log)
    try:
        _wait_until(lambda: redis.Redis(host="127.0.0.1", port=port).ping(), server, log)
        yield f"redis://127.0.0.1:{port}"
    finally:
        _stop(server)


@pytest.mark.slow
def test_ingest_steps_run_on_a_celery_worker(redis_url, settings, tmp_path):
    home = tmp_path / "dagster-home"
    keys = _corpus(settings.kbmd_dir)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SMB_", "DAGSTER_", "CELERY_"))}
    base |= {"DAGSTER_HOME": str(home), "CELERY_BROKER_URL": f"{redis_url}/0",
             "CELERY_RESULT_BACKEND": f"{redis_url}/1"}
    # Only the worker knows where the bank and corpus are: the orchestrating process never opens them.
    worker_env = base | {"SMB_MEMORY_BANK_DIR": str(settings.memory_bank_dir), "SMB_KBMD_DIR": str(settings.kbmd_dir)}
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(home))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(documents.name, keys)  # what the kbmd sensor does first

    log = tmp_path / "worker.log"
    worker = _start([str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
                     "-y", str(DEPLOY / "celery-worker.yaml"), "--", "--concurrency=1"], log, env=worker_env)
    orchestrator_dir = tmp_path / "orchestrator"
    orchestrator_dir.mkdir()
    try:
        run = subprocess.Popen([str(BIN / "dagster"), "job", "execute", "-f", str(DEPLOY / "celery_definitions.py"),
                                "-a", "defs", "-j", "ingest", "--tags", json.dumps(range_tags(keys[0], keys[-1]))],
                               cwd=orchestrator_dir, env=base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            output, _ = run.communicate(timeout=300)
        finally:
            if run.poll() is None:  # timed out
                run.kill()
                run.wait()
        assert run.returncode == 0, output.decode()[-3000:] + "\n--- worker ---\n" + log.read_text()[-3000:]
    finally:
        _stop(worker)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (record,) = instance.get_run_records()
        assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        steps = instance.all_logs(record.dagster_run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)
        assert {e.step_key for e in steps} >= {"source", "extracted"}
        assert run.pid not in {e.dagster_event.pid for e in steps}  # the steps ran in the worker's processes
        for asset in ("source", "extracted"):
            latest = instance.get_latest_materialization_event(dg.AssetKey(asset))
            assert latest is not None and latest.run_id == record.dagster_run.run_id
        materialized = instance.get_materialized_partitions(dg.AssetKey("extracted"))
    assert materialized == set(keys)
    assert list(orchestrator_dir.iterdir()) == []
    status = Bank(settings=settings).status()
    assert status["consistent"] is True and status["documents"] == 2
