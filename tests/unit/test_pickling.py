"""Dataclasses pickled as their class and fields (:mod:`pochta.pickling`): what is read back
is the object pickled, and a class whose ``__init__`` does more is refused."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from pochta.antispam.auth.results import NO_AUTH, AuthResults, DkimResult, DmarcResult
from pochta.antispam.auth.spf import SpfResult
from pochta.antispam.rules.ruleset import Hit
from pochta.antispam.signs.registry import Sign
from pochta.mime.split import Extracted, Split
from pochta.pickling import by_fields

EXAMPLES: list[object] = [
    Hit("R", 1.5, "phishing", "a rule", "правило", ("evidence", "\ud800")),
    Hit("R", -0.0, "g", "", ""),
    Sign("PHISH_X", "объяснение", "explanation"),
    Sign("PHISH_X", "", "", ("a", "b")),
    NO_AUTH,
    AuthResults(
        SpfResult("pass", "helo", "postmaster@h.example", "h.example", "ip4:192.0.2.0/24"),
        (DkimResult("pass", "d.example", "s1"), DkimResult("fail", "e.example", "s2")),
        DmarcResult("fail", "d.example", "reject"),
    ),
    Split(
        b"skeleton",
        (Extracted(0, b"\x00bytes", "ab" * 32, 6, 123, "application/pdf", None, 9),),
    ),
]


@pytest.mark.parametrize("obj", EXAMPLES, ids=lambda o: type(o).__name__)
def test_read_back_is_the_object_pickled(obj: object) -> None:
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        got = pickle.loads(pickle.dumps(obj, protocol))
        assert type(got) is type(obj) and got == obj
        assert dataclasses.astuple(got) == dataclasses.astuple(obj)  # type: ignore[call-overload]


def test_a_class_whose_init_does_more_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    @dataclasses.dataclass(frozen=True)
    class Derived:
        n: int
        twice: int = dataclasses.field(init=False, default=0)

    @dataclasses.dataclass(frozen=True)
    class Given:
        n: int
        scale: dataclasses.InitVar[int] = 1

    @dataclasses.dataclass(frozen=True)
    class Named:  # cls(*values) cannot give a keyword-only field
        n: int
        scale: int = dataclasses.field(default=1, kw_only=True)

    for cls in (Checked, Derived, Given, Named, int):
        with pytest.raises(TypeError):
            by_fields(cls)


@by_fields
@dataclasses.dataclass(frozen=True, slots=True)
class One:
    n: tuple[int, ...]


def test_one_field() -> None:
    one = One((1, 2))
    assert pickle.loads(pickle.dumps(one)) == one
