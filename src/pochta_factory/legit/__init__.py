"""Legitimate commercial mail that pochta writes itself, for training its model. Deterministic.

Why: the training ham of the public corpus (easy-ham-1) is mailing-list discussion of 2002 —
plain text, half of it replies, almost no money, no HTML (see benchmarks/feature_separation.py).
A model trained on it alone learns "HTML, amounts, not a reply = spam", and files a shop's
receipt or a tax office's notice as spam. These letters show it the legitimate side of that
mail: newsletters with List-Unsubscribe and an ESP's tracked links, receipts, shipping
notices, account notices, event invitations, bills, and notices of public bodies and banks sent
from their own domains, in English and Russian, in several layouts, lengths and encodings,
from many invented senders (and a few real public ones) through their own servers or one of
several ESPs, so that no template is the same twice. Since issue 16 also the commercial mail
that made the 2002 corpus's hard ham (:mod:`.more`): HTML-heavy promotions (capital headings,
prices, "click here", many links and images), deal alerts, plain-text digests, travel notices,
software announcements, press releases, mailing-list announcements (Mailman fields) and
automated alerts and reports; half of the senders write as in 2002 (HTML with FONT tags, http
links, no DKIM, 2002 ESPs and list servers, Latin-1 and KOI8-R), half as today.

They are TRAINING letters, generated: never an evaluation set, and never a measure of how
pochta does on real mail. The model's ``info`` says how many were used.

Since issue 28 also short personal letters between two people (:mod:`.personal`,
:func:`personal_letters`, kind "personal"; ``training`` adds PERSONAL of them beside every
COUNT commercial ones).

    letters(count, seed, start, end) -> list[Generated]   # sorted by time, same seed = same bytes
    personal_letters(count, seed=personal.SEED) -> list[Generated]   # the same, kind "personal"
"""

from __future__ import annotations

import datetime
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pochta.types import Envelope
from pochta_factory.legit import compose, more, orgs, personal, render

SEED = 2026
COUNT = 1800
SENDERS = 160  # invented senders; each sends a few letters, some many
RUSSIAN = 0.4  # the share of senders writing in Russian
PERSONAL = 300
"""Short personal letters (:mod:`.personal`) beside every COUNT commercial ones (issue 28)."""
START = datetime.datetime(2002, 8, 22, tzinfo=datetime.UTC).timestamp()
END = datetime.datetime(2002, 12, 2, tzinfo=datetime.UTC).timestamp()
"""The training groups' time span (1st to 99th percentile of their dates), for arrival times
when the training letters' own are not given."""


COMPOSERS = {**compose.COMPOSERS, **more.COMPOSERS}


@dataclass(frozen=True)
class Generated:
    raw: bytes
    envelope: Envelope
    at: float  # when it arrived (Unix time)
    kind: str  # newsletter, receipt, shipping, account, event, bill, government
    lang: str  # en, ru
    sender: str  # the From domain


def families_of(names: Iterable[str]) -> dict[str, int]:
    """How many letters of each family (kind) among generated letters' names
    (``kind/lang/sender``)."""
    return dict(sorted(Counter(n.split("/", 1)[0] for n in names).items()))


def senders(rng: random.Random, count: int = SENDERS) -> list[orgs.Org]:
    out = [orgs.invented(rng, "ru" if rng.random() < RUSSIAN else "en") for _ in range(count)]
    return out + orgs.government(rng)


def letters(
    count: int = COUNT,
    *,
    seed: int = SEED,
    start: float = START,
    end: float = END,
    times: Sequence[float] = (),
) -> list[Generated]:
    """``count`` letters, sorted by arrival. Arrival times are uniform between ``start`` and
    ``end``, or, given ``times`` (the training letters' own), drawn from them with up to a
    day's jitter, so that the generated letters are spread through time as the real ones."""
    rng = random.Random(seed)
    pool_times = sorted(times)
    pool = senders(rng)
    # a few senders write often (a weekly newsletter), most rarely (a shop once a season)
    weights = [rng.choice((1, 1, 1, 2, 3, 6)) for _ in pool]
    out = []
    for _ in range(count):
        org = rng.choices(pool, weights)[0]
        kind = rng.choice(org.kinds)
        if pool_times:
            at = rng.choice(pool_times) + rng.uniform(-43_200, 43_200)
        else:
            at = start + rng.random() * (end - start)
        when = datetime.datetime.fromtimestamp(at, datetime.UTC)
        to = compose.person(rng, org.lang)
        w = compose.Writer(rng, org, to, when)
        content = COMPOSERS[kind](w)
        raw, bounce, ip = render.message(content, org, to, w, when, rng)
        env = Envelope(ip=ip, sender=bounce, recipients=(to.email,))
        out.append(Generated(raw, env, at, kind, org.lang, org.domain))
    out.sort(key=lambda g: g.at)
    return out


def personal_letters(
    count: int,
    *,
    seed: int = personal.SEED,
    start: float = START,
    end: float = END,
    times: Sequence[float] = (),
) -> list[Generated]:
    """``count`` short personal letters (:mod:`.personal`, kind "personal"), sorted by arrival,
    their arrival times as for :func:`letters`."""
    made = personal.letters(count, seed=seed, times=times, start=start, end=end)
    return [Generated(raw, env, at, personal.KIND, lang, domain)
            for at, raw, env, lang, domain in made]  # fmt: skip
