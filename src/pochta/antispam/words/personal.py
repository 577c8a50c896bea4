"""A user's own words in the verdict of the letters they receive.

Every "spam" / "not spam" a user says (:mod:`pochta.mailbox.feedback`) teaches the
installation's words and the user's own table (owner = the account's id). The installation's
table moves everyone's statistic a little; the user's own is read for that user only, as
SpamAssassin's per-user Bayes is. SpamAssassin's stands alone, so it waits for 200 letters of
each kind before it says anything; pochta's own table is read *on top of* the shipped and the
installation's, which already know most words, so it can count much sooner:

    the rule (:class:`PersonalRule`): once a user has taught at least ``min_spam`` letters as
    spam and ``min_ham`` as not spam, a letter's word statistic for that user reads
    shipped + installation + ``weight`` x the user's own counts (words and letters alike);
    before that, the user's letters get the installation's verdict unchanged.

Since the user's word is already in the installation's table once, ``weight`` is how much more
it counts for its own author. The figures behind the defaults: BENCHMARKS.md ("Personal
learning", ``benchmarks/personal_replay.py``).

Cheap for users who taught nothing: :class:`Personal` keeps the set of owners past the rule,
refreshed every ``refresh`` seconds from the store (one read of every owner's totals, made by
one caller while the others go on with the set they have); for anyone else
``Scanner.for_owner`` returns the verdict it was given without reading anything.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pochta.antispam import tokens as tokens_mod
from pochta.antispam.words import (
    FEEDBACK_WEIGHT,
    INSTALLATION,
    MAX_HASHES,
    Words,
    merged_table,
)
from pochta.errors import StorageError


@dataclass(frozen=True, slots=True)
class PersonalRule:
    min_spam: int = 3  # letters the user said were spam
    min_ham: int = 1  # letters the user said were not spam
    weight: int = 2  # how many times the user's counts are added to the installation's
    bound: float = 1.0  # log-odds the user's own words may add or take after the model (0: none)
    # letters of each kind a user must have taught before the own term may use all of
    # ``bound`` (0: at once): with 3 spam and 1 ham taught, every word of the spam absent from
    # the one ham letter is a clue, and the term would push ordinary letters toward spam
    ramp: int = 3

    def ready(self, totals: tuple[int, int]) -> bool:
        """Whether an owner with these learned letters (weighted, as stored) counts."""
        spam, ham = totals
        return spam >= self.min_spam * FEEDBACK_WEIGHT and ham >= self.min_ham * FEEDBACK_WEIGHT

    def own_bound(self, totals: tuple[int, int]) -> float:
        """The part of ``bound`` the own term may use for an owner with these learned
        letters (weighted, as stored): ``bound`` times the scarcer kind's letters over
        ``ramp``, at most ``bound`` (pure)."""
        if self.ramp <= 0:
            return self.bound
        taught = min(totals) / (self.ramp * FEEDBACK_WEIGHT)
        return self.bound * min(1.0, max(taught, 0.0))


def own_term(score: float, bound: float) -> float:
    """The log-odds a user's own words add after the model: their own Fisher score (0 all
    ham, 1 all spam, 0.5 nothing known), moved to [-1, 1], times ``bound`` (pure)."""
    if not bound or not math.isfinite(score):
        return 0.0
    return bound * (2.0 * min(max(score, 0.0), 1.0) - 1.0)


def shifted(probability: float, term: float) -> float:
    """``probability`` with ``term`` added to its log-odds (pure)."""
    if not term:
        return probability
    p = min(max(probability, 1e-9), 1.0 - 1e-9)
    return 1.0 / (1.0 + math.exp(-(math.log(p / (1.0 - p)) + term)))


def blended(
    installation: Mapping[int, tuple[int, int]],
    installation_totals: tuple[int, int],
    own: Mapping[int, tuple[int, int]],
    own_totals: tuple[int, int],
    weight: int,
) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
    """The installation's counts plus ``weight`` x the owner's, words and letters (pure)."""
    out = dict(installation)
    for h, (s, m) in own.items():
        a, b = out.get(h, (0, 0))
        out[h] = (a + weight * s, b + weight * m)
    totals = (
        installation_totals[0] + weight * own_totals[0],
        installation_totals[1] + weight * own_totals[1],
    )
    return out, totals


class Personal:
    """Which owners' words count (:class:`PersonalRule`), and their blended tables."""

    def __init__(
        self,
        words: Words,
        rule: PersonalRule | None = None,
        *,
        refresh: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.words = words
        self.rule = rule if rule is not None else PersonalRule()
        self.refresh_seconds = refresh
        self.clock = clock
        self._ready: frozenset[int] = frozenset()
        self._next = 0.0  # when the set is refreshed next (0: at first use)
        self._refreshing = threading.Lock()

    def ready(self, owner: int) -> bool:
        """Whether ``owner``'s words count (the cached set; refreshed when stale)."""
        if self.clock() >= self._next and self._refreshing.acquire(blocking=False):
            try:
                self.refresh()
            except StorageError:
                self._next = self.clock() + self.refresh_seconds  # the old set, until then
            finally:
                self._refreshing.release()
        return owner in self._ready

    def refresh(self) -> frozenset[int]:
        """Read which owners are past the rule now: one read of every owner's totals
        (StorageError)."""
        ready = frozenset(
            owner
            for owner, totals in self.words.all_totals().items()
            if owner != INSTALLATION and self.rule.ready(totals)
        )
        self._ready = ready
        self._next = self.clock() + self.refresh_seconds
        return ready

    def table(
        self, owner: int, tokens: Sequence[str], hashes: Sequence[int]
    ) -> tokens_mod.TokenTable:
        """One letter's table for ``owner``: shipped + installation + weight x own
        (StorageError)."""
        return self.tables(owner, tokens, hashes)[0]

    def tables(
        self,
        owner: int,
        tokens: Sequence[str],
        hashes: Sequence[int],
        shipped: tokens_mod.TokenTable | None = None,
    ) -> tuple[tokens_mod.TokenTable, tokens_mod.TokenTable]:
        """One letter's tables for ``owner``: shipped + installation + weight x own, and
        the owner's own words alone (what :func:`own_term` reads). StorageError.
        ``shipped``: the model's table the caller read (None: the words' current one), so
        that a model switched meanwhile cannot give the tables one table and the caller's
        ``tokens.weights`` (:meth:`pochta.antispam.tokens.TokenTable.weighed`) another."""
        w = self.words
        if shipped is None:
            shipped = w.shipped
        hashes = list(hashes)[:MAX_HASHES]
        tokens = list(tokens)[: len(hashes)]
        inst, inst_totals = w.learned(INSTALLATION, hashes)
        own, own_totals = w.learned(owner, hashes)
        learned, totals = blended(inst, inst_totals, own, own_totals, self.rule.weight)
        return (
            merged_table(tokens, hashes, shipped, learned, totals, w.key),
            merged_table(tokens, hashes, None, own, own_totals, w.key),
        )
