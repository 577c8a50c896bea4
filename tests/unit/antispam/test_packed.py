"""The worker's answer's packed fields (:mod:`pochta.antispam.packed`): what the server reads
back is exactly what was packed, whether it could be packed or not."""

from __future__ import annotations

import math
import pickle
from typing import TypeVar

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pochta.antispam import packed

T = TypeVar("T")
_NAMES = st.text(st.characters() | st.sampled_from(["\0", "é", "\ud800"]), max_size=12)
_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**60), 2**60)
# an int is not packed (it would come back a float: 2**60 + 1 not even equal)


def _read_back(value: T) -> T:
    out: T = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return out


def _same_floats(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_NAMES, _FLOATS, max_size=40))
@example({})
@example({"": 1.0})
@example({"\0": 1.0})
@example({"a\0b": 1.0, "c": 2.0})  # a name holding the separator: as many gaps as 3 names
@example({"a": 1.0, "b\0": 2.0})
@example({"a": 1.0, "": 2.0, "b": 3.0})
def test_a_row_reads_back_its_features(features: dict[str, float]) -> None:
    row = _read_back(packed.row(features))
    assert list(row) == list(features)  # the same names, in the same order
    assert all(_same_floats(row[k], v) and type(row[k]) is type(v) for k, v in features.items())
    assert len(row) == len(features) and all(k in row for k in features)
    if not any(math.isnan(v) for v in features.values()):
        assert row == features and features == row and dict(row) == features
    packable = all(k and "\0" not in k and type(v) is float for k, v in features.items())
    assert isinstance(row, packed.Row) == packable


@settings(max_examples=300, deadline=None)
@given(st.lists(_NAMES, max_size=40))
@example([])
@example([""])
@example(["\0"])
@example(["\0\0", "a"])
@example(["a", "b\0c"])  # the separator in a token: one gap more than 2 tokens have
@example(["a", "", "b"])
@example(["", ""])
def test_tokens_read_back(tokens: list[str]) -> None:
    given_ = tuple(tokens)
    got = _read_back(packed.tokens(given_))
    assert got == given_ and given_ == got and tuple(got) == given_
    assert len(got) == len(given_) and list(got[1:3]) == list(given_[1:3])
    assert isinstance(got, packed.Tokens) == all(t and "\0" not in t for t in tokens)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=40), st.sampled_from([None, -1, 2**64]))
def test_hashes_read_back(hashes: list[int], odd: int | None) -> None:
    given_ = tuple(hashes) if odd is None else (*hashes, odd)
    got = _read_back(packed.hashes(given_))
    assert got == given_ and given_ == got and hash(got) == hash(given_)
    assert isinstance(got, packed.Hashes) == (odd is None)


def test_packed_values_are_one_object_each_in_the_pickle() -> None:
    """What makes them cheap to read: one string or bytes each, however many values."""
    features = {f"sign.N{i}": float(i) for i in range(200)}
    hashes = tuple(range(2**63, 2**63 + 200))
    slim = pickle.dumps((packed.row(features), packed.hashes(hashes)), pickle.HIGHEST_PROTOCOL)
    plain = pickle.dumps((features, hashes), pickle.HIGHEST_PROTOCOL)
    assert len(slim) < len(plain)
    assert _read_back(packed.row(features)) == features
    assert packed.row({}) == {} and packed.tokens(()) == () and packed.hashes(()) == ()
