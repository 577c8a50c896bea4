"""The FileDB arithmetic of seed 004 (pochta.blobs.counting), as pure functions."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pochta.blobs.counting import after_dec, after_inc, after_upsert
from pochta.blobs.keys import MAGIC_MOD, add_magic, parse_magic, sub_magic
from pochta.errors import BadMagic, BlobNotFound
from pochta.types import FileFlag, FileRecord, Magic, Space

K = "ab" * 32
NOW = 1_700_000_000.5
DND = FileFlag.DO_NOT_DELETE

magics = st.integers(min_value=1, max_value=MAGIC_MOD - 1)
totals = st.integers(min_value=0, max_value=MAGIC_MOD - 1)


def live(counter: int, magic: Magic, flags: FileFlag = FileFlag.NONE, pair: int = 3) -> FileRecord:
    return FileRecord(K, counter, magic, flags, pair)


def deleted(pair: int = 3) -> FileRecord:
    return FileRecord(K, 0, 0, FileFlag.NONE, pair, Space.DELETED, NOW - 100)


# -- the transitions one by one -------------------------------------------------------------
def test_inc() -> None:
    assert after_inc(live(1, 345), K, 123) == live(2, 468)
    assert after_inc(live(-1, 5, DND), K, 1) == live(0, 6, DND)


@pytest.mark.parametrize("record", [None, deleted()])
def test_inc_needs_a_live_record(record: FileRecord | None) -> None:
    with pytest.raises(BlobNotFound):
        after_inc(record, K, 1)


def test_upsert_inserts_when_there_is_no_live_record() -> None:
    assert after_upsert(None, K, 345, 9) == live(1, 345, pair=9)
    assert after_upsert(deleted(pair=3), K, 345, 9) == live(1, 345, pair=9)


def test_upsert_on_a_live_record_is_an_inc_on_its_pair() -> None:
    assert after_upsert(live(1, 345, pair=3), K, 123, 9) == live(2, 468, pair=3)
    assert after_upsert(live(0, 0, DND), K, 1, 9) == live(1, 1, DND)


def test_seed_example() -> None:
    record = after_upsert(None, K, 345, 1)
    record = after_inc(record, K, 123)
    assert (record.counter, record.magic) == (2, 468)
    record = after_dec(record, K, 123, NOW)
    assert record == live(1, 345, pair=1)
    record = after_dec(record, K, 345, NOW)
    assert record == FileRecord(K, 0, 0, FileFlag.NONE, 1, Space.DELETED, NOW)


def test_seed_example_repeated_dec() -> None:
    record = after_dec(live(2, 468), K, 123, NOW)
    record = after_dec(record, K, 123, NOW)
    assert record == live(0, 222, DND)
    record = after_dec(record, K, 345, NOW)
    assert record == live(-1, MAGIC_MOD - 123, DND)


def test_dec_of_a_flagged_record_at_zero_stays_live() -> None:
    assert after_dec(live(1, 7, DND), K, 7, NOW) == live(0, 0, DND)


def test_dec_below_zero_is_flagged_even_with_magic_zero() -> None:
    assert after_dec(live(0, 5), K, 5, NOW) == live(-1, 0, DND)


def test_dec_after_delete() -> None:
    assert after_dec(deleted(pair=4), K, 99, NOW) == live(-1, MAGIC_MOD - 99, DND, pair=4)


def test_dec_of_nothing() -> None:
    with pytest.raises(BlobNotFound):
        after_dec(None, K, 1, NOW)


# -- properties -----------------------------------------------------------------------------
@given(st.lists(magics, min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_incs_then_decs_of_the_same_magics_in_any_order_balance(
    refs: list[Magic], rng: random.Random
) -> None:
    record = after_upsert(None, K, refs[0], 1)
    for magic in refs[1:]:
        record = after_inc(record, K, magic)
    assert record.counter == len(refs)
    order = list(refs)
    rng.shuffle(order)
    for i, magic in enumerate(order):
        record = after_dec(record, K, magic, NOW)
        if i < len(order) - 1:
            assert record.space is Space.LIVE
            assert record.counter == len(refs) - i - 1
            assert record.flags is FileFlag.NONE
    assert record == FileRecord(K, 0, 0, FileFlag.NONE, 1, Space.DELETED, NOW)


@given(st.lists(magics, min_size=1, max_size=20, unique=True), st.data())
def test_one_repeated_dec_always_ends_flagged_and_live(
    refs: list[Magic], data: st.DataObject
) -> None:
    """Every letter deleted once, one of them twice, in any order: never lost, always flagged
    (distinct magics: two letters that drew the same magic are the seed's 2**-32 blind spot)."""
    record = after_upsert(None, K, refs[0], 1)
    for magic in refs[1:]:
        record = after_inc(record, K, magic)
    twice = data.draw(st.sampled_from(refs))
    order = data.draw(st.permutations([*refs, twice]))
    for magic in order:
        record = after_dec(record, K, magic, NOW)
    assert record == live(-1, sub_magic(0, twice), DND, pair=1)


@given(
    st.lists(st.tuples(st.booleans(), magics), max_size=40),
    st.sampled_from([live(0, 222, DND), live(-1, 5, DND), live(3, 0, DND)]),
)
def test_do_not_delete_is_sticky(steps: list[tuple[bool, Magic]], record: FileRecord) -> None:
    for is_inc, magic in steps:
        record = after_inc(record, K, magic) if is_inc else after_dec(record, K, magic, NOW)
        assert record.space is Space.LIVE
        assert record.flags & DND


@given(
    st.integers(min_value=-5, max_value=5),
    totals,
    st.sampled_from([FileFlag.NONE, DND]),
    magics,
)
def test_dec_of_a_live_record(counter: int, total: Magic, flags: FileFlag, magic: Magic) -> None:
    before = live(counter, total, flags)
    after = after_dec(before, K, magic, NOW)
    left = (total - magic) % MAGIC_MOD
    if counter == 1 and left == 0 and not flags:
        assert after == FileRecord(K, 0, 0, FileFlag.NONE, 3, Space.DELETED, NOW)
    else:
        flagged = bool(flags) or counter - 1 < 0 or (counter - 1 == 0 and left != 0)
        assert after == live(counter - 1, left, DND if flagged else FileFlag.NONE)


@given(totals, magics)
def test_add_and_sub_are_inverse_mod_2_32(total: Magic, magic: Magic) -> None:
    added = add_magic(total, magic)
    assert 0 <= added < MAGIC_MOD
    assert added != total  # a non-zero magic always changes the sum
    assert sub_magic(added, magic) == total
    assert add_magic(sub_magic(total, magic), magic) == total


@given(st.lists(magics, max_size=50))
def test_sum_is_order_independent(refs: list[Magic]) -> None:
    forward = backward = 0
    for magic in refs:
        forward = add_magic(forward, magic)
    for magic in reversed(refs):
        backward = add_magic(backward, magic)
    assert forward == backward == sum(refs) % MAGIC_MOD


@given(st.integers())
def test_only_1_to_2_32_minus_1_is_a_magic(value: int) -> None:
    if 0 < value < MAGIC_MOD:
        assert parse_magic(value) == value
        assert parse_magic(str(value)) == value
    else:
        with pytest.raises(BadMagic):
            parse_magic(value)
        with pytest.raises(BadMagic):
            parse_magic(str(value))
