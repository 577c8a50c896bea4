"""Choosing a pair (pochta.blobs.placement): weights by the N-th root of free space."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from pochta.blobs.placement import choose_pair, pair_weight
from pochta.types import DiskSpec, Pair, PairFlag


def pair(pair_id: int, free: tuple[int, int], flags: PairFlag = PairFlag.NONE) -> Pair:
    disks = (DiskSpec("local", f"/d/{pair_id}a"), DiskSpec("local", f"/d/{pair_id}b"))
    return Pair(pair_id, disks, flags, free)


def pick(pairs: list[Pair], rng: random.Random, size: int = 0, **kw: Any) -> int:
    chosen = choose_pair(pairs, size=size, root=2, rng=rng, **kw)
    assert chosen is not None
    return chosen.id


def frequencies(pairs: list[Pair], draws: int, root: float, seed: int = 1) -> dict[int, float]:
    rng = random.Random(seed)
    seen: Counter[int] = Counter()
    for _ in range(draws):
        chosen = choose_pair(pairs, size=0, root=root, rng=rng)
        assert chosen is not None
        seen[chosen.id] += 1
    return {pair_id: n / draws for pair_id, n in seen.items()}


# -- weights --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("free", "root", "weight"),
    [
        ((100, 400), 2, 10.0),  # the fuller disk counts
        ((400, 100), 2, 10.0),
        ((1000, 1000), 3, 10.0),
        ((10**12, 10**12), 2, 10.0**6),
        ((250, 900), 1, 250.0),
        ((0, 10**9), 2, 0.0),
    ],
)
def test_pair_weight_is_the_nth_root_of_the_smaller_free_space(
    free: tuple[int, int], root: float, weight: float
) -> None:
    assert pair_weight(pair(1, free), root) == pytest.approx(weight)


def test_pair_weight_of_a_disk_reporting_negative_free_space_is_zero() -> None:
    assert pair_weight(pair(1, (-5, 100)), 2) == 0.0


# -- eligibility ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags",
    [PairFlag.READONLY, PairFlag.SERVICE, PairFlag.LOCKED, PairFlag.READONLY | PairFlag.LOCKED],
)
def test_only_writable_pairs_are_chosen(flags: PairFlag) -> None:
    pairs = [pair(1, (10**12, 10**12), flags), pair(2, (10**3, 10**3)), pair(3, (10**12, 1), flags)]
    rng = random.Random(3)
    chosen = {pick(pairs, rng) for _ in range(500)}
    assert chosen == {2}


def test_exclude_is_respected() -> None:
    pairs = [pair(1, (100, 100)), pair(2, (100, 100)), pair(3, (100, 100))]
    rng = random.Random(5)
    chosen = {pick(pairs, rng, exclude={1, 3}) for _ in range(200)}
    assert chosen == {2}
    assert choose_pair(pairs, size=0, root=2, rng=rng, exclude={1, 2, 3}) is None


def test_a_pair_needs_room_for_the_file_on_both_disks() -> None:
    pairs = [pair(1, (10**9, 999)), pair(2, (5000, 5000))]
    rng = random.Random(7)
    chosen = {pick(pairs, rng, size=1000) for _ in range(200)}
    assert chosen == {2}
    assert choose_pair(pairs, size=5000, root=2, rng=rng) is None


@pytest.mark.parametrize(
    "pairs",
    [
        [],
        [pair(1, (10**9, 10**9), PairFlag.READONLY), pair(2, (10**9, 10**9), PairFlag.SERVICE)],
        [pair(1, (0, 0)), pair(2, (0, 10**9))],
    ],
)
def test_no_eligible_pair_gives_none(pairs: list[Pair]) -> None:
    assert choose_pair(pairs, size=0, root=2, rng=random.Random(1)) is None


@pytest.mark.parametrize("root", [0, -1, -0.5])
def test_root_must_be_positive(root: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        choose_pair([pair(1, (1, 1))], size=0, root=root, rng=random.Random(1))


def test_the_same_seed_gives_the_same_choices() -> None:
    pairs = [pair(i, (i * 1000, i * 1000)) for i in range(1, 6)]

    def run() -> list[Pair | None]:
        rng = random.Random(11)
        return [choose_pair(pairs, size=0, root=2, rng=rng) for _ in range(50)]

    assert run() == run()


# -- the distribution -----------------------------------------------------------------------
def test_frequencies_follow_the_weights() -> None:
    # weights with root 2: sqrt(100)=10, sqrt(400)=20, sqrt(900)=30
    pairs = [pair(1, (100, 5000)), pair(2, (400, 400)), pair(3, (900, 10**6))]
    got = frequencies(pairs, 30_000, root=2)
    for pair_id, share in {1: 1 / 6, 2: 2 / 6, 3: 3 / 6}.items():
        assert got[pair_id] == pytest.approx(share, abs=0.01)


def test_frequencies_follow_the_weights_with_root_3() -> None:
    pairs = [pair(1, (1000, 1000)), pair(2, (8000, 8000)), pair(3, (27000, 27000))]
    got = frequencies(pairs, 30_000, root=3)
    for pair_id, share in {1: 1 / 6, 2: 2 / 6, 3: 3 / 6}.items():
        assert got[pair_id] == pytest.approx(share, abs=0.01)


def test_a_new_empty_disk_does_not_take_every_write() -> None:
    """Nine pairs 90 % full (100 GB free) and a new one with 1 TB free: by free space alone
    the new pair would take about half the writes (1000 / 1900); with the square root, about
    a quarter (sqrt(1000) / (9 sqrt(100) + sqrt(1000)))."""
    gb = 10**9
    pairs = [pair(i, (100 * gb, 100 * gb)) for i in range(1, 10)] + [pair(10, (1000 * gb,) * 2)]
    linear = frequencies(pairs, 15_000, root=1)[10]
    rooted = frequencies(pairs, 15_000, root=2)[10]
    assert linear == pytest.approx(1000 / 1900, abs=0.02)
    assert rooted == pytest.approx(1000**0.5 / (9 * 10 + 1000**0.5), abs=0.02)
    assert rooted < linear / 1.8


def test_a_single_eligible_pair_is_chosen_without_a_draw() -> None:
    """The embedded default has one pair: it is the choice, and the generator is not drawn
    from (no weights computed for a choice that has none to make)."""
    rng = random.Random(5)
    state = rng.getstate()
    pairs = [pair(1, (10**9, 10**9)), pair(2, (10**9, 10**9), PairFlag.READONLY), pair(3, (5, 5))]
    assert pick(pairs, rng, size=100) == 1
    assert rng.getstate() == state
    assert choose_pair(pairs, size=100, root=2, rng=rng, exclude={1}) is None
