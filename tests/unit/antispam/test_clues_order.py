"""``TokenTable.clues`` without a key function per clue (issue 29, item 3): a large table ranks
its clues once and a letter's clues are its places sorted; a small one sorts (distance, token,
f) tuples. Both give what the sort by ``(-abs(f - 0.5), token)`` gave: compared on generated
tables (ties in distance, tokens repeated, more clues than MAX_CLUES) and on the shipped table
with the unsealed corpus letters' tokens."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam import tokens as tokens_mod
from pochta.antispam.model import booster
from pochta.antispam.tokens import MAX_CLUES, TokenTable
from pochta.mime import letter as letter_mod
from pochta_factory import corpus


def clues_by_key(table: TokenTable, tokens: Iterable[str]) -> list[tuple[str, float]]:
    """What ``clues`` was: every known token, sorted with a key function."""
    known = table._clues
    found = [(t, known[t]) for t in tokens if t in known]
    found.sort(key=lambda tf: (-abs(tf[1] - 0.5), tf[0]))
    return found[:MAX_CLUES]


counts = st.tuples(st.integers(0, 6), st.integers(0, 6)).filter(lambda c: sum(c) > 0)


@settings(max_examples=200, deadline=None)
@given(
    table=st.dictionaries(st.text("abcxyz", min_size=1, max_size=3), counts, max_size=250),
    letter=st.lists(st.text("abcxyz", min_size=1, max_size=3), max_size=300),
    spam=st.integers(1, 9),
    ham=st.integers(1, 9),
    ranked=st.booleans(),
)
def test_clues_are_the_keyed_sort(
    table: dict[str, tuple[int, int]], letter: list[str], spam: int, ham: int, ranked: bool
) -> None:
    t = TokenTable(table, spam, ham)
    if ranked:  # the large table's way, on a small table
        t.__dict__["_clues"] = {**t._clues, **{f"pad{i}": 0.99 for i in range(2048)}}
        letter = [*letter, *(f"pad{i}" for i in range(0, 400, 3))]
    assert (len(t._clues) >= tokens_mod.RANKED_FROM) == ranked
    assert t.clues(letter) == clues_by_key(t, letter)


def test_the_shipped_table_on_the_corpus_letters() -> None:
    model = booster.load()
    assert model.tokens is not None
    table = model.tokens
    assert len(table._clues) >= tokens_mod.RANKED_FROM
    small = TokenTable(dict(list(table.counts.items())[:1500]), 5, 7)
    assert len(small._clues) < tokens_mod.RANKED_FROM
    letters = list(corpus.unsealed(("easy-ham-1", "spam-1", "hard-ham-1")))[::7]
    for m in letters:
        tokens = tokens_mod.tokenize(letter_mod.parse(m.raw))
        assert table.clues(tokens) == clues_by_key(table, tokens)
        assert small.clues(tokens) == clues_by_key(small, tokens)
