"""Python's cyclic garbage collector and the objects a long step keeps alive from before it.

A full collection visits every object the collector tracks. An evolution phase starts with a few
hundred thousand of them alive that it will not free (Dagster's definitions, loaded modules and
models, the bank's caches), and its own allocations set off a full collection several times, each
visiting all of them again: 1.4-1.8 s of an incremental cycle on the 4,000-document bench bank, more
the more a cycle reads. `frozen_heap` hides what is alive when a step starts from the collector for
the step (`gc.freeze`) and gives it back after (`gc.unfreeze`), so garbage among it is collected as
before, only later: 0.5-0.7 s there, and the cycle about a second shorter in three alternated pairs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Run the block with the objects alive now out of the collector's sight. Not nested: the inner
    block's end would give back the outer block's objects too (harmless, only slower)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
