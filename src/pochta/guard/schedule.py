"""The account-wide schedule of password checks: slows, never refuses the account to everyone.

A ``Schedule`` keeps three numbers per subject (an account): ``checks`` counted, the time
``at`` they were counted, and ``next``, the subject's next free slot. Counted checks drain
continuously, ``free`` per ``period`` (seed 003's refill, the other way round):

    checks(now) = max(0, checks - free * (now - at) / period)

A reservation at ``now`` takes the slot ``max(now, next)``. One no further than ``max_wait``
away is given: the check counts, and the next slot moves on by an interval that depends on
the checks counted (``over`` = checks - free). One further away is refused with the time
until it comes within ``max_wait`` (``retry_after`` = slot - max_wait - now): a client that
comes back when told has a chance at that slot, where one told "when it is due" would always
find it taken by someone who asked up to ``max_wait`` earlier (against a flood of guesses
the chance is still small: BENCHMARKS.md, Logins under attack).

The interval:

    interval = 0                                                   when over <= 0
             = clamp(spacing * 2 ** (over - RAMP), max_wait / waiters, spacing)  otherwise
    spacing  = period / (checks_max - 2 * free - RAMP)

so the first ``free`` checks of a quiet account pass at once, the next ones are spaced by a
delay that doubles with each (``spacing`` / 16, / 8, ... in the default), and past ``RAMP``
of them every check waits for its own slot ``spacing`` apart. A refusal counts nothing:
asking more often does not push the slots later. Counted checks stop at ``free + RAMP``, so
the account is back to free checks an hour and a half after an attack ends.

Why at most ``checks_max`` pass in any ``period`` (``tests/unit/guard/test_schedule.py``
checks it on arbitrary arrivals): a check passes with an interval under ``spacing`` only
while fewer than ``free + RAMP`` are counted; that allows ``free + RAMP`` at the start of a
window and at most ``free`` more as counted checks drain within it; every other check is
``spacing`` after the one before, ``period / spacing`` of them.

Slots are reserved, never slept on here: the caller waits (asynchronously, at the edge) for
``Slot.wait`` seconds before it checks the password. As intervals past ``free`` are at least
``max_wait / waiters``, at most ``waiters`` + 1 reservations of one subject wait at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pochta.errors import InvalidInput
from pochta.types import RAMP as RAMP  # the formula's constant: in the contract, for the settings
from pochta.types import Schedule, Slot

EPSILON = 1e-6  # seconds: a slot this little past max_wait is within it (float rounding)


@dataclass(frozen=True, slots=True)
class SlotState:
    """A subject's ``checks`` counted at time ``at``, and its next free slot ``next``."""

    checks: float
    at: float
    next: float


def check(schedule: Schedule) -> Schedule:
    """``schedule`` if its numbers make sense; InvalidInput otherwise."""
    s = schedule
    if s.free < 1 or not s.period > 0 or not s.max_wait >= 0 or s.waiters < 1:
        raise InvalidInput(
            f"schedule {s.name!r}: free >= 1, period > 0, max_wait >= 0 and waiters >= 1"
        )
    if s.checks <= 2 * s.free + RAMP:
        raise InvalidInput(
            f"schedule {s.name!r}: checks ({s.checks}) must exceed 2 * free + {RAMP}"
            f" ({2 * s.free + RAMP})"
        )
    return s


def spacing(schedule: Schedule) -> float:
    """Seconds between the slots of a subject under a sustained attack."""
    return schedule.period / (schedule.checks - 2 * schedule.free - RAMP)


def interval(schedule: Schedule, checks: float) -> float:
    """How far the next slot moves after a check that brought the count to ``checks``."""
    over = checks - schedule.free
    if over <= 0:
        return 0.0
    most = spacing(schedule)
    least = min(most, schedule.max_wait / schedule.waiters)
    return min(most, max(least, most * math.pow(2.0, over - RAMP)))


def counted(schedule: Schedule, state: SlotState | None, now: float) -> float:
    """Checks still counted at ``now``. Time that runs backwards drains nothing."""
    if state is None:
        return 0.0
    elapsed = max(0.0, now - state.at)
    return max(0.0, state.checks - schedule.free * elapsed / schedule.period)


def reserve(
    schedule: Schedule, state: SlotState | None, now: float
) -> tuple[Slot, SlotState | None]:
    """The slot a check asking at ``now`` gets, and the subject's state after it (the state
    unchanged when refused)."""
    checks = counted(schedule, state, now)
    slot = now if state is None else max(now, state.next)
    wait = slot - now
    if wait > schedule.max_wait + EPSILON:
        return Slot(False, 0.0, wait - schedule.max_wait, checks), state
    checks = min(checks + 1.0, float(schedule.free + RAMP))
    at = now if state is None else max(now, state.at)
    new = SlotState(checks, at, slot + interval(schedule, checks))
    # a slot within EPSILON past max_wait (float rounding) waits max_wait: never longer
    return Slot(True, min(wait, schedule.max_wait), 0.0, checks), new


def expires(schedule: Schedule, state: SlotState) -> float:
    """When ``state`` says nothing any more (no checks counted, its next slot past): it can
    be dropped, and a missing state means exactly that."""
    return max(state.next, state.at + state.checks * schedule.period / schedule.free)
