"""Keys, magic numbers and disk paths (pochta.blobs.keys): pure functions."""

from __future__ import annotations

import hashlib
import random

import pytest

from pochta.blobs.keys import (
    MAGIC_MOD,
    add_magic,
    blob_path,
    key_of,
    master_index,
    parse_key,
    parse_magic,
    random_magic,
    sub_magic,
)
from pochta.errors import BadKey, BadMagic, InvalidInput

KEY = hashlib.sha256(b"seed 004").hexdigest()


def test_a_sha256_hex_digest_is_a_key() -> None:
    assert parse_key(KEY) == KEY
    assert key_of(b"seed 004") == KEY


@pytest.mark.parametrize(
    "text",
    [
        "",
        KEY[:-1],  # 63 characters
        KEY + "a",  # 65
        KEY.upper(),
        "g" + KEY[1:],
        " " + KEY[1:],
        KEY[:-1] + "\n",
        hashlib.sha1(b"seed 004").hexdigest(),  # the seed's SHA-1: too short
        "../" + KEY[3:],
    ],
)
def test_malformed_keys_are_refused(text: str) -> None:
    with pytest.raises(BadKey) as info:
        parse_key(text)
    assert "64 lowercase hex" in info.value.message
    assert isinstance(info.value, InvalidInput)


@pytest.mark.parametrize("value", [None, 42, KEY.encode()])
def test_a_key_must_be_a_string(value: object) -> None:
    with pytest.raises(BadKey):
        parse_key(value)  # type: ignore[arg-type]


def test_a_long_bad_key_is_shortened_in_the_message() -> None:
    with pytest.raises(BadKey) as info:
        parse_key("x" * 10_000)
    assert len(info.value.message) < 200


@pytest.mark.parametrize(
    ("value", "magic"),
    [(1, 1), (345, 345), (MAGIC_MOD - 1, MAGIC_MOD - 1), ("123", 123), ("0x10", 16), (" 7 ", 7)],
)
def test_magics_accepted(value: object, magic: int) -> None:
    assert parse_magic(value) == magic


@pytest.mark.parametrize("value", [0, "0", "0x0"])
def test_magic_zero_is_refused(value: object) -> None:
    """0 is what a balanced record sums to; a letter's magic is never 0."""
    with pytest.raises(BadMagic) as info:
        parse_magic(value)
    assert "out of range" in info.value.message


@pytest.mark.parametrize("value", [-1, MAGIC_MOD, MAGIC_MOD + 1, 2**64, "-5", str(MAGIC_MOD)])
def test_magic_out_of_range_is_refused(value: object) -> None:
    with pytest.raises(BadMagic) as info:
        parse_magic(value)
    assert f"1..{MAGIC_MOD - 1}" in info.value.message


@pytest.mark.parametrize("value", ["abc", "", "1.5", 1.5, None, True, False, b"12", "12abc"])
def test_non_numeric_magic_is_refused(value: object) -> None:
    with pytest.raises(BadMagic) as info:
        parse_magic(value)
    assert isinstance(info.value, InvalidInput)


def test_random_magic_is_never_zero_and_fits_32_bits() -> None:
    rng = random.Random(4)
    magics = [random_magic(rng) for _ in range(10_000)]
    assert all(0 < m < MAGIC_MOD for m in magics)
    assert len(set(magics)) > 9_990
    assert 0 < random_magic() < MAGIC_MOD
    assert random_magic(random.Random(9)) == random_magic(random.Random(9))


def test_magic_arithmetic_wraps() -> None:
    assert add_magic(MAGIC_MOD - 1, 1) == 0
    assert add_magic(MAGIC_MOD - 1, 2) == 1
    assert sub_magic(0, 1) == MAGIC_MOD - 1
    assert sub_magic(345 + 123, 123) == 345
    assert add_magic(345, 123) == 468


@pytest.mark.parametrize(
    ("first", "index"),
    [("0", 0), ("1", 0), ("7", 0), ("8", 1), ("9", 1), ("a", 1), ("f", 1)],
)
def test_master_index_is_the_first_bit_of_the_key(first: str, index: int) -> None:
    assert master_index(first + KEY[1:]) == index


def test_master_index_splits_keys_evenly() -> None:
    keys = [key_of(i.to_bytes(4, "big")) for i in range(4000)]
    share = sum(master_index(k) for k in keys) / len(keys)
    assert 0.45 < share < 0.55


def test_blob_path() -> None:
    key = "abcd" + "0" * 60
    assert blob_path(key) == f"ab/cd/{key}"
    assert blob_path(KEY).split("/") == [KEY[:2], KEY[2:4], KEY]
