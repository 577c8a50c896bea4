"""Reading ahead for a client that fetches letter after letter (pochta.server.imapahead),
without a server: the window, what is kept, for how long, and the budget it holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pochta.budget import Budget
from pochta.server.imapahead import AHEAD_BYTES, AHEAD_MAX, AHEAD_MIN, AHEAD_SECONDS, ReadAhead
from pochta.server.imapstore import WHOLE, Opened
from pochta.types import FolderEntry, LetterFlag, StoredLetter


def opened(letter_id: int, size: int = 100, whole: bool = True) -> Opened:
    row = StoredLetter(
        letter_id, 1, "Inbox", size, 0.0, None, "", "", False, False, uid=uid(letter_id)
    )
    if whole:
        return Opened(row, WHOLE + b"x" * size)
    # a skeleton with one identity reference of 3 bytes (pochta.mime.skeleton's format)
    ref = bytes([0]) + b"k" * 32 + bytes([3]) + b"\0\0\0\0" + bytes([3, 0, 0, 0])
    return Opened(row, WHOLE[:5] + bytes([1]) + ref + b"y" * size)


def uid(letter_id: int) -> int:
    return letter_id + 1000


def entries(*letter_ids: int, moved: int = 0) -> list[FolderEntry]:
    return [FolderEntry(uid(i) + moved, i, LetterFlag.NONE) for i in letter_ids]


class Timers:
    """``call_later`` without a loop: the calls scheduled, run when the test says."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, Callable[[], None], Any]] = []

    def later(self, delay: float, fn: Callable[[], None]) -> Any:
        handle = Handle()
        self.calls.append((delay, fn, handle))
        return handle


class Handle:
    cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def ahead(budget: Budget | None = None) -> tuple[ReadAhead, Timers, list[float]]:
    now = [100.0]
    timers = Timers()
    return ReadAhead(budget or Budget(1 << 30), timers.later, lambda: now[0]), timers, now


def test_the_window_opens_only_on_a_fetch_that_goes_on_and_doubles() -> None:
    a, _, _ = ahead()
    folder = object()
    assert a.plan(folder, [0], 1000) == range(0)  # the first: nothing ahead
    a.fetched(folder, [0])
    assert a.plan(folder, [1], 1000) == range(2, 2 + AHEAD_MIN)
    a.fetched(folder, [1])
    sizes = []
    for pos in range(2, 12):
        sizes.append(len(a.plan(folder, [pos], 1000)))
        a.fetched(folder, [pos])
    assert sizes[:4] == [2 * AHEAD_MIN, 4 * AHEAD_MIN, 8 * AHEAD_MIN, AHEAD_MAX]
    assert max(sizes) == AHEAD_MAX
    assert a.plan(folder, [500], 1000) == range(0)  # a jump: nothing, and the window closes
    a.fetched(folder, [500])
    assert a.plan(folder, [501], 1000) == range(502, 502 + AHEAD_MIN)
    a.fetched(folder, [501])
    assert a.plan(object(), [502], 1000) == range(0)  # another folder selected
    a.fetched(folder, [997])
    assert a.plan(folder, [998], 1000) == range(999, 1000)  # not past the folder's end
    assert a.plan(folder, [0, 1, 2, 3, 4], 1000) == range(0)  # more than a few: no


def test_kept_letters_answer_for_their_folder_only_and_all_or_none() -> None:
    a, _, _ = ahead()
    folder = object()
    a.keep(folder, {i: opened(i) for i in (5, 6, 7)})
    got = a.get(folder, entries(6, 7))
    assert got is not None and [o.letter.id for o in got] == [6, 7]
    assert a.get(folder, entries(7, 8)) is None  # 8 was not read ahead
    assert a.get(object(), entries(6)) is None  # another selection
    assert a.get(folder, entries(6, moved=1)) is None  # the id now stands for another letter


def test_only_letters_whole_in_their_skeleton_are_kept_and_no_more_than_the_bound() -> None:
    a, _, _ = ahead()
    folder = object()
    a.keep(folder, {1: opened(1), 2: opened(2, whole=False), 3: opened(3)})
    assert a.get(folder, entries(1, 3)) is not None
    assert a.get(folder, entries(2)) is None  # would read a blob: never answered on the loop
    big = AHEAD_BYTES // 4
    a.keep(folder, {i: opened(i, size=big) for i in range(10, 20)})
    assert a.get(folder, entries(10, 11, 12)) is not None
    assert a.get(folder, entries(13)) is None
    assert a.get(folder, entries(1)) is None  # replaced by the newer read


def test_kept_letters_hold_budget_and_give_it_back_when_dropped_or_old() -> None:
    budget = Budget(10_000)
    a, timers, now = ahead(budget)
    folder = object()
    a.keep(folder, {1: opened(1, 1000), 2: opened(2, 1000)})
    assert budget.used == 2 * (1000 + len(WHOLE))
    ((delay, fn, _),) = timers.calls
    assert delay == AHEAD_SECONDS
    fn()  # the timer: given back
    assert budget.used == 0 and a.get(folder, entries(1)) is None
    a.keep(folder, {1: opened(1, 1000)})
    now[0] += AHEAD_SECONDS + 0.1  # too old, though its timer has not run yet
    assert a.get(folder, entries(1)) is None and budget.used == 0
    assert timers.calls[-1][2].cancelled
    a.keep(folder, {1: opened(1, 1000)})
    a.forget()
    assert budget.used == 0


def test_nothing_is_kept_when_the_budget_is_spent() -> None:
    budget = Budget(10_000)
    assert budget.take(9_500)
    a, timers, _ = ahead(budget)
    folder = object()
    a.keep(folder, {1: opened(1, 1000)})
    assert a.get(folder, entries(1)) is None and budget.used == 9_500 and not timers.calls
