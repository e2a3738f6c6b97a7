"""spaCy parses of the sentences the contradiction rules judge, kept in the bank's DuckDB.

An incremental cycle judges its new claims against older claims about the same subjects. Without a
store it parsed those older claims again in every cycle, a cost that grew with the bank (10 of the
14 s the contradiction phase took in an incremental cycle at 150k objects); reading a stored parse is
about five times cheaper than parsing (2.6 against 12.8 s for 3,000 claims). A parse
is stored without its tensor (no rule reads it), zlib-compressed (about 1.3 KB), under a key made of
the text and the spaCy pipeline that parsed it, so an upgraded model never reads an older parse.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from functools import lru_cache, partial

from smb_core.extract.nlp import load_spacy

_EXCLUDE = ["tensor", "user_data"]


def load(bank, texts: Iterable[str]) -> dict:
    """{text: spaCy Doc} for the texts whose parse the bank has (one short read session)."""
    from spacy.tokens import Doc

    by_key = {key(t): t for t in texts}
    if not by_key:
        return {}
    with bank.reading() as db:
        stored = db.parses(list(by_key))
    vocab = load_spacy().vocab
    out = {}
    for k, blob in stored.items():
        try:
            out[by_key[k]] = Doc(vocab).from_dict(_unpack(zlib.decompress(blob)), exclude=_EXCLUDE)
        except (zlib.error, ValueError):  # a damaged entry is derived data: the caller parses the text again
            continue
    return out


def save(bank, docs: dict) -> None:
    """Store the parses ({text: spaCy Doc}) (one short write session)."""
    if docs:
        rows = {key(text): zlib.compress(doc.to_bytes(exclude=_EXCLUDE), 1) for text, doc in docs.items()}
        with bank.writing() as db:
            db.add_parses(rows, _pipeline())


def _unpack(data: bytes) -> dict:
    """What `Doc.from_bytes` decodes, minus its cost: srsly looks its msgpack decoders up in the entry-point
    registry on every call, which was 90% of loading a parse (22 of 25 s for 65k parses at 730k objects)."""
    unpackb, hook = _unpacker()
    return unpackb(data, raw=False, use_list=True, object_hook=hook)


@lru_cache(maxsize=1)
def _unpacker():
    """srsly's msgpack unpacker with its decoders (numpy arrays) chained once, as `srsly.msgpack.unpackb`
    chains them on each call."""
    from srsly import msgpack

    hook = None
    for decoder in msgpack.msgpack_decoders.get_all().values():
        hook = partial(decoder, chain=hook)
    return msgpack._unpacker.unpackb, hook


def key(text: str) -> str:
    return hashlib.sha1(f"{_pipeline()}\n{text}".encode()).hexdigest()


@lru_cache(maxsize=1)
def _pipeline() -> str:
    import spacy

    meta = load_spacy().meta
    return f"{meta['lang']}_{meta['name']}-{meta['version']}/spacy-{spacy.__version__}"
