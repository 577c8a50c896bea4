"""The rolling-limit formula (seed 003) as properties, and the limiter's keys."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pochta.errors import InvalidInput
from pochta.guard.ratelimit import (
    RateLimiter,
    Usage,
    decide,
    remaining,
)
from pochta.guard.ratelimit.memory import MemoryRateLimitBackend
from pochta.types import Limit

limits = st.builds(
    Limit,
    name=st.sampled_from(["ip", "account", "api"]),
    max=st.integers(1, 1000),
    period=st.floats(0.001, 1e6),
)
times = st.floats(0, 1e9)
usages = st.builds(Usage, used=st.floats(0, 2000), at=times)
costs = st.floats(0, 50)


@given(limits, st.none() | usages, times)
def test_remaining_never_exceeds_max(limit: Limit, usage: Usage | None, now: float) -> None:
    assert remaining(limit, usage, now) <= limit.max


@given(limits, usages, times, st.floats(0, 1e6))
def test_remaining_never_decreases_as_time_passes(
    limit: Limit, usage: Usage, now: float, later: float
) -> None:
    assert remaining(limit, usage, now + later) >= remaining(limit, usage, now)


@given(limits, usages, st.floats(0, 1e6))
def test_time_running_backwards_refills_nothing(limit: Limit, usage: Usage, back: float) -> None:
    assert remaining(limit, usage, usage.at - back) == remaining(limit, usage, usage.at)


def test_the_seed_example_ten_per_hour() -> None:
    hourly = Limit("ip", 10, 3600.0)
    usage: Usage | None = None
    for _ in range(10):
        decision, (usage,) = decide([(hourly, usage)], 1, 0.0)
        assert decision.allowed
    decision, _ = decide([(hourly, usage)], 1, 0.0)
    assert not decision.allowed and decision.retry_after == pytest.approx(360.0)  # 6 minutes
    assert not decide([(hourly, usage)], 1, 359.0)[0].allowed
    assert decide([(hourly, usage)], 1, 360.0)[0].allowed
    assert remaining(hourly, usage, 1800.0) == pytest.approx(5.0)
    assert remaining(hourly, usage, 7200.0) == 10.0


@given(st.lists(limits, min_size=1, max_size=3, unique_by=lambda x: x.name), st.data())
def test_a_refusal_charges_no_limit_and_an_admission_charges_all(
    chosen: list[Limit], data: st.DataObject
) -> None:
    checks = [(limit, data.draw(st.none() | usages)) for limit in chosen]
    now, cost = data.draw(times), data.draw(costs)
    decision, new = decide(checks, cost, now)
    before = [remaining(limit, usage, now) for limit, usage in checks]
    if not decision.allowed:
        assert new == [usage for _, usage in checks]
        assert decision.denied and all(
            before[i] < cost for i, (limit, _) in enumerate(checks) if limit.name in decision.denied
        )
    else:
        assert not decision.denied and decision.retry_after == 0
        for (limit, _), usage, left in zip(checks, new, before, strict=True):
            assert remaining(limit, usage, now) == pytest.approx(left - cost, abs=1e-6 * limit.max)


@given(limits, st.none() | usages, times, st.floats(0.01, 50))
def test_retry_after_is_exactly_when_the_attempt_passes(
    limit: Limit, usage: Usage | None, now: float, cost: float
) -> None:
    decision, _ = decide([(limit, usage)], cost, now)
    if decision.allowed or decision.retry_after == float("inf"):
        assert decision.allowed or cost > limit.max
        return
    later = now + decision.retry_after
    rounding = 8 * math.ulp(later) * limit.max / limit.period  # of the time itself
    assert remaining(limit, usage, later) == pytest.approx(cost, rel=1e-6, abs=1e-6 + rounding)


@given(
    st.integers(1, 20),
    st.floats(0.1, 100),
    st.lists(st.tuples(st.floats(0, 5), st.sampled_from([0.5, 1.0, 2.0])), max_size=200),
    st.floats(0.1, 200),
)
def test_no_window_admits_more_than_max_plus_its_refill(
    max_: int, period: float, steps: list[tuple[float, float]], window: float
) -> None:
    limit = Limit("x", max_, period)
    usage: Usage | None = None
    now = 0.0
    admitted: list[tuple[float, float]] = []
    for gap, cost in steps:
        now += gap
        decision, (new,) = decide([(limit, usage)], cost, now)
        if decision.allowed:
            usage = new
            admitted.append((now, cost))
    bound = max_ + max_ * window / period + 1e-6 * max_
    for start, _ in admitted:
        inside = sum(cost for at, cost in admitted if start <= at <= start + window)
        assert inside <= bound


def test_keys_keep_subjects_out() -> None:
    limiter = RateLimiter(MemoryRateLimitBackend(), b"a-secret-of-sixteen-bytes", tag="login")
    per_ip = Limit("ip", 10, 3600.0)
    key = limiter.key(per_ip, "203.0.113.5")
    assert key.startswith("pochta:rate:{login}:ip:") and "203.0.113" not in key
    assert key == limiter.key(per_ip, "203.0.113.5")
    assert key != limiter.key(per_ip, "203.0.113.6")
    assert key != limiter.key(Limit("ip2", 10, 3600.0), "203.0.113.5").replace(":ip2:", ":ip:")
    other = RateLimiter(MemoryRateLimitBackend(), b"another-secret-of-16-bytes", tag="login")
    assert other.key(per_ip, "203.0.113.5") != key


@pytest.mark.parametrize(
    "bad",
    [
        lambda b: RateLimiter(b, b"short"),
        lambda b: RateLimiter(b, b"x" * 16, tag="{login}"),
        lambda b: RateLimiter(b, b"x" * 16).hit(),
        lambda b: RateLimiter(b, b"x" * 16).hit((Limit("a", 0, 1.0), "s")),
        lambda b: RateLimiter(b, b"x" * 16).hit((Limit("a", 1, 0.0), "s")),
        lambda b: RateLimiter(b, b"x" * 16).hit((Limit("a", 1, 1.0), "s"), cost=-1),
        lambda b: RateLimiter(b, b"x" * 16).hit(
            (Limit("a", 1, 1.0), "s"), (Limit("a", 2, 1.0), "t")
        ),
    ],
)
def test_invalid_limits_and_checks_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInput):
        bad(MemoryRateLimitBackend())  # type: ignore[operator]


def test_the_memory_backend_forgets_full_limits() -> None:
    now = [0.0]
    backend = MemoryRateLimitBackend(clock=lambda: now[0])
    limiter = RateLimiter(backend, b"x" * 16)
    per_ip = Limit("ip", 2, 10.0)
    for i in range(MemoryRateLimitBackend.SWEEP_EVERY):
        now[0] += 100.0
        assert limiter.hit((per_ip, f"198.51.100.{i}")).allowed
    assert len(backend._usage) == 1  # the sweep kept only the one not yet refilled
