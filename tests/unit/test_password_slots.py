"""One bound on the password checks of every door, known clients first."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.server.passwords import PasswordSlots


def test_at_most_at_once_and_known_clients_go_first() -> None:
    async def run() -> list[str]:
        slots = PasswordSlots(1)
        order: list[str] = []
        busy = 0

        async def check(name: str, known: bool) -> None:
            nonlocal busy
            async with slots.slot(known):
                busy += 1
                assert busy == 1
                order.append(name)
                await asyncio.sleep(0.01)
                busy -= 1

        first = asyncio.create_task(check("stranger 1", False))
        await asyncio.sleep(0)  # it holds the one slot
        waiting = [asyncio.create_task(check(f"stranger {i}", False)) for i in (2, 3)]
        await asyncio.sleep(0)
        owner = asyncio.create_task(check("owner", True))
        await asyncio.gather(first, *waiting, owner)
        assert slots.free == 1 and slots.waiting == 0
        return order

    assert asyncio.run(run()) == ["stranger 1", "owner", "stranger 2", "stranger 3"]


def test_a_cancelled_waiter_gives_its_turn_away() -> None:
    async def run() -> None:
        slots = PasswordSlots(1)
        gate = asyncio.Event()

        async def hold() -> None:
            async with slots.slot(False):
                await gate.wait()

        holder = asyncio.create_task(hold())
        await asyncio.sleep(0)
        gone = asyncio.create_task(hold())
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        gate.set()
        await holder
        async with slots.slot(True):  # the slot came back: not lost to the cancelled waiter
            assert slots.free == 0
        assert slots.free == 1

    asyncio.run(run())


@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.booleans()), max_size=25),
)
@settings(max_examples=100, deadline=None)
def test_never_more_than_at_once_and_nothing_lost(
    at_once: int, checks: list[tuple[bool, int, bool]]
) -> None:
    async def run() -> None:
        slots = PasswordSlots(at_once)
        busy = peak = 0

        async def check(known: bool, steps: int) -> None:
            nonlocal busy, peak
            async with slots.slot(known):
                busy += 1
                peak = max(peak, busy)
                try:
                    for _ in range(steps):
                        await asyncio.sleep(0)
                finally:  # a check cancelled on its way out leaves its slot too
                    busy -= 1

        tasks = [asyncio.create_task(check(known, steps)) for known, steps, _ in checks]
        await asyncio.sleep(0)
        for task, (_, _, cancel) in zip(tasks, checks, strict=True):
            if cancel:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert peak <= at_once
        assert slots.free == at_once and slots.waiting == 0

    asyncio.run(run())
