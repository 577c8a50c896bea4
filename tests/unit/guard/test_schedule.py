"""The account-wide schedule of password checks (issue 27): free checks, then a growing delay
up to a spacing, never more than ``checks`` in any period, however many ask and whenever."""

from __future__ import annotations

import bisect
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.errors import InvalidInput
from pochta.guard.schedule import RAMP, SlotState, check, counted, expires, reserve, spacing
from pochta.types import Schedule

DEFAULT = Schedule("account", free=10, checks=100, period=3600.0, max_wait=5.0)


def run(schedule: Schedule, arrivals: list[float]) -> list[float]:
    """The slots (times) granted to attempts arriving at ``arrivals`` (in order)."""
    state: SlotState | None = None
    slots = []
    for now in arrivals:
        slot, state = reserve(schedule, state, now)
        if slot.granted:
            assert 0.0 <= slot.wait <= schedule.max_wait
            slots.append(now + slot.wait)
        else:
            assert slot.retry_after > 0.0
    return slots


def most_in_a_window(slots: list[float], window: float) -> int:
    slots = sorted(slots)
    return max(
        (bisect.bisect_left(slots, s + window) - i for i, s in enumerate(slots)), default=0
    )


def test_free_checks_pass_at_once_then_the_delay_grows_to_the_spacing() -> None:
    assert spacing(DEFAULT) == 48.0  # 3600 / (100 - 2 * 10 - 5)
    state: SlotState | None = None
    for i in range(10):  # ten checks at the same moment: a quiet account's free ones
        slot, state = reserve(DEFAULT, state, 0.0)
        assert slot.granted and slot.wait == 0.0 and slot.checks == i + 1
    gaps = []
    now = 0.0
    for _ in range(8):  # each attempt comes exactly when the next slot is free
        assert state is not None
        now = state.next
        slot, state = reserve(DEFAULT, state, now)
        assert slot.granted and slot.wait == 0.0
        assert state is not None
        gaps.append(round(state.next - now, 1))
    # 48 / 16, / 8 ... 48 (a little less while the checks counted drain between them)
    assert gaps == pytest.approx([3.0, 6.0, 12.0, 24.0, 48.0, 48.0, 48.0, 48.0], rel=0.1)


def test_a_slot_within_max_wait_is_waited_for_a_later_one_refused_and_not_counted() -> None:
    state: SlotState | None = None
    for _ in range(11):
        _, state = reserve(DEFAULT, state, 100.0)
    assert state is not None and state.next == pytest.approx(103.0)
    slot, state = reserve(DEFAULT, state, 100.0)
    assert slot.granted and slot.wait == pytest.approx(3.0)  # waits 3 s for its slot
    assert state is not None
    before = state
    refused, after = reserve(DEFAULT, state, 100.0)  # the next slot is 9 s away
    assert not refused.granted and refused.retry_after == pytest.approx(4.0)  # 9 - 5
    assert after == before  # a refusal counts nothing and moves no slot
    back, _ = reserve(DEFAULT, after, 104.0)  # back when told: the slot, 5 s ahead
    assert back.granted and back.wait == pytest.approx(5.0)


def test_checks_drain_free_per_period_and_the_account_is_quiet_again() -> None:
    state: SlotState | None = None
    now = 0.0
    for _ in range(40):
        slot, state = reserve(DEFAULT, state, now)
        now += slot.wait if slot.granted else slot.retry_after
    assert state is not None and state.checks == DEFAULT.free + RAMP  # counted no further
    quiet = expires(DEFAULT, state)
    assert quiet - now == pytest.approx(1.5 * 3600, abs=60)  # 15 checks at 10 an hour
    assert counted(DEFAULT, state, quiet) == 0.0
    for _ in range(10):
        slot, state = reserve(DEFAULT, state, quiet)
        assert slot.granted and slot.wait == 0.0


def test_the_issues_attack_gets_at_most_100_checks_an_hour() -> None:
    """10,000 guesses from 1,000 addresses in an hour, at random moments."""
    rng = random.Random(27)
    arrivals = sorted(rng.uniform(0, 3600) for _ in range(10_000))
    slots = run(DEFAULT, arrivals)
    assert 80 <= len(slots) <= 100


def test_waiters_are_bounded() -> None:
    """However many ask at once, at most ``waiters`` + 1 slots are given ahead."""
    for burst_at in (0.0, 200.0):
        state: SlotState | None = None
        for _ in range(12):  # past the free ones
            _, state = reserve(DEFAULT, state, 0.0)
        waiting = [s for s in run_from(state, [burst_at] * 1000) if s > burst_at]
        assert len(waiting) <= DEFAULT.waiters + 1


def run_from(state: SlotState | None, arrivals: list[float]) -> list[float]:
    slots = []
    for now in arrivals:
        slot, state = reserve(DEFAULT, state, now)
        if slot.granted:
            slots.append(now + slot.wait)
    return slots


schedules = st.builds(
    Schedule,
    name=st.just("account"),
    free=st.integers(1, 20),
    checks=st.integers(50, 400),
    period=st.floats(10.0, 1e5),
    max_wait=st.floats(0.0, 30.0),
    waiters=st.integers(1, 8),
).filter(lambda s: s.checks > 2 * s.free + RAMP)


@settings(max_examples=60, deadline=None)
@given(
    schedules,
    st.lists(st.tuples(st.floats(0.0, 3.0), st.integers(1, 60)), min_size=1, max_size=80),
)
def test_never_more_than_checks_in_any_period(
    schedule: Schedule, bursts: list[tuple[float, int]]
) -> None:
    """Bursts of attempts separated by pauses (in periods) of any length: whatever the
    arrivals, no window of one period holds more than ``checks`` granted slots."""
    arrivals = []
    now = 0.0
    for pause, n in bursts:
        now += pause * schedule.period
        step = schedule.period / 500
        arrivals += [now + k * step for k in range(n)]
        now += n * step
    slots = run(schedule, arrivals)
    assert most_in_a_window(slots, schedule.period) <= schedule.checks


@settings(max_examples=40, deadline=None)
@given(schedules, st.floats(0.0, 1e4), st.floats(0.0, 1e4))
def test_a_clock_running_backwards_drains_nothing(
    schedule: Schedule, at: float, back: float
) -> None:
    state = SlotState(float(schedule.free + RAMP), at, at + 10.0)
    assert counted(schedule, state, at - back) == counted(schedule, state, at)
    slot, _ = reserve(schedule, state, at - back)
    assert not slot.granted or slot.wait <= schedule.max_wait


@pytest.mark.parametrize(
    "bad",
    [
        Schedule("a", free=0, checks=100, period=3600.0, max_wait=5.0),
        Schedule("a", free=10, checks=25, period=3600.0, max_wait=5.0),  # <= 2 * 10 + 5
        Schedule("a", free=10, checks=100, period=0.0, max_wait=5.0),
        Schedule("a", free=10, checks=100, period=3600.0, max_wait=-1.0),
        Schedule("a", free=10, checks=100, period=3600.0, max_wait=5.0, waiters=0),
    ],
)
def test_a_schedule_that_makes_no_sense_is_refused(bad: Schedule) -> None:
    with pytest.raises(InvalidInput):
        check(bad)


@settings(max_examples=60, deadline=None)
@given(schedules, st.lists(st.floats(0.0, 2.0), min_size=1, max_size=60))
def test_a_client_back_when_told_gets_the_slot_if_nobody_took_it(
    schedule: Schedule, gaps: list[float]
) -> None:
    state: SlotState | None = None
    now = 0.0
    for gap in gaps:
        now += gap * schedule.max_wait
        slot, new = reserve(schedule, state, now)
        if not slot.granted:
            back, _ = reserve(schedule, state, now + slot.retry_after)
            assert back.granted and back.wait == pytest.approx(schedule.max_wait, abs=1e-6)
        state = new
