"""The event date of each claim a timeline orders, kept in the bank's DuckDB.

A timeline is rebuilt from all of its subject's dated claims (up to `narrative.MAX_CANDIDATES`)
whenever a cycle's new claims name the subject, so a popular subject's older claims were parsed for
dates again in every cycle: about 1 s of an incremental cycle at 150k objects, against 0.13 s at
half that size (py-spy, the same 15 new documents). Stored under a key made of the text and the date
rules (`dates.py` itself), so changed rules never read a date the old ones found.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from smb_core.evolve import dates


def event_dates(bank, texts: Iterable[str]) -> dict[str, dates.DateMention | None]:
    """{text: its event date (or None)}: read from the bank, the missing ones parsed and stored."""
    by_key = {key(t): t for t in texts}
    if not by_key:
        return {}
    with bank.reading() as db:
        stored = db.event_dates(list(by_key))
    out, missing = {}, {}
    for k, text in by_key.items():
        if k in stored:
            try:
                out[text] = dates.DateMention(**json.loads(stored[k])) if stored[k] else None
                continue
            except (ValueError, TypeError):  # a damaged entry is derived data: parse the text again
                pass
        missing[k] = dates.event_date(text)
    if missing:
        with bank.writing() as db:
            db.add_event_dates({k: json.dumps(asdict(m)) if m else None for k, m in missing.items()}, rules())
        out.update({by_key[k]: m for k, m in missing.items()})
    return out


def key(text: str) -> str:
    return hashlib.sha1(f"{rules()}\n{text}".encode()).hexdigest()


@lru_cache(maxsize=1)
def rules() -> str:
    """The version of the date rules: a hash of the module that holds them."""
    return hashlib.sha1(Path(dates.__file__).read_bytes()).hexdigest()[:16]
