"""Context vectors of layer-1 names: merge and split compare the sentences names were found in."""

from __future__ import annotations

import numpy as np

from smb_core.bank import Bank
from smb_core.evolve.sentence_vectors import sentence_vectors
from smb_core.extract.base import claim_id
from smb_core.model import MemoryObject


def context_vectors(bank: Bank, objects: list[MemoryObject]) -> dict[str, np.ndarray]:
    """Vectors of the objects' descriptions: the sentence each name was first found in. That sentence is
    usually also a claim of the same document, whose vector the bank already holds (the same text, so the
    same vector): those are read back (embedding them all was a fifth of a first cycle), and the rest come
    from the bank's store of sentence vectors, which embeds only the sentences no cycle embedded before."""
    claim_of = {o.id: claim_id(o.source_ids[0], o.description) for o in objects if o.source_ids}
    stored = bank.vectors_of(sorted(set(claim_of.values())))
    out = {oid: stored[c] for oid, c in claim_of.items() if c in stored}
    rest = [o for o in objects if o.id not in out]
    out.update(zip([o.id for o in rest], sentence_vectors(bank, [o.description for o in rest])))
    return out
