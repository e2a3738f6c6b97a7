import gc
import weakref

import pytest

from smb_core.heap import frozen_heap


class _Node:
    """A cycle of these is garbage only the cyclic collector frees."""

    def __init__(self) -> None:
        self.other = self


def test_frozen_heap_hides_older_objects_during_the_block_and_collects_their_garbage_after():
    gc.collect()
    old = _Node()
    gone = weakref.ref(old)
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        del old  # garbage now, but frozen: a collection inside the block leaves it
        gc.collect()
        assert gone() is not None
        young = _Node()
        young_gone = weakref.ref(young)
        del young
        gc.collect()
        assert young_gone() is None  # what the block allocates is collected as usual
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_frozen_heap_gives_the_objects_back_when_the_block_fails():
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("phase failed")
    assert gc.get_freeze_count() == 0
