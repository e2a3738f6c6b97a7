"""`smb`: the command line. Reads go straight to `smb_core`; ingest runs through Dagster (imported
lazily from `smb_pipeline`, so read commands start fast and `smb_core` stays free of Dagster)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from smb_core.settings import Settings, get_settings


def _settings(args: argparse.Namespace) -> Settings:
    updates = {}
    if getattr(args, "bank", None):
        updates["memory_bank_dir"] = Path(args.bank)
    if getattr(args, "source", None):
        updates["kbmd_dir"] = Path(args.source)
    return get_settings().model_copy(update=updates)


def cmd_init(args: argparse.Namespace) -> int:
    from smb_core.bank import Bank

    settings = _settings(args)
    Bank(settings=settings).init()
    print(f"memory bank ready at {Path(settings.memory_bank_dir).resolve()}")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    from smb_core.bank import Bank
    from smb_pipeline.runner import run_ingest

    settings = _settings(args)
    if not Path(settings.kbmd_dir).is_dir():
        print(f"error: corpus folder {settings.kbmd_dir} does not exist", file=sys.stderr)
        return 1
    report = run_ingest(settings, log_level=_dagster_log_level(args))
    _say_released(report.released)
    bank = Bank(settings=settings)
    with bank.reading() as db:
        rejected = db.sql("SELECT path, reason FROM rejections WHERE run_id IN (SELECT unnest(?)) ORDER BY path",
                          [report.run_ids])
        new_versions = db.sql("SELECT count(*) FROM sources WHERE run_id IN (SELECT unnest(?))", [report.run_ids])
        objects = db.sql("SELECT status = 'superseded', type, count(*) FROM objects WHERE run_id IN (SELECT unnest(?)) "
                         "GROUP BY ALL ORDER BY ALL", [report.run_ids])
        unchanged = db.sql("SELECT path, arg_max(reason, recorded_at) FROM rejections WHERE path IN (SELECT unnest(?)) "
                           "GROUP BY path ORDER BY path", [report.still_rejected])
    written = ", ".join(f"{n} {t}" for superseded, t, n in objects if not superseded) or "none"
    # objects of an older version, or that extracting a document again no longer found
    superseded = ", ".join(f"{n} {t}" for superseded, t, n in objects if superseded)
    print(f"scanned {report.documents} documents in {settings.kbmd_dir}: {new_versions[0][0]} new versions; "
          f"objects written: {written}" + (f"; superseded: {superseded}" if superseded else ""))
    for path, reason in rejected:
        print(f"rejected: {path}: {reason}", file=sys.stderr)
    for path, reason in unchanged:
        print(f"rejected before, unchanged, not tried again: {path}: {reason}", file=sys.stderr)
    for failure in report.failures:
        print(f"error: {failure}", file=sys.stderr)
    _say_checks(report)
    if report.run_ids:
        print(f"dagster runs: {', '.join(report.run_ids)} (see them with `smb ui`)")
    else:
        print(f"dagster runs: none (every {'other ' if unchanged else ''}file is already in the bank)")
    if not report.success or report.errors_found:
        return 1
    return 2 if rejected or unchanged else 0


def _existing_bank(settings: Settings) -> Settings:
    """The settings, once their bank folder holds a bank: a mistyped --bank must not start a new one."""
    from smb_core.bank import bank_exists

    root = Path(settings.memory_bank_dir)
    if not bank_exists(root):
        raise FileNotFoundError(f"no memory bank at {root} (run `smb ingest` or `smb init` first)")
    return settings


def cmd_evolve(args: argparse.Namespace) -> int:
    from smb_pipeline.runner import run_evolve

    settings = _existing_bank(_settings(args))
    key, report = run_evolve(settings, log_level=_dagster_log_level(args))
    _say_released(report.released)
    with _bank(settings).reading() as db:
        counts = db.sql("SELECT counts FROM cycles WHERE key = ?", [key])
    for failure in report.failures:
        print(f"error: {failure}", file=sys.stderr)
    _say_checks(report)
    done = "failed" if not report.success else "done, but checks failed" if report.errors_found else "done"
    print(f"cycle {key}: {done} (dagster run {report.run_ids[0]})")
    if counts and counts[0][0]:
        print(counts[0][0])
    return 0 if report.success and not report.errors_found else 1


def _say_checks(report) -> None:
    for check in report.failed_checks:
        print(f"{'error' if check.error else 'warning'}: check {check.name} failed: {check.description}",
              file=sys.stderr)


def _dagster_log_level(args: argparse.Namespace) -> str:
    """Dagster's console log only with --verbose: the summary `smb` prints names every rejection and
    failure once, where Dagster's log repeated each with its stack trace (the UI keeps the full log)."""
    return "INFO" if args.verbose else "CRITICAL"


def _say_released(run_ids: list[str]) -> None:
    for run_id in run_ids:
        print(f"note: dagster run {run_id} had stopped with its process; marked failed, and the bank freed "
              "for the next runs (its finished partitions stay; this run redid the rest)", file=sys.stderr)


def cmd_contradictions(args: argparse.Namespace) -> int:
    from smb_core.query import MemoryBank

    with MemoryBank.open(_settings(args).memory_bank_dir) as bank:
        items = bank.contradictions()
    if args.json:
        print(json.dumps(items, indent=2, ensure_ascii=False))
        return 0
    for item in items:
        print(f"[{item['resolution']}] {item['attribute'] or 'conflict'}: {item['id']}")
        for side in item["sides"]:
            print(f"   - {side['statement']}  ({side['source']['path'] if side['source'] else '?'})")
    if not items:
        print("no contradictions")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from smb_core.query import MemoryBank

    settings = _existing_bank(_settings(args))
    with MemoryBank.open(settings.memory_bank_dir, read_only=False, agent=args.agent) as bank:
        contradiction = bank.resolve(args.id, args.resolution, args.because)
    print(f"{contradiction.id}: {contradiction.resolution} ({contradiction.explanation})")
    return 0


def _bank(settings: Settings):
    from smb_core.bank import Bank

    return Bank(settings=settings)


def cmd_status(args: argparse.Namespace) -> int:
    from smb_core.bank import Bank

    status = Bank(settings=_existing_bank(_settings(args))).status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(f"documents: {status['documents']} ({status['versions']} versions, {status['rejected']} rejected)")
        print("objects:   " + ", ".join(f"{n} {t}" for t, n in status["types"].items()))
        print("stores:    " + ", ".join(f"{k}={v}" for k, v in status["stores"].items()))
        if status["claims_awaiting_contradiction_check"]:
            print(f"waiting:   {status['claims_awaiting_contradiction_check']} claims for the contradiction check "
                  "(SMB_CONTRADICTION_CLAIMS_PER_CYCLE a cycle)")
        print(f"consistent: {status['consistent']}")
        if status["changed_during_check"]:
            print("(the bank was written during the check: each object was checked, the store counts not compared)")
    return 0 if status["consistent"] else 1


def cmd_ui(args: argparse.Namespace) -> int:
    from smb_pipeline.runner import dagster_home, use_compact_planned_events

    settings = _settings(args)
    use_compact_planned_events()
    os.environ["DAGSTER_HOME"] = str(dagster_home(settings.memory_bank_dir))
    os.environ["SMB_MEMORY_BANK_DIR"] = str(Path(settings.memory_bank_dir).resolve())
    os.environ["SMB_KBMD_DIR"] = str(Path(settings.kbmd_dir).resolve())
    command = ["dagster", "dev", "-m", "smb_pipeline.definitions", "-p", str(args.port)]
    os.execvp(command[0], command)


def cmd_recall(args: argparse.Namespace) -> int:
    from smb_core.query import MemoryBank

    with MemoryBank.open(_settings(args).memory_bank_dir) as bank:
        if args.documents:
            hits = bank.recall_documents(args.question, k=args.k)
            if args.json:
                print(json.dumps([h.as_json() for h in hits], indent=2, ensure_ascii=False))
            for rank, hit in enumerate([] if args.json else hits, start=1):
                print(f"{rank}. {hit.title}  ({hit.path}, score {hit.score:.4f})")
            return 0
        hits = bank.recall(args.question, k=args.k)
    if args.json:
        print(json.dumps([h.as_json() for h in hits], indent=2, ensure_ascii=False))
        return 0
    for rank, hit in enumerate(hits, start=1):
        where = f"{hit.source.path}:{hit.source.span.line_start}" if hit.source and hit.source.span else "-"
        flag = "  [DISPUTED]" if hit.disputed else ""
        print(f"{rank}. [{hit.object.type.value}] {hit.object.text()[:160]}  ({where}, {hit.score:.3f}){flag}")
    return 0


def cmd_remember(args: argparse.Namespace) -> int:
    from smb_core.query import MemoryBank

    with MemoryBank.open(_settings(args).memory_bank_dir, read_only=False, agent=args.agent) as bank:
        doc = bank.remember(args.text, title=args.title, tags=args.tag)
    print(f"remembered as {doc.id} ({doc.path})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="smb", description="Sovereign Memory Bank: evolving memory for agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--bank", help="memory bank folder (default: SMB_MEMORY_BANK_DIR or ./memory-bank)")
        p.set_defaults(handler=handler)
        return p

    add("init", cmd_init, "create an empty memory bank")
    p = add("ingest", cmd_ingest, "ingest the corpus through Dagster (layers 0-1)")
    p.add_argument("--source", help="corpus folder (default: SMB_KBMD_DIR or ./kbmd)")
    p.add_argument("--verbose", action="store_true", help="also print Dagster's run log")
    p = add("status", cmd_status, "counts per store and whether the stores agree")
    p.add_argument("--json", action="store_true")
    p = add("ui", cmd_ui, "open the Dagster UI on this bank's runs")
    p.add_argument("--source", help="corpus folder the sensor watches")
    p.add_argument("--port", type=int, default=3000)
    p = add("evolve", cmd_evolve, "run one evolution cycle through Dagster (layers 2-6)")
    p.add_argument("--verbose", action="store_true", help="also print Dagster's run log")
    p = add("contradictions", cmd_contradictions, "list contradictions with both sides and their sources")
    p.add_argument("--json", action="store_true")
    p = add("resolve", cmd_resolve, "settle a contradiction (it is kept; the dispute flags it caused clear)")
    p.add_argument("id", help="contradiction id (ctr-...)")
    p.add_argument("--as", dest="resolution", choices=["explained", "superseded", "open"], required=True)
    p.add_argument("--because", required=True, help="the explanation recorded with the resolution")
    p.add_argument("--agent", default="cli", help="name recorded as the resolution's author")
    p = add("recall", cmd_recall, "hybrid recall: lexical + vector + knowledge graph")
    p.add_argument("question")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--documents", action="store_true", help="rank layer-0 documents instead of memory objects")
    p.add_argument("--json", action="store_true")
    p = add("remember", cmd_remember, "store an agent's note (extracted like a document)")
    p.add_argument("text")
    p.add_argument("--title")
    p.add_argument("--tag", action="append", default=[])
    p.add_argument("--agent", default="cli", help="name recorded as the note's provenance")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pydantic import ValidationError

    from smb_core.bank import EmbedderMismatchError
    from smb_core.corpus import DocumentError
    from smb_core.locking import BankBusyError
    from smb_core.model import ModelError
    from smb_core.query import QueryError

    try:
        get_settings()
    except ValidationError as exc:  # a setting (SMB_... or .env) of the wrong kind: say which, no traceback
        for problem in exc.errors():
            name = "SMB_" + "_".join(str(part) for part in problem["loc"]).upper()
            print(f"error: setting {name}: {problem['msg']} (got {problem.get('input')!r})", file=sys.stderr)
        return 1
    try:
        return args.handler(args)
    except (BankBusyError, DocumentError, EmbedderMismatchError, FileNotFoundError, ModelError, QueryError,
            PermissionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyError as exc:  # an id that is not in the bank
        print(f"error: {exc.args[0]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
