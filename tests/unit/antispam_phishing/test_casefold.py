"""The RE2 first looks for Python's case-insensitive patterns (signs/casefold.py): what they
let through is at least what Python's engine finds, checked against the engine over every
character."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.antispam import features
from pochta.antispam.signs import casefold, links, protected, wording

P = protected.default()
EVERY = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)


def test_spaces_are_what_python_s_backslash_s_matches() -> None:
    assert set(casefold.SPACES) == set(re.findall(r"\s", EVERY))


def test_lower_case_is_one_character_but_for_dotted_capital_i() -> None:
    assert [c for c in EVERY if len(c.lower()) != 1] == ["\u0130"]


def test_a_fold_is_its_text_character_for_character_but_a_dot_above_dropped() -> None:
    """Every character folds to one but a combining dot above, which folds to none (an ``İ``
    is ``i``): a fold as long as its text is the text's characters each at its own place
    (``protected._starts`` reads the positions RE2 finds in the fold as the text's)."""
    assert [c for c in EVERY if len(casefold.folded(c)) != 1] == ["\u0307"]
    assert casefold.folded("\u0130") == "i"


def _keeps_what_python_takes_for(letters: list[str], dot: bool) -> None:
    fold = {x: casefold.folded(x, dot=dot) for x in letters}
    near = set(re.findall("[" + re.escape("".join(letters)) + "]", EVERY, re.IGNORECASE))
    targets = set(fold.values())
    near |= {c for c in EVERY if casefold.folded(c, dot=dot) in targets}
    assert len(near) < 1000
    for c in near:
        for letter in letters:
            if re.fullmatch(re.escape(letter), c, re.IGNORECASE):
                assert casefold.folded(c, dot=dot) == fold[letter], (c, letter)


def test_folding_keeps_what_python_takes_for_a_name_s_letter() -> None:
    """Every character Python's case-insensitive engine takes for a letter of an
    organization's name folds to that letter folded: RE2 finds every name Python does."""
    letters = sorted({c for org in P.orgs for n in org.names for c in n if not c.isspace()})
    _keeps_what_python_takes_for(letters, dot=False)


def test_folding_keeps_what_python_takes_for_the_obfuscation_gate_s_letters() -> None:
    """The same for the letters links._GATE reads (its separators' words, the defanged
    schemes), and for the class of a label's letters: every character Python's
    case-insensitive engine takes for one of the class folds into the class."""
    words = links._BRACKET_DOT + links._WORD_DOT + links._DEFANGED_SCHEME
    letters = sorted({c for c in words if c.isalpha()})
    _keeps_what_python_takes_for(letters, dot=False)
    for cls in ("[a-z0-9а-яё]", "[a-z0-9а-яё-]"):
        taken = set(re.findall(cls, EVERY, re.IGNORECASE))
        assert len(taken) < 1000
        for c in taken:
            assert re.fullmatch(cls, casefold.folded(c)), (cls, c)


def test_folding_keeps_what_python_takes_for_a_money_mark_s_letter() -> None:
    """The same for the units features.money counts (its pattern is case-insensitive)."""
    letters = sorted({c for m in features.MONEY_MARKS for c in m if c.isalpha()})
    assert "i" not in letters
    _keeps_what_python_takes_for(letters, dot=False)


def test_same_case_groups_are_python_s() -> None:
    for group in casefold.SAME_CASE:
        assert all(re.fullmatch(group[0], c, re.IGNORECASE) for c in group)
    for c in EVERY:
        if c.lower() == c and casefold.folded(c, dot=True) != c:
            assert re.fullmatch(re.escape(c), casefold.folded(c, dot=True), re.IGNORECASE)


def test_a_text_re2_cannot_read_is_left_to_python() -> None:
    nothing = casefold.compile_first_look([])
    assert not casefold.found(nothing, "abc")
    assert casefold.found(nothing, "\ud800")


HINT_PIECES = [
    "[.]", "(.)", "{dot}", "[DOT]", "[точка]", "(ТОЧКА)", " . ", "\t.\t", " dot ", " ТЧК ",
    " тᲃк ", "hxxps://", "HXXP:", "h**ps ", "htxp\u0307", "hxxpſ:", "[:]", "[://]", "ı", "a", " ",
    "sber-bonus", "ru", ".", "перейдите на ", "\n", "\ud800", "İ", "\u212a", "Ё", "-", "ТОЧКА",
    "\u1c83", "\u0307", "hTtPs(:)//", "\u00a0", "[.]\u2028",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(HINT_PIECES), max_size=10).map("".join))
def test_obfuscated_past_the_re2_first_look(text: str) -> None:
    """Where the first look (links.may_hold) lets a text pass by, neither pattern finds
    anything there to keep: no defanged scheme, no site name with a dot written out."""
    for candidate in (text, wording.fold(text)):
        if not links.may_hold(candidate):
            assert links._SCHEME_ONLY.search(candidate) is None, candidate
            for m in links._OBFUSCATED.finditer(candidate):
                assert links._SEPARATOR.search(m.group(0)) is None, candidate


BLANKS = [" ", "  ", "\t", "\r", "\n", "\f", "\v", "\u00a0", "\u200b", "a", "Ё", "б", "\ud800"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(BLANKS), max_size=16).map("".join))
def test_fold_writes_blanks_as_it_did(text: str) -> None:
    """wording.fold, which leaves alone the texts RE2 finds no run of blanks in, and rewrites
    only runs that are not one space already, folds as every run rewritten did."""
    s = unicodedata.normalize("NFKC", text).casefold().replace("ё", "е")
    s = re.sub("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]", "", s)
    assert wording.fold(text) == re.sub(r"[ \t\r\f\v\u00a0]+", " ", s)


def test_an_ascii_text_folds_to_its_lower_case() -> None:
    """folded leaves an ASCII text at ``lower()`` without its tables: none of them rewrites
    an ASCII character, so the result is the one the tables give."""
    ascii_ = "".join(map(chr, range(128)))
    for table in (casefold._SAME, casefold._SAME_NO_DOT):
        assert min(table) >= 128
        assert ascii_.lower().translate(table) == ascii_.lower()
    for dot in (False, True):
        assert casefold.folded(ascii_, dot=dot) == ascii_.lower()
        assert casefold.folded("Ǆ\u0130ſ", dot=dot) == "ǆ\u0130ſ".lower().translate(
            casefold._SAME if dot else casefold._SAME_NO_DOT
        )


def test_the_rewritten_class_is_every_character_a_table_rewrites() -> None:
    """folded skips the tables for a text without one of their characters: the class of
    those characters is exactly the tables' keys."""
    keys = {chr(c) for c in {**casefold._SAME, **casefold._SAME_NO_DOT}}
    assert set(casefold._REWRITTEN.findall(EVERY)) == keys
