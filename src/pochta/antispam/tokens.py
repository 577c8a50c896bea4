"""The words a letter shares with spam and with legitimate mail: a token statistic. Pure.

The content model reads the letter's shape (signs, links, capitals, authentication...), not
its words; spam's vocabulary ("remove me", "mortgage", "$$$") is the one thing that shape does
not show. This is the classic statistic for it, as SpamBayes computes it:

- a letter's tokens are its distinct words (subject words marked ``s:``), lower-cased, cut
  from the visible text at white space with punctuation stripped, 3 to 20 characters, at most
  :data:`MAX_TOKENS` of them (the first ones): linear in the text, bounded; and, as
  SpamBayes and SpamAssassin's Bayes read the header too, the sender (``from:`` its address,
  ``fromdomain:`` its domain, ``fromname:`` the words of its display name) and the
  registrable domain of each of the first :data:`MAX_LINK_TOKENS` links (``url:``): an
  installation learns which senders and linked sites its mail comes with;
- a token's spam probability is Robinson's ``f(w) = (s·x + n·p) / (s + n)``, ``p`` the share of
  its occurrences in spam with each class's count normalized by its number of letters, ``n``
  the letters it was seen in, ``x = 0.5`` and strength ``s = 1`` (a token seen once is a weak
  clue);
- the letter's score combines the :data:`MAX_CLUES` tokens farthest from 0.5 (at least
  :data:`MIN_DISTANCE` away) with Fisher's chi-square method: 0 all ham, 1 all spam, 0.5
  nothing known or both at once (:func:`TokenTable.score`).

The table is learned from the training letters only (:func:`learn`, called by
``pochta model train``) and ships beside the model (``tokens.json``); the model reads the
score as ``tokens.score``, monotone toward spam, 0.5 when the letter has no known word.

A model trained by ``pochta model train`` also carries :class:`WordWeights` in the same file:
a logistic regression over the same words (one weight per word, fitted on the training
letters by :mod:`pochta_factory.wordweights`), read as a second column ``tokens.weights``,
the letter's log-odds from its words (0 when none is known). Fisher's score judges each word
by its own counts; the regression weighs words against each other (a word that only comes
with another spam word adds little), which out of fold separates the corpus's spam from its
ham better at the ham rates the goals allow (BENCHMARKS.md). What the installation and its
users learn later (:mod:`pochta.antispam.words`) moves both columns: ``tokens.score`` is read
from the shipped plus learned counts, and each word whose counts learning changed moves
``tokens.weights`` by how far its f(w)'s log-odds moved, times the model's
:attr:`TokenTable.weight_scale` (:meth:`TokenTable.weighed`): with nothing learned the column
is the shipped weights' score, and a word people taught weighs as its new counts say.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import islice, repeat
from pathlib import Path
from typing import Any

from pochta.errors import ConfigError
from pochta.mime.letter import Letter

FILE = "tokens.json"
FEATURE = "tokens.score"
WEIGHTS_FEATURE = "tokens.weights"
MAX_WEIGHTS = 200_000
"""Words a model's :class:`WordWeights` may carry (a file with more is refused)."""
NEUTRAL = 0.5

MIN_LEN, MAX_LEN = 3, 20
MAX_TOKENS = 3000
"""Distinct tokens read from one letter (subject first, then the text from its start)."""
MAX_TEXT = 200_000
"""Characters of visible text read (the same bound as the other content checks)."""
STRIP = ".,;:!?()[]\"'<>*`{}|=+#~^"

STRENGTH, PRIOR = 1.0, 0.5
MIN_DISTANCE = 0.1
MAX_CLUES = 150
MIN_LETTERS = 2
"""A token kept in the table was seen in at least this many training letters."""
CLAMP = 0.01


MAX_LINK_TOKENS = 50
"""Links whose domains are read as tokens (the first ones)."""


def tokenize(letter: Letter) -> frozenset[str]:
    """The letter's distinct tokens (see the module's doc)."""
    out: set[str] = set()
    for word in letter.subject.lower().split():
        word = word.strip(STRIP)
        if MIN_LEN <= len(word) <= MAX_LEN:
            out.add("s:" + word)
    address = letter.from_address.lower()
    if address:
        out.add("from:" + address[:100])
        out.add("fromdomain:" + (letter.from_domain or "")[:100])
    for word in letter.from_name.lower().split():
        word = word.strip(STRIP)
        if MIN_LEN <= len(word) <= MAX_LEN:
            out.add("fromname:" + word)
    for link in letter.web_links[:MAX_LINK_TOKENS]:
        out.add("url:" + link.registrable[:100])
    words = letter.text[:MAX_TEXT].lower().split()
    distinct = set(map(str.strip, words, repeat(STRIP)))  # a word's length read once
    every = {w for w in distinct if MIN_LEN <= len(w) <= MAX_LEN}
    if len(out) + len(every) <= MAX_TOKENS:  # the bound is not reached: every word is read
        return frozenset(out | every)
    for word in words:
        if len(out) >= MAX_TOKENS:
            break
        word = word.strip(STRIP)
        if MIN_LEN <= len(word) <= MAX_LEN:
            out.add(word)
    return frozenset(out)


_KEYED: dict[bytes, Any] = {}
"""Per key, a BLAKE2b state that has read the key and the personalization (hashing a token
copies it: the same digest as a new keyed hash, without compressing the key's block again)."""


def _keyed(key: bytes) -> Any:
    state = _KEYED.get(key)
    if state is None:
        state = hashlib.blake2b(digest_size=8, key=key, person=b"pochta-word")
        if len(_KEYED) < 16:
            _KEYED[key] = state
    return state


def token_hash(token: str, key: bytes = b"") -> int:
    """A word's 64-bit name in the learned table (:mod:`pochta.antispam.words`): the table
    keeps hashes, never the words of people's letters, and with the installation's ``key``
    (at most 64 bytes) a short word (a code, a password) cannot be found again by hashing
    every candidate."""
    h = _keyed(key).copy()
    h.update(token.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest(), "big")


def hashed(tokens: Iterable[str], key: bytes = b"") -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The tokens, and their hashes (with ``key``) in the same order."""
    ordered = tuple(tokens)
    copy = _keyed(key).copy
    from_bytes = int.from_bytes
    out: list[int] = []
    append = out.append
    for t in ordered:
        h = copy()
        h.update(t.encode("utf-8", "surrogatepass"))
        append(from_bytes(h.digest(), "big"))
    return ordered, tuple(out)


def _chi2q(x2: float, freedom: int) -> float:
    """P(chi-square with ``freedom`` (even) degrees of freedom >= ``x2``)."""
    m = x2 / 2.0
    total = term = math.exp(-m)
    for i in range(1, freedom // 2):
        term *= m / i
        total += term
    return min(total, 1.0)


@dataclass(frozen=True)
class WordWeights:
    """A logistic regression over a letter's tokens: ``bias`` plus the weight of each token
    it has (unknown tokens weigh 0)."""

    bias: float
    weights: Mapping[str, float]

    def score(self, tokens: Iterable[str]) -> float:
        """The letter's log-odds of spam from its words alone."""
        w = self.weights
        return round(self.bias + sum(w.get(t, 0.0) for t in tokens), 6)

    def as_dict(self) -> dict[str, Any]:
        return {"bias": self.bias, "tokens": dict(sorted(self.weights.items()))}

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> WordWeights:
        weights = {str(t): float(w) for t, w in raw["tokens"].items()}
        if len(weights) > MAX_WEIGHTS:
            raise ValueError(f"more than {MAX_WEIGHTS} word weights")
        if not all(math.isfinite(w) for w in weights.values()):
            raise ValueError("a word weight is not a finite number")
        bias = float(raw["bias"])
        if not math.isfinite(bias):
            raise ValueError("the word weights' bias is not a finite number")
        return WordWeights(bias, weights)


@dataclass(frozen=True)
class TokenTable:
    """Per token: the training letters it was seen in, spam and ham; ``weights``: the
    model's word weights, when it was trained with them (only a model's own table)."""

    counts: Mapping[str, tuple[int, int]]
    spam_letters: int
    ham_letters: int
    weights: WordWeights | None = None

    @cached_property
    def _by_key(self) -> dict[bytes, dict[int, tuple[int, int]]]:
        return {}

    def by_hash(self, key: bytes = b"") -> dict[int, tuple[int, int]]:
        """The counts keyed by :func:`token_hash` with ``key`` (to add a learned table's to
        them; computed once per key)."""
        table = self._by_key.get(key)
        if table is None:
            if len(self._by_key) >= BY_HASH_KEYS:  # a table shared by builds: bounded
                self._by_key.clear()
            table = self._by_key[key] = {token_hash(t, key): c for t, c in self.counts.items()}
        return table

    def probability(self, token: str) -> float | None:
        """Robinson's f(w); None for a token never seen."""
        c = self.counts.get(token)
        if c is None:
            return None
        return self._f(c)

    def _f(self, c: tuple[int, int]) -> float:
        return _robinson(c[0], c[1], max(self.spam_letters, 1), max(self.ham_letters, 1))

    @cached_property
    def _clues(self) -> dict[str, float]:
        """f(w) of every token that can be a clue (computed once per table: the shipped
        table's for every letter a process reads)."""
        out = {}
        spam, ham = max(self.spam_letters, 1), max(self.ham_letters, 1)
        for t, (s, h) in self.counts.items():
            f = _robinson(s, h, spam, ham)
            if abs(f - 0.5) + 1e-12 >= MIN_DISTANCE:  # 0.4 as 0.6
                out[t] = f
        return out

    @cached_property
    def _ranked(self) -> tuple[dict[str, int], list[tuple[str, float]], list[float], list[float]]:
        """The clue tokens in the order :meth:`clues` gives them (farthest from 0.5 first,
        then by token: a total order, each token once), as a place per token; per place the
        (token, f(w)) and the two logarithms Fisher's combining adds for it (of f clamped to
        [CLAMP, 1 - CLAMP]). Computed once per table: a letter's clues are then
        its tokens' places, sorted as ints."""
        order = sorted(self._clues.items(), key=lambda tf: (-abs(tf[1] - 0.5), tf[0]))
        place = {t: i for i, (t, _) in enumerate(order)}
        ln_f, ln_1f = [], []
        for _, f in order:
            f = min(max(f, CLAMP), 1.0 - CLAMP)
            ln_f.append(math.log(f))
            ln_1f.append(math.log(1.0 - f))
        return place, order, ln_f, ln_1f

    def _places(self, tokens: Iterable[str]) -> list[int]:
        """The places (see :attr:`_ranked`) of the tokens that count, surest first (a token
        given twice counts twice, as in :meth:`clues`)."""
        place = self._ranked[0]
        if isinstance(tokens, (set, frozenset)):  # distinct: the known ones found in C
            found = list(map(place.__getitem__, place.keys() & tokens))
        else:
            found = [place[t] for t in tokens if t in place]
        found.sort()
        return found[:MAX_CLUES]

    def clues(self, tokens: Iterable[str]) -> list[tuple[str, float]]:
        """The tokens that count, farthest from 0.5 first."""
        order = self._ranked[1]
        return [order[i] for i in self._places(tokens)]

    def score(self, tokens: Iterable[str]) -> float:
        """Fisher's combining of the clues: near 1 spam's words, near 0 ham's, 0.5 neither."""
        return self.judge(tokens)[0]

    def judge(self, tokens: Iterable[str], shown: int = 0) -> tuple[float, tuple[str, ...]]:
        """The score and the ``shown`` clues that lean the way the score does, surest first
        (what an explanation names). The last judgment of a set of tokens is kept: the same
        set asked again (a worker's analysis, then its learned words when nothing is
        learned) is answered from it."""
        if isinstance(tokens, frozenset):
            last = self._last[0]
            if last is not None and last[1] == shown and last[0] == tokens:
                return last[2]
            judged = self._judged(tokens, shown)
            self._last[0] = (tokens, shown, judged)  # one slot, replaced whole: thread-safe
            return judged
        return self._judged(tokens, shown)

    @cached_property
    def _last(self) -> list[tuple[frozenset[str], int, tuple[float, tuple[str, ...]]] | None]:
        return [None]

    def _judged(self, tokens: Iterable[str], shown: int) -> tuple[float, tuple[str, ...]]:
        places = self._places(tokens)
        score = self._combined(places)
        if not shown or score == NEUTRAL:
            return score, ()
        spam = score > NEUTRAL
        leaning = (t for t, f in map(self._ranked[1].__getitem__, places) if (f > 0.5) == spam)
        return score, tuple(islice(leaning, shown))  # the first ``shown``: no more are read

    def _combined(self, places: Sequence[int]) -> float:
        """Fisher's combining of the clues at ``places``, surest first: the sums of their
        logarithms (read from :attr:`_ranked`, not computed again) and chi-squared tails."""
        if not places:
            return NEUTRAL
        _, _, logs_f, logs_1f = self._ranked
        ln_f = ln_1f = 0.0
        for i in places:
            ln_f += logs_f[i]
            ln_1f += logs_1f[i]
        n = 2 * len(places)
        spam = 1.0 - _chi2q(-2.0 * ln_1f, n)
        ham = 1.0 - _chi2q(-2.0 * ln_f, n)
        return (spam - ham + 1.0) / 2.0

    @cached_property
    def _odds(self) -> dict[str, float]:
        """Each token's :func:`log_odds` of its f(w) (computed once per table: what
        :meth:`weighed` moves a learned word's from, and :attr:`weight_scale` reads)."""
        return {t: log_odds(self._f(c)) for t, c in self.counts.items()}

    @cached_property
    def weight_scale(self) -> float:
        """What one unit of a word's log-odds ``log(f / (1 - f))`` (f: :meth:`probability`,
        clamped as the clues are) is worth in the word weights' log-odds: the least-squares
        slope through 0 of each token's weight (0 when it has none) on its log-odds, over the
        table's tokens; 0 for a table without weights. Computed once per table (with the
        tokens' log-odds :meth:`weighed` reads)."""
        weights = self.weights
        if weights is None:
            return 0.0
        xy = xx = 0.0
        for t, x in self._odds.items():
            xy += x * weights.weights.get(t, 0.0)
            xx += x * x
        return xy / xx if xx else 0.0

    def weighed(self, tokens: Collection[str], table: TokenTable) -> float | None:
        """``tokens.weights`` of a letter whose words are counted in ``table`` (this shipped
        table's counts plus learned ones, :func:`pochta.antispam.words.merged_table`): this
        table's weights' score, plus, for each token whose counts in ``table`` are not this
        table's own (it was learned), :attr:`weight_scale` times how far its f(w)'s log-odds
        moved (an unknown word's from 0). None when this table has no weights. Pure."""
        weights = self.weights
        if weights is None:
            return None
        own, odds, learned = self.counts, self._odds, table.counts
        spam, ham = max(table.spam_letters, 1), max(table.ham_letters, 1)
        low, high, log = CLAMP, 1.0 - CLAMP, math.log
        moved = 0.0
        for t in tokens:  # log_odds(table._f(c)) inlined: ~90 learned words a letter
            c = learned.get(t)
            if c is None or c == own.get(t):
                continue
            f = _robinson(c[0], c[1], spam, ham)
            f = low if f < low else high if f > high else f
            moved += log(f / (1.0 - f)) - odds.get(t, 0.0)
        if not moved:
            return weights.score(tokens)
        return round(weights.score(tokens) + self.weight_scale * moved, 6)

    def as_json(self) -> str:
        out: dict[str, Any] = {
            "spam_letters": self.spam_letters,
            "ham_letters": self.ham_letters,
            "tokens": {t: list(c) for t, c in sorted(self.counts.items())},
        }
        if self.weights is not None:
            out["weights"] = self.weights.as_dict()
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _robinson(s: int, h: int, spam_letters: int, ham_letters: int) -> float:
    """Robinson's f(w) of a token seen in ``s`` of ``spam_letters`` spam letters and ``h`` of
    ``ham_letters`` ham ones (each at least 1)."""
    ps, ph = s / spam_letters, h / ham_letters
    p = ps / (ps + ph) if ps + ph else PRIOR
    n = s + h
    return (STRENGTH * PRIOR + n * p) / (STRENGTH + n)


def log_odds(f: float) -> float:
    """``log(f / (1 - f))`` of a word's spam probability, clamped to [CLAMP, 1 - CLAMP] as
    Fisher's combining clamps it."""
    f = min(max(f, CLAMP), 1.0 - CLAMP)
    return math.log(f / (1.0 - f))


def learn(tokens: Sequence[Iterable[str]], labels: Sequence[int]) -> TokenTable:
    """The table of these letters (label 1: spam), tokens seen in fewer than
    :data:`MIN_LETTERS` letters left out."""
    spam: Counter[str] = Counter()
    ham: Counter[str] = Counter()
    for toks, label in zip(tokens, labels, strict=True):
        (spam if label else ham).update(toks)
    n_spam = sum(1 for y in labels if y)
    counts = {
        t: (spam[t], ham[t]) for t in spam.keys() | ham.keys() if spam[t] + ham[t] >= MIN_LETTERS
    }
    return TokenTable(counts, n_spam, len(labels) - n_spam)


def save(table: TokenTable, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / FILE).write_text(table.as_json() + "\n")


def load(directory: Path, *, keep: bool = True) -> TokenTable | None:
    """The table beside a model (None when the model has none). A table read before by this
    process (the same bytes) is returned again: a table is never changed once made, and
    every build of the services (and every model switch) reads the same ~350 KB file.
    ``keep=False``: a table read now is not kept for later (the fork server's warm-up: ~3 MB
    every worker it forks would inherit and never read)."""
    path = directory / FILE
    if not path.is_file():
        return None
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot load the token table {path}: {exc}") from exc
    digest = hashlib.sha256(body).digest()
    with _LOADED_LOCK:
        table = _LOADED.get(digest)
        if table is not None:
            _LOADED.move_to_end(digest)
            return table
    try:
        raw = json.loads(body)
        counts = {str(t): (int(c[0]), int(c[1])) for t, c in raw["tokens"].items()}
        weights = WordWeights.from_dict(raw["weights"]) if "weights" in raw else None
        letters = int(raw["spam_letters"]), int(raw["ham_letters"])
        if min(letters) < 0 or any(c[0] < 0 or c[1] < 0 for c in counts.values()):
            raise ValueError("a count below 0")
        table = TokenTable(counts, *letters, weights)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise ConfigError(f"cannot load the token table {path}: {exc}") from exc
    if not keep:
        return table
    with _LOADED_LOCK:
        _LOADED[digest] = table
        while len(_LOADED) > _LOADED_MAX:
            _LOADED.popitem(last=False)
    return table


_LOADED: OrderedDict[bytes, TokenTable] = OrderedDict()  # by the SHA-256 of the file's bytes
BY_HASH_KEYS = 4  # words keys a table keeps its hashed counts for (one per installation)
_LOADED_MAX = 4  # tables kept (the shipped one, a live version, the one before...)
_LOADED_LOCK = threading.Lock()
