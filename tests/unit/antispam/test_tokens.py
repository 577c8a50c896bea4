"""The token statistic (pochta.antispam.tokens): what it reads, how it scores, its file."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.mailtools import letter

from pochta.antispam import tokens
from pochta.antispam.model import booster
from pochta.antispam.verdict import Scanner
from pochta.errors import ConfigError
from pochta.mime.letter import parse


def tokens_of(subject: str, text: str) -> frozenset[str]:
    return tokens.tokenize(parse(letter(subject=subject, text=text)))


SENDER = {"from:sender@example.net", "fromdomain:example.net", "fromname:sender"}
"""The tokens of tests.mailtools.letter's From: "Sender <sender@example.net>"."""


def test_distinct_lower_cased_words_with_the_subject_marked() -> None:
    got = tokens_of("FREE Money!", "Click HERE, click here... (now) a an x" + " word" * 50)
    assert got == {"s:free", "s:money", "click", "here", "now", "word", *SENDER}


def test_words_longer_than_the_limit_are_left_out() -> None:
    assert tokens_of("x", "a" * 21 + " " + "b" * 20) == {"b" * 20, *SENDER}


def test_the_sender_and_the_linked_domains_are_tokens() -> None:
    raw = letter(
        sender='"Big Bank Support" <NoReply@Mail.Example.COM>',
        text="see https://www.shop.example.org/a?b=1 and http://198.51.100.7/x",
    )
    got = tokens.tokenize(parse(raw))
    assert {"from:noreply@mail.example.com", "fromdomain:mail.example.com"} <= got
    assert {"fromname:big", "fromname:bank", "fromname:support"} <= got
    assert {"url:example.org", "url:198.51.100.7"} <= got


def test_a_letter_gives_at_most_max_tokens() -> None:
    text = " ".join(f"word{i}" for i in range(3 * tokens.MAX_TOKENS))
    got = tokens_of("subject line", text)
    assert len(got) == tokens.MAX_TOKENS
    assert {"s:subject", "s:line", "word0", *SENDER} <= got  # the subject and the start


def table() -> tokens.TokenTable:
    spam = [{"viagra", "free", "click"}, {"viagra", "mortgage", "click"}, {"free", "click"}]
    ham = [{"patch", "kernel", "click"}, {"kernel", "build"}, {"patch", "build", "thanks"}]
    return tokens.learn([*spam, *ham], [1, 1, 1, 0, 0, 0])


def test_spam_words_score_high_ham_words_low_unknown_neutral() -> None:
    t = table()
    assert t.score(["viagra", "free"]) > 0.85
    assert t.score(["kernel", "patch", "build"]) < 0.1
    assert t.score(["never", "seen"]) == tokens.NEUTRAL
    assert t.score([]) == tokens.NEUTRAL
    # "click" is in 3 spams and 1 ham: a weak clue; once-seen words are not kept
    assert "thanks" not in t.counts and "mortgage" not in t.counts
    assert 0.5 < t.score(["click"]) < 0.75


def test_as_much_spam_as_ham_is_neutral() -> None:
    t = table()
    assert t.score(["viagra", "free", "kernel", "patch"]) == pytest.approx(0.5, abs=0.1)


words = st.lists(st.sampled_from([f"w{i}" for i in range(30)]), max_size=12, unique=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(words, st.booleans()), min_size=1, max_size=30), words)
def test_the_score_is_a_probability_and_swapping_the_classes_mirrors_it(
    letters: list[tuple[list[str], bool]], asked: list[str]
) -> None:
    toks = [set(w) for w, _ in letters]
    labels = [int(y) for _, y in letters]
    t = tokens.learn(toks, labels)
    mirror = tokens.learn(toks, [1 - y for y in labels])
    p = t.score(asked)
    assert 0.0 <= p <= 1.0
    assert mirror.score(asked) == pytest.approx(1.0 - p, abs=1e-9)


def test_the_table_survives_its_file(tmp_path: Path) -> None:
    t = table()
    tokens.save(t, tmp_path)
    again = tokens.load(tmp_path)
    assert again == t
    assert tokens.load(tmp_path / "nowhere") is None


def test_a_table_read_again_is_the_same_one_until_its_file_changes(tmp_path: Path) -> None:
    """Every build reads the model's table: the same bytes give the table read before (a
    table is never changed), other bytes a table of their own."""
    tokens.save(table(), tmp_path / "one")
    tokens.save(table(), tmp_path / "two")
    first = tokens.load(tmp_path / "one")
    assert first is not None
    assert tokens.load(tmp_path / "one") is first
    assert tokens.load(tmp_path / "two") is first  # the same bytes elsewhere
    other = tokens.TokenTable({"other": (1, 2)}, 3, 4)
    tokens.save(other, tmp_path / "one")
    assert tokens.load(tmp_path / "one") == other
    assert tokens.load(tmp_path / "two") is first


def test_a_damaged_table_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / tokens.FILE).write_text(json.dumps({"tokens": {"a": [1]}}))
    with pytest.raises(ConfigError, match="token table"):
        tokens.load(tmp_path)


@pytest.mark.parametrize(
    "raw",
    [
        {"tokens": {"a": [-3, 0]}, "spam_letters": 1, "ham_letters": 1},
        {"tokens": {"a": [1, 0]}, "spam_letters": -1, "ham_letters": 1},
    ],
)
def test_a_table_with_a_count_below_0_is_a_clear_error(tmp_path: Path, raw: dict) -> None:
    """Counts below 0 would divide by 0 in Robinson's f(w) at the first letter."""
    (tmp_path / tokens.FILE).write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="below 0"):
        tokens.load(tmp_path)


def test_the_shipped_model_reads_the_words_of_a_letter() -> None:
    model = booster.load()
    assert model is not None and model.tokens is not None
    assert tokens.FEATURE in model.columns
    scanner = Scanner(model=model)
    spam = scanner.scan(
        letter(
            subject="Lowest mortgage rates, refinance now",
            text="Click here to be removed from our mailing list. Lowest rates guaranteed! "
            "Apply now, no obligation, limited time offer. Act now!\n",
        )
    )
    ham = scanner.scan(
        letter(
            subject="Re: patch for the build",
            text="I applied your patch to the kernel tree and the build works here. "
            "Could you also send the config you used? Thanks.\n",
        )
    )
    assert spam.features[tokens.FEATURE] > 0.8
    assert ham.features[tokens.FEATURE] < 0.2


def test_an_explanation_names_the_words_behind_the_score() -> None:
    scanner = Scanner(model=booster.load())
    verdict = scanner.scan(
        letter(
            subject="Lowest mortgage rates",
            text="Click here to be removed. Lowest rates guaranteed! No obligation.\n",
        )
    )
    assert verdict.words and "click" in verdict.words
    said = [r for r in scanner.explain(verdict, top=20) if r.feature == tokens.FEATURE]
    assert said and said[0].toward == "spam"
    assert "«click»" in said[0].en and "«click»" in said[0].ru


def test_judge_names_only_words_that_lean_the_way_of_the_score() -> None:
    score, words = table().judge(["viagra", "free", "kernel"], shown=5)
    assert score > 0.5
    assert set(words) == {"viagra", "free"}
    assert table().judge(["unknown"], shown=5) == (tokens.NEUTRAL, ())


def weighed() -> tokens.TokenTable:
    """table() with word weights fitted on the same letters (pochta_factory.wordweights)."""
    from pochta_factory.wordweights import fit_weights

    spam = [{"viagra", "free", "click"}, {"viagra", "mortgage", "click"}, {"free", "click"}]
    ham = [{"patch", "kernel", "click"}, {"kernel", "build"}, {"patch", "build", "thanks"}]
    labels = [1, 1, 1, 0, 0, 0]
    return dataclasses.replace(table(), weights=fit_weights([*spam, *ham], labels))


def test_word_weights_lean_each_word_its_letters_way_and_skip_words_seen_once() -> None:
    w = weighed().weights
    assert w is not None
    assert w.weights["viagra"] > 0 and w.weights["free"] > 0
    assert w.weights["kernel"] < 0 and w.weights["patch"] < 0
    assert "thanks" not in w.weights and "mortgage" not in w.weights  # one letter each
    assert w.score(["viagra", "free"]) > w.score([]) > w.score(["kernel", "patch"])
    assert w.score(["never", "seen"]) == pytest.approx(w.bias)
    assert weighed().weights == w  # the same letters, the same weights


def test_word_weights_survive_the_file_and_a_bad_weight_is_a_clear_error(tmp_path: Path) -> None:
    t = weighed()
    tokens.save(t, tmp_path)
    assert tokens.load(tmp_path) == t
    raw = json.loads((tmp_path / tokens.FILE).read_text())
    raw["weights"]["tokens"]["viagra"] = "nan"
    (tmp_path / tokens.FILE).write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="finite"):
        tokens.load(tmp_path)
    raw["weights"]["tokens"] = {f"w{i}": 0.1 for i in range(tokens.MAX_WEIGHTS + 1)}
    (tmp_path / tokens.FILE).write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="word weights"):
        tokens.load(tmp_path)


def test_a_model_with_word_weights_reads_them_and_the_shipped_one_has_them() -> None:
    from pochta.antispam.verdict import Analyzer

    raw = letter(subject="free viagra", text="click here for free viagra")
    with_weights = Analyzer(tokens=weighed()).analyze(parse(raw))
    t = weighed()
    assert t.weights is not None
    got = with_weights.features[tokens.WEIGHTS_FEATURE]
    assert got == t.weights.score(tokens.tokenize(parse(raw))) and got > 0
    assert tokens.WEIGHTS_FEATURE not in Analyzer(tokens=table()).analyze(parse(raw)).features
    shipped = booster.load()
    assert shipped is not None and shipped.tokens is not None
    assert shipped.tokens.weights is not None  # since issue 28's words28: the column is back
    assert shipped.tokens.weight_scale > 0
    f = Scanner(model=shipped).scan(raw).features
    assert f[tokens.WEIGHTS_FEATURE] == shipped.tokens.weights.score(tokens.tokenize(parse(raw)))
    low = shipped.probability({**f, tokens.WEIGHTS_FEATURE: -10.0})
    assert shipped.probability({**f, tokens.WEIGHTS_FEATURE: 10.0}) > low  # the model reads it


def test_learned_counts_move_the_weights_column_by_the_calibrated_log_odds() -> None:
    """What the installation or a user learned moves ``tokens.weights``: each word whose
    counts changed, by weight_scale x how far its f(w)'s log-odds moved; nothing learned,
    the shipped weights' score exactly."""
    t = weighed()
    assert t.weights is not None
    scale = t.weight_scale
    assert scale > 0  # the fitted weights lean as the words' counts do
    assert table().weight_scale == 0.0 and table().weighed(["viagra"], table()) is None
    letter_ = ["viagra", "kernel", "brandnew"]
    plain = t.weights.score(letter_)
    assert t.weighed(letter_, t) == plain  # the table itself: nothing was learned
    more = dataclasses.replace(t, spam_letters=t.spam_letters + 12, ham_letters=t.ham_letters)
    # a learned table over more letters, the letter's words not among them: no move either
    assert t.weighed(letter_, more) == plain
    as_ham = {**t.counts, "viagra": (t.counts["viagra"][0], t.counts["viagra"][1] + 12)}
    down = t.weighed(letter_, dataclasses.replace(t, counts=as_ham, ham_letters=15))
    assert down is not None and down < plain
    as_spam = {**t.counts, "brandnew": (12, 0)}  # a word the shipped table never saw
    up = t.weighed(letter_, dataclasses.replace(t, counts=as_spam, spam_letters=15))
    assert up is not None and up > plain
    learned = dataclasses.replace(t, counts=as_spam, spam_letters=15)
    f = learned.probability("brandnew")
    assert f is not None
    assert up == pytest.approx(plain + scale * tokens.log_odds(f), abs=1e-5)


def test_the_weight_scale_is_the_slope_of_the_weights_on_the_words_log_odds() -> None:
    t = weighed()
    assert t.weights is not None
    xs = [tokens.log_odds(t.probability(w) or 0.5) for w in t.counts]
    ys = [t.weights.weights.get(w, 0.0) for w in t.counts]
    slope = sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
    assert t.weight_scale == pytest.approx(slope)
    assert tokens.log_odds(0.5) == 0.0
    assert tokens.log_odds(1.0) == pytest.approx(math.log(99)) == -tokens.log_odds(0.0)


_WORDS = ["a", "b", "c", "d", "e"]
_COUNT = st.integers(min_value=0, max_value=2**63 - 1)  # a store's counts are 64-bit
_COUNTS = st.dictionaries(st.sampled_from(_WORDS), st.tuples(_COUNT, _COUNT), max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    _COUNTS,
    _COUNTS,
    st.tuples(_COUNT, _COUNT),
    st.tuples(_COUNT, _COUNT),
    st.dictionaries(st.sampled_from(_WORDS), st.floats(-50, 50), max_size=5),
    st.lists(st.sampled_from([*_WORDS, "unknown"]), max_size=8),
)
def test_the_learned_weights_column_is_finite_bounded_and_as_defined_whatever_the_counts(
    shipped_counts: dict[str, tuple[int, int]],
    learned_counts: dict[str, tuple[int, int]],
    shipped_letters: tuple[int, int],
    learned_letters: tuple[int, int],
    weights: dict[str, float],
    letter_: list[str],
) -> None:
    """Counts of 0 (a word never seen as spam, or as ham, or a table of no letters) up to
    64-bit ones: the scale and the column stay finite, and each learned word moves the
    column by at most the scale x the clamped log-odds' whole range."""
    shipped = tokens.TokenTable(
        shipped_counts, *shipped_letters, weights=tokens.WordWeights(0.25, weights)
    )
    merged = {**shipped_counts}
    for w, (s, h) in learned_counts.items():
        a, b = merged.get(w, (0, 0))
        merged[w] = (a + s, b + h)
    table = tokens.TokenTable(
        merged,
        shipped_letters[0] + learned_letters[0],
        shipped_letters[1] + learned_letters[1],
    )
    scale = shipped.weight_scale
    assert math.isfinite(scale)
    got = shipped.weighed(letter_, table)
    assert got is not None and math.isfinite(got)
    assert shipped.weights is not None
    plain = shipped.weights.score(letter_)
    assert shipped.weighed(letter_, shipped) == plain  # nothing learned: the shipped column
    widest = 2 * tokens.log_odds(1.0)
    assert abs(got - plain) <= abs(scale) * widest * len(letter_) + 1e-5
    # the definition, word by word (weighed computes it inlined, with the shipped side cached)
    moved = sum(
        tokens.log_odds(table.probability(t) or 0.5)
        - tokens.log_odds(shipped.probability(t) or 0.5)
        for t in letter_
        if t in table.counts and table.counts[t] != shipped.counts.get(t)
    )
    assert got == pytest.approx(plain + scale * moved, abs=1e-5, rel=1e-9)


def _clues_sorted_per_letter(table: tokens.TokenTable, toks: list[str]) -> list[tuple[str, float]]:
    """The clues as they were found before the table's ranking: f(w) of each token, sorted
    for each letter."""
    found = [(t, f) for t in toks if (f := table.probability(t)) is not None]
    found = [(t, f) for t, f in found if abs(f - 0.5) + 1e-12 >= tokens.MIN_DISTANCE]
    found.sort(key=lambda tf: (-abs(tf[1] - 0.5), tf[0]))
    return found[: tokens.MAX_CLUES]


def _fisher_per_letter(clues: list[tuple[str, float]]) -> float:
    """Fisher's combining as it was done per letter: each clue's f clamped, its logarithms
    taken, summed in the clues' order."""
    if not clues:
        return tokens.NEUTRAL
    ln_f = ln_1f = 0.0
    for _, f in clues:
        f = min(max(f, tokens.CLAMP), 1.0 - tokens.CLAMP)
        ln_f += math.log(f)
        ln_1f += math.log(1.0 - f)
    n = 2 * len(clues)
    spam = 1.0 - tokens._chi2q(-2.0 * ln_1f, n)
    ham = 1.0 - tokens._chi2q(-2.0 * ln_f, n)
    return (spam - ham + 1.0) / 2.0


@settings(max_examples=150, deadline=None)
@given(
    counts=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3),
        st.tuples(st.integers(0, 30), st.integers(0, 30)),
        max_size=60,
    ),
    asked=st.lists(st.text("abcdef", min_size=1, max_size=3), max_size=200),
    letters=st.tuples(st.integers(0, 40), st.integers(0, 40)),
)
def test_ranked_clues_are_the_per_letter_sort(
    counts: dict[str, tuple[int, int]], asked: list[str], letters: tuple[int, int]
) -> None:
    """The table ranks its clue tokens once; a letter's clues, score and shown words are
    those of sorting its own clues (ties by token; a token asked twice counts twice) and
    combining their logarithms: the same floats."""
    table = tokens.TokenTable(counts, *letters)
    expected = _clues_sorted_per_letter(table, asked)
    assert table.clues(asked) == expected
    score = _fisher_per_letter(expected)
    assert table.score(asked) == score
    spam = score > tokens.NEUTRAL
    shown = tuple(t for t, f in expected if (f > 0.5) == spam)[:3]
    assert table.judge(asked, shown=3) == (score, () if score == tokens.NEUTRAL else shown)
    distinct = list(dict.fromkeys(asked))  # a set's clues are found apart: the same ones
    assert table.clues(frozenset(asked)) == _clues_sorted_per_letter(table, distinct)
    assert table.judge(frozenset(asked), shown=3) == table.judge(distinct, shown=3)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.frozensets(st.sampled_from(["cheap", "meeting", "even", "rare", "x", "s:offer"])),
            st.integers(0, 3),
        ),
        max_size=8,
    )
)
def test_the_last_set_judged_is_answered_again_only_when_asked_again(
    asks: list[tuple[frozenset[str], int]],
) -> None:
    """A table keeps its last judgment of a set of tokens: each answer, in any order of sets
    and ``shown``, is what a table that never judged anything gives (the same set asked
    again, another set of the same size, another ``shown``, a list in between)."""
    counts = {"cheap": (40, 1), "meeting": (1, 30), "even": (5, 5), "rare": (2, 0)}
    table = tokens.TokenTable(counts, 50, 60)
    for asked, shown in [*asks, *asks]:
        fresh = tokens.TokenTable(counts, 50, 60)
        assert table.judge(asked, shown=shown) == fresh.judge(asked, shown=shown)
        assert table.judge(sorted(asked), shown=shown) == fresh.judge(asked, shown=shown)
