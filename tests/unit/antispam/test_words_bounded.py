"""A shared learned-words store that stalls does not stall scoring (words/bounded.py): a read
answers within its timeout or raises StorageError, and when every reader waits, at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from pochta.antispam.words import Words
from pochta.antispam.words.bounded import BoundedReads
from pochta.antispam.words.memory import MemoryWordStore
from pochta.errors import StorageError


class Stalled(MemoryWordStore):
    """Answers once ``go`` is set, as a paused database does once it is resumed."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()
        self.go.set()

    def counts(self, owner: int, words: Sequence[int]) -> dict[int, tuple[int, int]]:
        self.go.wait(30)
        return super().counts(owner, words)

    def totals(self, owner: int) -> tuple[int, int]:
        self.go.wait(30)
        return super().totals(owner)


def test_reads_answer_in_time_or_raise_and_a_busy_reader_pool_refuses_at_once() -> None:
    inner = Stalled()
    store = BoundedReads(inner, timeout=0.6, threads=2)  # room for a loaded machine below
    store.add(0, {1: (2, 0)}, (2, 0), day=1)  # writes go through as they are
    assert store.counts(0, [1]) == {1: (2, 0)} and store.totals(0) == (2, 0)
    inner.go.clear()  # the store stalls
    for _ in range(2):  # each waits its timeout, and leaves a reader waiting
        t0 = time.monotonic()
        with pytest.raises(StorageError, match=r"did not answer within 0\.6 s"):
            store.counts(0, [1])
        assert time.monotonic() - t0 < 3.0
    t0 = time.monotonic()
    with pytest.raises(StorageError, match="every reader is still waiting"):
        store.totals(0)
    assert time.monotonic() - t0 < 0.3  # at once: not the 0.6 s a read may wait
    inner.go.set()  # back: the waiting readers finish, reads answer again
    deadline = time.monotonic() + 5
    while True:
        try:
            assert store.totals(0) == (2, 0)
            break
        except StorageError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    store.close()


def test_a_stalled_store_leaves_the_letter_to_the_shipped_table() -> None:
    inner = Stalled()
    words = Words(BoundedReads(inner, timeout=0.1), buffered=False)
    words.learn([1], "spam")
    assert words.table(["a"], [1]).counts["a"] == (1, 0)
    inner.go.clear()
    with pytest.raises(StorageError):
        words.table(["a"], [1])  # the scanner catches it and scores with the shipped table
    inner.go.set()
