"""The server-wide budget of bytes in flight (pochta.budget): never more than its total
taken, and every share gives back exactly what it took, whatever order things happen in."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.budget import Budget


def test_take_is_all_or_nothing_and_give_returns_it() -> None:
    budget = Budget(100)
    assert budget.take(60) and budget.used == 60
    assert not budget.take(41)  # not a part of it either
    assert budget.used == 60 and budget.free == 40
    assert budget.take(40) and budget.free == 0
    budget.give(100)
    assert budget.used == 0
    with pytest.raises(ValueError, match="giving back 1 bytes of 0"):
        budget.give(1)  # more than was taken
    with pytest.raises(ValueError, match="negative"):
        budget.take(-1)


def test_a_share_gives_back_all_it_took_once() -> None:
    budget = Budget(10)
    share = budget.share()
    assert share.take(4) and share.take(5) and not share.take(2)
    assert (share.held, budget.used) == (9, 9)
    share.release()
    share.release()  # idempotent
    assert (share.held, budget.used) == (0, 0)


Step = tuple[int, int]  # (share index, n): n > 0 takes n, 0 releases


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(0, 1000),
    steps=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 400)), max_size=60),
)
def test_shares_never_hold_more_than_the_total(total: int, steps: list[Step]) -> None:
    budget = Budget(total)
    shares = [budget.share() for _ in range(5)]
    for i, n in steps:
        before = budget.used
        if n:
            took = shares[i].take(n)
            assert took == (before + n <= total)
        else:
            shares[i].release()
        assert budget.used == sum(s.held for s in shares) <= total
    for share in shares:
        share.release()
    assert budget.used == 0


def test_threads_taking_at_once_never_pass_the_total() -> None:
    budget = Budget(1000)
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal peak
        share = budget.share()
        for _ in range(2000):
            if share.take(7):
                with lock:
                    peak = max(peak, budget.used)
            if share.held > 50:
                share.release()
        share.release()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.used == 0 and peak <= 1000
