"""A letter's verdict, and why. Two halves, so that the costly one runs off the server:

    analysis   ``Analyzer.analyze(letter)``: pure CPU on the parsed letter, run in a worker
               process (:mod:`pochta.mailbox.intake`) within a time budget: the phishing signs
               (signs/), sender authentication (auth/: with a DNS resolver here; in a worker,
               only its plan, finished by the server: ``Analysis.authenticated``), content
               features (features.py) and the shingles (shingles/extract.py).
    decision   ``Scanner.decide(analysis)``: where the shingle counters live (the server): the
               shingles' counters over 1 h / 24 h / 14 d as features
               (``shingle.<type>.<stat>_<window>``), the rules file's points (rules/), and the
               CatBoost model's P(spam) (model/); without a model, the rules' thresholds.

Past the budget, the stages not started are skipped and the analysis says which
(``partial``): the verdict is then given from what finished, and ``X-Pochta-Spam`` says
``partial=...``. Every stage reads a bounded amount of the letter in linear time, so the budget
is a safety net, not the rule.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pochta import metrics
from pochta.antispam import features as feats_mod
from pochta.antispam import tokens as tokens_mod
from pochta.antispam import words as words_mod
from pochta.antispam.auth import results as auth_mod
from pochta.antispam.auth.resolver import Resolver
from pochta.antispam.model import explain as explaining
from pochta.antispam.model.booster import Model
from pochta.antispam.rules import ruleset as rules
from pochta.antispam.shingles.counters import Packed, Ref, unpack
from pochta.antispam.shingles.counters.buckets import KINDS, Counts, Flat, parse_window, zeros
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import (
    UNIQUE_TYPES,
    Shingle,
    ShingleType,
    query_refs,
    update_refs,
)
from pochta.antispam.signs import checks as phishing
from pochta.antispam.signs.forwarders import Forwarders
from pochta.antispam.signs.protected import Protected
from pochta.antispam.signs.protected import default as default_protected
from pochta.antispam.signs.registry import SYMBOLS, Sign
from pochta.antispam.words import Words
from pochta.antispam.words.personal import Personal, own_term, shifted
from pochta.errors import StorageError
from pochta.mime import normalize
from pochta.mime.letter import Letter, parse
from pochta.types import Envelope, Listed

log = logging.getLogger("pochta.antispam")

Label = Literal["ham", "spam", "phishing"]

STAGES = ("signs", "auth", "features", "shingles")
WINDOWS = ("1h", "24h", "14d")
STATS = (
    "volume", "spam_ratio", "ham_ratio", "complaint_ratio", "unspam_ratio", "read_ratio",
    "spam_lean",
)  # fmt: skip
SHINGLE_FEATURES: tuple[str, ...] = tuple(
    f"shingle.{int(t)}.{stat}_{w}" for t in ShingleType for stat in STATS for w in WINDOWS
)
WORDS_SHOWN = 5
"""Words an explanation of ``tokens.score`` names."""
LEAN_PRIOR = 2.0
"""Pseudo-letters in :func:`spam_lean`: one letter seen moves the lean to +-1/3, ten to +-0.83."""
FEEDBACK_WEIGHT = words_mod.FEEDBACK_WEIGHT
"""How many letters one person's "spam" / "not spam" stands for, in :func:`spam_lean` and in
the learned words."""


@dataclass(frozen=True)
class Analysis:
    """What a worker learns of one letter (picklable: it crosses the process boundary)."""

    signs: tuple[Sign, ...]
    auth: auth_mod.AuthResults
    features: dict[str, float] = field(repr=False)  # content, signs, authentication
    shingles: tuple[Shingle, ...] = field(repr=False)
    partial: tuple[str, ...] = ()  # stages skipped (or cut short) by the time budget
    seconds: dict[str, float] = field(default_factory=dict, repr=False)  # CPU per stage
    words: tuple[str, ...] = ()  # the surest words behind tokens.score (for explanations)
    # tokens_mod.tokenize, and their token_hash in order (a tuple each, but in the answer of a
    # worker that decided the letter: packed, pochta.antispam.packed)
    tokens: Sequence[str] = field(default=(), repr=False)
    hashes: Sequence[int] = field(default=(), repr=False)
    plan: auth_mod.AuthPlan | None = field(default=None, repr=False)  # auth left to the server
    # signs an exemption resting on the From domain withheld (signs.checks.Findings): the
    # decision adds them when authentication shows the From domain forged (from_forged)
    withheld: tuple[Sign, ...] = ()
    # the registrable domains whose From the exemptions trust (verdict.readers: the readers',
    # a protected organization's): from_forged reads them
    readers: tuple[str, ...] = ()

    def authenticated(self, results: auth_mod.AuthResults) -> Analysis:
        """This analysis with the authentication the server finished (``plan``): the results
        and their features (what the rules and the model read of them)."""
        features = {**self.features, **feats_mod.from_auth(results)}
        return dataclasses.replace(self, auth=results, features=features, plan=None)


class Analyzer:
    """The analysis half: one per process (the worker's initializer builds it once).
    ``resolver``: SPF / DKIM / DMARC are checked (None: not run), all of one letter's DNS
    within ``dns_lifetime`` seconds. ``plan_auth`` (instead of a resolver): they are left to
    the server, which asks DNS without blocking (:mod:`pochta.antispam.auth.authenticator`);
    the analysis carries what it needs (``Analysis.plan``). ``budget``: seconds one letter may
    take before the stages not yet started are skipped (None: no budget). ``forwarders``: the
    installation's trusted forwarders, whose Received fields the sender checks read past."""

    def __init__(
        self,
        *,
        resolver: Resolver | None = None,
        protected: Protected | None = None,
        shorteners: frozenset[str] | None = None,
        budget: float | None = None,
        tokens: tokens_mod.TokenTable | None = None,
        dns_lifetime: float = auth_mod.DNS_LIFETIME,
        word_key: bytes = b"",
        plan_auth: bool = False,
        forwarders: Forwarders | None = None,
    ) -> None:
        self.resolver = resolver
        self.forwarders = forwarders  # antispam.trusted_forwarders (signs.forwarders)
        self.plan_auth = plan_auth and resolver is None
        self.word_key = word_key  # the learned words' hash key (pochta.antispam.words)
        self.dns_lifetime = dns_lifetime
        self.tokens = tokens
        self.protected = protected
        self.shorteners = shorteners
        self.budget = budget

    def analyze(
        self,
        letter: Letter,
        envelope: Envelope | None = None,
        helo: str | None = None,
        *,
        started: float | None = None,
    ) -> Analysis:
        """``started``: the ``time.monotonic()`` the budget counts from (default: now; a
        caller that parsed the letter first passes the time before the parse)."""
        t0 = time.monotonic() if started is None else started
        deadline = None if self.budget is None else t0 + self.budget
        skipped: list[str] = []
        seconds: dict[str, float] = {}
        words: tuple[str, ...] = ()
        tokens: tuple[str, ...] = ()
        hashes: tuple[int, ...] = ()

        def late() -> bool:
            return deadline is not None and time.monotonic() > deadline

        clock = time.process_time()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.process_time()
            seconds[stage] = now - clock
            clock = now

        found = phishing.find(
            letter,
            envelope,
            protected=self.protected,
            shorteners=self.shorteners,
            deadline=deadline,
            forwarders=self.forwarders,
        )
        signs, complete = found.signs, found.complete
        if not complete:
            skipped.append("signs")
        lap("signs")
        ar = auth_mod.unchecked(envelope.sender if envelope else None, helo, letter)
        plan = None
        checked = self.resolver is not None or self.plan_auth
        if checked and envelope is not None and envelope.ip:
            if late():
                skipped.append("auth")
            elif self.resolver is None:
                plan = auth_mod.plan(letter.raw, letter)
            else:
                ar = auth_mod.authenticate(
                    letter.raw,
                    ip=envelope.ip,
                    mail_from=envelope.sender or "",
                    helo=helo or "",
                    resolver=self.resolver,
                    letter=letter,
                    lifetime=self.dns_lifetime,
                )
        lap("auth")
        f = {**feats_mod.from_signs(signs), **feats_mod.from_auth(ar)}
        if late():
            skipped.append("features")
        else:
            f.update(
                feats_mod.extract(
                    letter, protected=self.protected, shorteners=self.shorteners, envelope=envelope
                )
            )
            distinct = tokens_mod.tokenize(letter)
            tokens, hashes = tokens_mod.hashed(distinct, self.word_key)
            if self.tokens is not None:  # the set: its clues found without a Python loop
                f[tokens_mod.FEATURE], words = self.tokens.judge(distinct, shown=WORDS_SHOWN)
                if self.tokens.weights is not None:
                    f[tokens_mod.WEIGHTS_FEATURE] = self.tokens.weights.score(tokens)
        lap("features")
        shingles: list[Shingle] = []
        if late():
            skipped.append("shingles")
        else:
            shingles = extract(letter, envelope)
        lap("shingles")
        return Analysis(
            tuple(signs), ar, f, tuple(shingles), tuple(skipped), seconds, words, tokens, hashes,
            plan, tuple(found.withheld),
            readers(envelope, letter, self.protected or default_protected()),
        )  # fmt: skip


def spam_lean(c: Mapping[str, int]) -> float:
    """Which way the letters carrying a shingle leaned, from -1 (all ham) through 0 (nothing
    known, or as much ham as spam) to +1 (all spam): ``(s - h) / (s + h + LEAN_PRIOR)``.
    ``s`` and ``h`` are the letters counted spam and ham, corrected by people's word: each
    complaint moves FEEDBACK_WEIGHT letters from ham to spam, each "not spam" from spam to ham
    (a person complains about a letter pochta counted ham, and the reverse)."""
    shift = FEEDBACK_WEIGHT * (c.get("complaint", 0) - c.get("unspam", 0))
    s = max(0.0, c.get("spam", 0) + shift)
    h = max(0.0, c.get("ham", 0) - shift)
    return (s - h) / (s + h + LEAN_PRIOR)


def shingle_features(
    shingles: Sequence[Shingle], counts: Sequence[dict[str, Counts]]
) -> dict[str, float]:
    """Per shingle type and window: ``volume`` = log(1 + letters seen), and the share of them
    counted spam / ham, complained about, un-spammed, read. A ratio is absent (not 0) when the
    type was never seen in the window: "unknown" is not "clean" (the rules read these).
    ``spam_lean`` (:func:`spam_lean`, what the model reads) is 0 when nothing is known:
    unknown is neutral, between a shingle seen with ham and one seen with spam."""
    sums: dict[tuple[int, str], dict[str, int]] = {}
    for shingle, by_window in zip(shingles, counts, strict=True):
        t = int(shingle.type)
        for window, values in by_window.items():
            acc = sums.get((t, window))
            if acc is None:
                sums[(t, window)] = dict(values)
                continue
            for kind, value in values.items():
                acc[kind] = acc.get(kind, 0) + value
    out: dict[str, float] = {}
    for (t, window), c in sums.items():
        names = _feature_names(t, window)
        ham, spam = c.get("ham", 0), c.get("spam", 0)
        seen = ham + spam
        if t in _UNIQUE_TYPES:  # distinct pairs: the count is the feature
            seen = max(seen, ham + spam + c.get("complaint", 0))
        out[names[0]] = math.log1p(seen)
        out[names[1]] = spam_lean(c)
        if seen:
            out[names[2]] = spam / seen
            out[names[3]] = ham / seen
            out[names[4]] = c.get("complaint", 0) / seen
            out[names[5]] = c.get("unspam", 0) / seen
            out[names[6]] = c.get("read", 0) / seen
    return out


def shingle_features_flat(
    shingles: Sequence[Shingle], sums: Sequence[Flat], windows: Sequence[str]
) -> dict[str, float]:
    """:func:`shingle_features` of the same counts as plain ints (``Counters.query_flat``:
    for each of ``windows``, the names of its distinct windows, each kind of ``KINDS`` in
    turn): the same features, the same floats (the same operations on the same ints), in the
    same order, with no dict per shingle and window."""
    width = len(KINDS)
    if len(set(windows)) != len(windows):
        raise ValueError(f"windows named twice in {list(windows)}")
    zero = zeros(len(windows))
    acc: dict[int, Flat | list[int]] = {}  # type -> its shingles' sums, in the order first seen
    for shingle, flat in zip(shingles, sums, strict=True):
        t = int(shingle.type)
        total = acc.get(t)
        if total is None or total is zero:
            acc[t] = zero if flat is zero else list(flat)
        elif flat is not zero:
            assert isinstance(total, list)
            for k, v in enumerate(flat):
                total[k] += v
    out: dict[str, float] = {}
    weight = FEEDBACK_WEIGHT
    for t, total in acc.items():
        if total is zero:  # nothing known: log1p(0) and spam_lean of nothing, both 0.0
            for window in windows:
                names = _feature_names(t, window)
                out[names[0]] = 0.0
                out[names[1]] = 0.0
            continue
        unique = t in _UNIQUE_TYPES
        for w, window in enumerate(windows):
            ham, spam, complaint, unspam, read = total[w * width : w * width + width]
            names = _feature_names(t, window)
            seen = ham + spam
            if unique:  # distinct pairs: the count is the feature
                seen = max(seen, ham + spam + complaint)
            out[names[0]] = math.log1p(seen)
            shift = weight * (complaint - unspam)  # spam_lean's own steps
            s_ = max(0.0, spam + shift)
            h_ = max(0.0, ham - shift)
            out[names[1]] = (s_ - h_) / (s_ + h_ + LEAN_PRIOR)
            if seen:
                out[names[2]] = spam / seen
                out[names[3]] = ham / seen
                out[names[4]] = complaint / seen
                out[names[5]] = unspam / seen
                out[names[6]] = read / seen
    return out


_UNIQUE_TYPES = frozenset(int(u) for u in UNIQUE_TYPES)
assert tuple(KINDS) == ("ham", "spam", "complaint", "unspam", "read")  # shingle_features_flat
_NAMES = ("volume", "spam_lean", "spam_ratio", "ham_ratio", "complaint_ratio", "unspam_ratio",
          "read_ratio")  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _feature_names(t: int, window: str) -> tuple[str, ...]:
    """``shingle.<type>.<stat>_<window>`` for the stats of :data:`_NAMES`, in that order."""
    return tuple(f"shingle.{t}.{stat}_{window}" for stat in _NAMES)


SPOOFING = frozenset(
    {
        "PHISH_DISPLAY_NAME_BRAND",  # the display name names an organization the address is not
        "PHISH_DISPLAY_NAME_ADDRESS",  # the display name shows another address
        "PHISH_REPLY_TO_MISMATCH",  # replies go to another party
        "PHISH_SENDER_LOOKALIKE",  # the From domain imitates a protected one
        "PHISH_SENDER_FOREIGN_TLD",
        "PHISH_SENDER_IDN",
    }
)
"""Signs (:mod:`pochta.antispam.signs.registry`) that the sender imitates another party:
neither an allow entry (:mod:`pochta.antispam.personal`) nor a known sender
(:func:`known_sender`) decides a letter that shows one."""
DMARC_REFUSED = frozenset({"fail", "permerror", "temperror"})
MAX_HEADER_READ = 2048  # characters of a stored X-Pochta-Spam value read (pochta writes < 800)
KNOWN_SENDER = f"shingle.{int(ShingleType.FROM_ADDRESS)}.spam_lean_14d"
KNOWN_SENDER_LEAN = -0.5
"""A From address whose letters of the last 14 days leaned at least this far to ham (two ham
letters and no spam reach -0.5: :func:`spam_lean`) is a known sender."""
KNOWN_SENDER_BELOW = 0.01
"""The model's P(spam) under which a known sender's letter is ham although the rules' phishing
points say phishing (:func:`known_sender`)."""


def from_forged(auth: auth_mod.AuthResults, readers: Sequence[str] = ()) -> bool:
    """Authentication shows the From domain forged. Then no exemption that rests on the From
    domain holds (``Analysis.withheld``). Two cases, and only these:

    - DMARC, evaluated, fails: the From domain's owner published a policy, and neither SPF nor
      DKIM passes aligned with it. A plain forwarder (a ``.forward`` keeping the original
      MAIL FROM, no SRS) of an unsigned letter fails it too: the owner asked for that;
    - the From domain is the reader's own or a protected organization's (``readers``: see
      :func:`readers`; the two whose From the signs' exemptions trust), it publishes no
      policy, SPF ``fail`` (not softfail) refuses a MAIL FROM of that registrable domain, and
      no DKIM signature of it passes: a letter in the installation's own name, or a bank's,
      from a path their own SPF refuses.

    For any other domain without a policy, SPF ``fail`` shows nothing: it is what every plain
    forwarder produces, SPF speaks for the envelope, not for the From, and a domain that
    publishes no DMARC has not asked receivers to judge its From by the path; the ARC and
    Received fields a forwarder adds are its own to write, not authentication. A DNS failure
    (temperror), softfail / neutral, or authentication not run (``[antispam] dns = "off"``,
    a letter given to ``POST /v1/scan`` without its client's address) show nothing false
    either: the exemptions hold."""
    if auth.dmarc.result == "fail":
        return True
    from_domain = registrable(auth.dmarc.domain)
    if not from_domain or from_domain not in {registrable(r) for r in readers}:
        return False
    if auth.spf.result != "fail" or auth.spf.scope != "mailfrom":
        return False
    if registrable(auth.spf.domain) != from_domain:
        return False
    return not any(d.result == "pass" and registrable(d.domain) == from_domain for d in auth.dkim)


MAX_READERS = 100  # envelope recipients read for their domains (SMTP allows 100 per letter)


def readers(
    envelope: Envelope | None, letter: Letter | None = None, protected: Protected | None = None
) -> tuple[str, ...]:
    """The registrable domains pochta answers for in :func:`from_forged`, each once: the
    readers' (the envelope's recipients; the To field only for a letter with no envelope's
    recipients, ``POST /v1/scan`` or an import: the same sources as the signs' reader-domain
    exemption, which reads fewer and leaves public mail services out; a wider set here only
    lets SPF take more exemptions back), and the From domain when it is a protected
    organization's (``protected``): the exemptions that rest on the From domain lean on both
    (``signs.checks._own_or_reader``), so SPF refusing their own domain's path takes them
    back. The price: a plain forwarder (no SRS) of an unsigned letter of a protected
    organization that publishes no DMARC policy loses them too, as its forgery would."""
    addresses = list(envelope.recipients[:MAX_READERS]) if envelope is not None else []
    if not addresses and letter is not None:
        addresses = [a.address for a in letter.to_addresses[:MAX_READERS]]
    out: list[str] = []
    for r in addresses:
        d = registrable(r.rpartition("@")[2].strip().strip("<>")) if "@" in r else ""
        if d and d not in out:
            out.append(d)
    fd = letter.from_domain if letter is not None else None
    if fd and protected is not None and protected.sender_org(fd) is not None:
        d = registrable(fd)
        if d and d not in out:
            out.append(d)
    return tuple(out)


def registrable(domain: str) -> str:
    """A domain's registrable part (the public suffix list's), lower-cased; "" for none."""
    d = domain.strip().rstrip(".").lower()
    return (normalize.registrable(d) or d) if d else ""


def known_sender(
    f: Mapping[str, float],
    signs: Sequence[Sign],
    auth: auth_mod.AuthResults,
    partial: Sequence[str],
) -> bool:
    """Whether the letter comes from a sender this installation knows as legitimate: its From
    address's letters of the last 14 days leaned to ham (:data:`KNOWN_SENDER_LEAN`), the
    analysis is whole and the counters were read, DMARC did not fail, and no sign says the
    sender imitates another party (:data:`SPOOFING`). For such a letter the rules' phishing
    verdict gives way to the model when the model is sure it is ham
    (:data:`KNOWN_SENDER_BELOW`): a newsletter with a form and tracking links, from a sender
    whose letters the installation has filed as ham, is that sender's usual mail (measured by
    k-fold cross-validation on the non-sealed corpus letters: 15 of the 21 hard-ham letters and
    all 4 easy-ham-2 letters in Spam were the rules' phishing verdict, the model sure of ham,
    BENCHMARKS.md). A letter from an unknown sender, one that forges a known one's display
    name or Reply-To, or fails DMARC, stays phishing."""
    if partial or f.get(KNOWN_SENDER, 0.0) > KNOWN_SENDER_LEAN:
        return False
    if auth.dmarc.result in DMARC_REFUSED:
        return False
    return not any(s.symbol in SPOOFING for s in signs)


@dataclass(frozen=True)
class Verdict:
    label: Label
    probability: float | None  # the model's P(spam); None without a model
    score: float  # the rules' points
    hits: list[rules.Hit]
    signs: list[Sign]
    auth: auth_mod.AuthResults
    # a dict, but in the answer of a worker that decided the letter: packed (antispam.packed)
    features: Mapping[str, float] = field(repr=False)
    shingles: list[Shingle] = field(repr=False, default_factory=list)
    partial: tuple[str, ...] = ()  # analysis stages the time budget cut
    content_probability: float | None = None  # P(spam) on what the letter shows (below)
    words: tuple[str, ...] = ()  # the surest words behind tokens.score
    hashes: Sequence[int] = field(repr=False, default=())  # Analysis.hashes
    listed: Listed | None = None  # what the recipient's own list said (antispam.personal)

    @property
    def folder(self) -> str:
        return "Inbox" if self.label == "ham" else "Spam"

    def header(self) -> str:
        """The value of ``X-Pochta-Spam``."""
        p = "" if self.probability is None else f" probability={self.probability:.4f};"
        symbols = ",".join(h.symbol for h in self.hits if h.score)[:600]
        partial = f" partial={','.join(self.partial)};" if self.partial else ""
        listed = "" if self.listed is None else f"; {self.listed.header()}"
        return f"{self.label};{p} score={self.score:.2f};{partial} symbols={symbols or '-'}{listed}"

    @staticmethod
    def counted(header: str | None) -> frozenset[str]:
        """The symbols a verdict's ``X-Pochta-Spam`` value (:meth:`header`) names: the rules
        that gave points at delivery. pochta's own field only says what pochta wrote (every
        ``X-Pochta-*`` field a letter arrives with is removed at intake, and none of its
        parts is the sender's text)."""
        if not header:
            return frozenset()
        _, found, rest = header[:MAX_HEADER_READ].partition(" symbols=")
        return frozenset(rest.partition(";")[0].split(",")) - {"-", ""} if found else frozenset()

    def as_dict(self, authserv_id: str = "pochta") -> dict[str, Any]:
        return {
            "verdict": self.label,
            "probability": self.probability,
            "score": self.score,
            "partial": list(self.partial),
            "rules": [h.as_dict() for h in self.hits],
            "phishing_signs": [s.as_dict() for s in self.signs],
            "authentication_results": self.auth.header(authserv_id),
            "list": None if self.listed is None else self.listed.as_dict(),
        }


@dataclass(frozen=True)
class Counting:
    """How a delivered letter's verdict feeds its shingles' ham / spam counters
    (:meth:`Scanner.learn`), so that a mistake does not feed the next one.

    The counters learn from pochta's own verdicts (no person looks at most letters), and the
    model reads what they learned (``spam_lean``): a letter counted spam makes the next one
    from the same sender look worse, and that one, counted spam in turn, the one after. So:

    - spam only when both the verdict and the letter's content alone are sure: P(spam) and
      P(spam) on what the letter shows by the shipped knowledge alone: the counters unknown
      and the words scored by the shipped table (``Verdict.content_probability``) >=
      ``spam_at``.
      The counters never reinforce themselves: a sender's spam lean cannot count its next
      letter as spam, only what that letter shows can (``spam_by_content``; off: the full
      model's P alone);
    - ham for every ham verdict (P below the model's threshold; ``ham_below`` can make it
      stricter): a legitimate sender builds its record from its first letter on, and a
      spammer's letter that slipped through is corrected by people's complaints;
    - phishing (the rules' verdict): not counted. A phishing letter forges a real sender's
      address and links to look-alikes; counting it would turn the real bank's From address
      into spam evidence, and the phishing rules catch the next one anyway;
    - a partial verdict (the time budget cut the analysis): not counted;
    - without a model: the rules' label (spam or ham), phishing excepted.

    People's word ("spam" / "not spam", through the mailbox) is counted separately, as
    complaints and unspams, and weighs more (:data:`FEEDBACK_WEIGHT`). Evidence for these
    choices (training data only): :data:`pochta.antispam.model.design.LOG`."""

    spam_at: float = 0.95
    ham_below: float = 1.0
    count_phishing: bool = False
    spam_by_content: bool = True

    def kind(self, verdict: Verdict, threshold: float | None) -> str | None:
        """The counter this verdict feeds: "spam", "ham", or None (not counted)."""
        if verdict.partial:
            return None
        if verdict.label == "phishing":
            return "spam" if self.count_phishing else None
        p = verdict.probability
        if p is None or threshold is None:
            return "spam" if verdict.label == "spam" else "ham"
        sure = p
        if self.spam_by_content and verdict.content_probability is not None:
            sure = min(p, verdict.content_probability)
        if p >= threshold and sure >= self.spam_at:
            return "spam"
        if p < min(self.ham_below, threshold):
            return "ham"
        return None


@dataclass(frozen=True)
class Learning:
    """Which verdicts teach the learned words (:mod:`pochta.antispam.words`) on their own,
    without a person's word. Off by default (``from_verdicts``), as Rspamd's autolearn is:
    measured on the evaluation groups once (BENCHMARKS.md, issue 16), learning from pochta's
    own sure verdicts raised spam-2 recall 93.0 -> 94.3 % and also the false positives,
    easy-ham-2 0.50 -> 0.64 % and hard-ham-1 16.4 -> 18.4 % (a thousand spam letters learned
    put commercial words on spam's side); people's word alone helps every group. When on, as
    SpamAssassin's Bayes autolearn:

    - spam when the shingles would count it spam (:class:`Counting`: the verdict and the
      letter's content by the shipped knowledge both at P >= ``Counting.spam_at``);
    - ham when the verdict is ham and the content by the shipped knowledge is below
      ``ham_below``. A ham verdict alone is not enough: some spam passes as ham, and its
      words learned as ham would let its kin pass too. The model's info may carry
      ``learn_ham_below``, chosen on training data (:mod:`pochta_factory.training`).

    Both read ``content_probability``, computed with the shipped table's word score: what the
    installation has learned never decides what it learns next, so a mistake cannot teach
    itself. Phishing and partial verdicts teach nothing."""

    ham_below: float = 0.1
    from_verdicts: bool = False

    def kind(self, verdict: Verdict, counted: str | None) -> str | None:
        """"spam", "ham" or None, given what :class:`Counting` counted for the shingles."""
        if not self.from_verdicts:
            return None
        if counted == "spam":
            return "spam"
        c = verdict.content_probability
        if verdict.label == "ham" and not verdict.partial and c is not None and c < self.ham_below:
            return "ham"
        return None


@dataclass(frozen=True, slots=True)
class Lesson:
    """What one delivered letter teaches (:meth:`Scanner.lesson`): small and picklable, so
    that a worker process can count it (``Scanner.teach``). ``kind``: the shingles' counter
    (None: not counted); ``taught``: the learned words' class (None: not taught)."""

    kind: str | None
    refs: tuple[Ref, ...] = field(repr=False)
    taught: words_mod.Kind | None = None
    hashes: Sequence[int] = field(default=(), repr=False)
    at: float | None = None
    packed: tuple[Packed, ...] = field(default=(), repr=False)  # more refs, as numbers


Teacher = Callable[[Lesson], bool]
"""Takes a lesson to teach elsewhere (True), or refuses it (False: taught in this process)."""

DECISION = "decision"  # the decision's CPU seconds, among the analysis's stages'
TIMEOUT = "timeout"
COUNTERS = "counters"  # the shingles' counters could not be read (their store is down)


def unanalyzed(reason: str = TIMEOUT) -> Analysis:
    """The analysis of a letter no worker could analyze in time (its worker was stopped)."""
    return Analysis((), auth_mod.NO_AUTH, {}, (), (reason,))


class Scanner:
    """The decision half, and the whole path in one process (``scan``). ``counters`` feed
    the shingle features (and learn from verdicts via ``learn``); ``model`` gives the
    probability; ``analyzer`` is used by ``scan`` (default: no DNS, no budget). ``unscored``:
    the label of a letter no worker could analyze in time (``antispam.on_timeout``: ham goes to
    the Inbox, spam to Spam; either way the verdict says ``partial=timeout``)."""

    def __init__(
        self,
        *,
        rules_: rules.Rules | None = None,
        model: Model | None = None,
        counters: Counters | None = None,
        analyzer: Analyzer | None = None,
        authserv_id: str = "pochta",
        counting: Counting | None = None,
        words: Words | None = None,
        learning: Learning | None = None,
        learn_from_verdicts: bool = False,
        unscored: Label = "ham",
        personal: Personal | None = None,
    ) -> None:
        self.rules = rules_ if rules_ is not None else rules.default()
        self.unscored = unscored
        self.model = model
        self.counters = counters
        if analyzer is None:
            analyzer = Analyzer(tokens=model.tokens if model is not None else None)
        self.analyzer = analyzer
        self.authserv_id = authserv_id
        self.counting = counting if counting is not None else Counting()
        self.words = words
        self.personal = personal
        if learning is None:
            below = model.info.get("learn_ham_below") if model is not None else None
            learning = Learning(
                ham_below=Learning.ham_below if below is None else float(below),
                from_verdicts=learn_from_verdicts,
            )
        self.learning = learning
        self.teacher: Teacher | None = None  # set by app.py once the worker processes exist
        self._windows = [parse_window(w) for w in WINDOWS]
        self._window_names = [w.name for w in self._windows]

    def statistics(self, analysis: Analysis, now: float | None = None) -> dict[str, float]:
        """The features of the analysis plus its shingles' counters."""
        return self._statistics(analysis, now)[0]

    def _statistics(self, analysis: Analysis, now: float | None) -> tuple[dict[str, float], bool]:
        """The features, and whether the counters were read. Counters that cannot be read
        (their store is down) are left out, as for a letter nothing is known about: the mail
        flow never waits for nor fails with the counters, and the verdict says it is partial."""
        f = dict(analysis.features)
        if self.counters is not None and analysis.shingles:
            try:
                sums = self.counters.query_flat(
                    query_refs(analysis.shingles), self._windows, now=now
                )
            except StorageError as exc:
                log.warning("shingle counters: not read, the verdict goes without them: %s", exc)
                return f, False
            f.update(shingle_features_flat(analysis.shingles, sums, self._window_names))
        return f, True

    def decide(self, analysis: Analysis, now: float | None = None) -> Verdict:
        """The verdict, recorded in this process's metrics."""
        analysis, verdict = self.judge(analysis, now)
        self.record(analysis, verdict)
        return verdict

    def judge(self, analysis: Analysis, now: float | None = None) -> tuple[Analysis, Verdict]:
        """The verdict, not recorded (a worker process judges, the server records), and the
        analysis with the decision's CPU seconds among its stages' (``decision``)."""
        started = time.process_time()
        verdict = self._decide(analysis, now)
        seconds = {**analysis.seconds, DECISION: time.process_time() - started}
        return dataclasses.replace(analysis, seconds=seconds), verdict

    @staticmethod
    def record(analysis: Analysis, verdict: Verdict) -> None:
        """A verdict in this process's metrics, with the CPU its analysis and decision took."""
        metrics.verdict(verdict.label, bool(verdict.partial), sum(analysis.seconds.values()))

    def _decide(self, analysis: Analysis, now: float | None) -> Verdict:
        if TIMEOUT in analysis.partial:  # nothing was analyzed: the operator's choice decides
            return Verdict(
                self.unscored, None, 0.0, [], [], analysis.auth, {}, [], analysis.partial
            )
        f, counted = self._statistics(analysis, now)
        partial = analysis.partial if counted else (*analysis.partial, COUNTERS)
        signs = list(analysis.signs)
        if analysis.withheld and from_forged(analysis.auth, analysis.readers):
            signs += analysis.withheld  # the exemptions rested on a forged From domain
            f.update(feats_mod.from_signs(signs))
        hits = rules.evaluate(self.rules, f, signs, analysis.auth)
        f.update(rule_features(hits))
        shipped, words = self._learned_words(analysis, f)
        score = f["rules.score"]
        by_rules = rules.verdict(hits, self.rules.actions)
        probability = None
        label: Label
        content = None
        if by_rules == "phishing":
            label = "phishing"
            if self.model is not None and known_sender(f, signs, analysis.auth, partial):
                p = self.model.probability(f)
                if p < KNOWN_SENDER_BELOW:  # a known sender's usual mail: the model decides
                    label, probability = "ham", p
                    content = self.model.content_probability(shipped)
        elif self.model is not None:
            probability = self.model.probability(f)
            content = self.model.content_probability(shipped)
            label = "spam" if probability >= self.model.threshold else "ham"
        else:
            label = "spam" if by_rules == "spam" else "ham"
        return Verdict(
            label, probability, score, hits, signs, analysis.auth, f,
            list(analysis.shingles), partial, content, words, analysis.hashes,
        )  # fmt: skip

    def _learned_words(
        self, analysis: Analysis, f: dict[str, float]
    ) -> tuple[dict[str, float], tuple[str, ...]]:
        """``f`` as the shipped knowledge sees it (the word score from the shipped table),
        and the words shown; ``f`` itself gets the score of shipped + learned words, and a
        word-weights model's ``tokens.weights`` as the learned words move it."""
        shipped = dict(f)
        if self.words is None or not analysis.hashes:
            return shipped, analysis.words
        try:
            score, words, weights = self.words.judged(analysis.tokens, analysis.hashes, WORDS_SHOWN)
        except StorageError as exc:
            log.warning("learned words: not read, the shipped table alone scores: %s", exc)
            return shipped, analysis.words
        f[tokens_mod.FEATURE] = score
        if weights is not None and tokens_mod.WEIGHTS_FEATURE in f:
            f[tokens_mod.WEIGHTS_FEATURE] = weights
        return shipped, words

    def for_owner(self, verdict: Verdict, analysis: Analysis, owner: int) -> Verdict:
        """The verdict for one recipient (``owner``: the account's id), with the words that
        recipient taught (:mod:`pochta.antispam.words.personal`): the word statistic (and a
        word-weights model's ``tokens.weights``, :meth:`pochta.antispam.tokens.TokenTable.weighed`)
        read from shipped + installation + the owner's words, and the model run again. The same
        verdict, untouched and at no cost, for an owner whose words do not count yet, when
        the rules decided (phishing), without a model, or for a letter not analyzed. Never
        raises: a store that does not answer leaves the installation's verdict."""
        personal = self.personal
        if (
            personal is None
            or self.model is None
            or verdict.probability is None
            or not analysis.hashes
            or not personal.ready(owner)
        ):
            return verdict
        shipped = personal.words.shipped  # read once: the tables' and the column's
        try:
            table, own = personal.tables(owner, analysis.tokens, analysis.hashes, shipped)
        except StorageError as exc:
            log.warning("personal words: not read, the installation's verdict stands: %s", exc)
            return verdict
        f = dict(verdict.features)
        f[tokens_mod.FEATURE], words = table.judge(analysis.tokens, shown=WORDS_SHOWN)
        if shipped is not None and tokens_mod.WEIGHTS_FEATURE in f:
            weights = shipped.weighed(list(analysis.tokens)[: words_mod.MAX_HASHES], table)
            if weights is not None:
                f[tokens_mod.WEIGHTS_FEATURE] = weights
        probability = self.model.probability(f)
        if personal.rule.bound:  # the owner's own words, after the model (words.personal)
            bound = personal.rule.own_bound((own.spam_letters, own.ham_letters))
            term = own_term(own.score(analysis.tokens), bound)
            probability = shifted(probability, term)
        label: Label = "spam" if probability >= self.model.threshold else "ham"
        return dataclasses.replace(
            verdict, label=label, probability=probability, features=f, words=words
        )

    def scan(
        self,
        raw: bytes | Letter,
        envelope: Envelope | None = None,
        helo: str | None = None,
        now: float | None = None,
    ) -> Verdict:
        """Parse (unless given a parsed letter), analyze and decide, in this process."""
        started = time.monotonic()
        letter = raw if isinstance(raw, Letter) else parse(raw)
        return self.decide(self.analyzer.analyze(letter, envelope, helo, started=started), now)

    def explain(self, verdict: Verdict, top: int = explaining.TOP) -> list[explaining.Reason]:
        """What pushed this verdict most: the model's SHAP values in words, or, when the
        rules decided (phishing, or no model), the rules that gave the most points."""
        if self.model is None or verdict.probability is None:
            return explaining.from_rules(verdict.hits, top)
        return explaining.explain(self.model, verdict.features, top, words=verdict.words)

    def learn(
        self, verdict: Verdict, at: float | None = None, packed: tuple[Packed, ...] | None = None
    ) -> str | None:
        """Count a delivered letter's shingles with its verdict, as :class:`Counting` says
        (only verdicts the model is sure of). Returns the kind counted (None: not counted).
        With a ``teacher`` (the worker processes, :mod:`pochta.mailbox.intake`) the lesson is
        handed to it; it is taught here when there is none or it refuses. Never raises: the
        letter is stored, and counting must not undo that. ``packed``: the refs of the
        verdict's shingles, packed by the worker that decided it (its verdict then carries
        none: ``pochta.mailbox.intake.for_the_server``)."""
        lesson = self.lesson(verdict, at, packed)
        if lesson.kind is None and lesson.taught is None:
            return None
        if self.teacher is None or not self.teacher(lesson):
            return self.teach(lesson)
        counted = lesson.refs or lesson.packed
        return lesson.kind if self.counters is not None and counted else None

    def lesson(
        self, verdict: Verdict, at: float | None = None, packed: tuple[Packed, ...] | None = None
    ) -> Lesson:
        """What :meth:`learn` would count and teach of ``verdict`` (pure: no store is read);
        ``packed``: its shingles' refs as numbers, passed on as they are (see ``learn``)."""
        threshold = self.model.threshold if self.model is not None else None
        kind = self.counting.kind(verdict, threshold)
        taught: words_mod.Kind | None = None
        if self.words is not None and verdict.hashes:
            found = self.learning.kind(verdict, kind)
            if found is not None:
                taught = "spam" if found == "spam" else "ham"
        refs = tuple(update_refs(verdict.shingles)) if kind is not None else ()
        hashes = verdict.hashes if taught is not None else ()
        more = packed if kind is not None and packed is not None else ()
        return Lesson(kind, refs, taught, hashes, at, more)

    def teach(self, lesson: Lesson) -> str | None:
        """Count and teach ``lesson`` in this process's counters and words; the kind counted
        (None: not counted). Never raises."""
        if self.words is not None and lesson.taught is not None and lesson.hashes:
            try:
                self.words.learn(lesson.hashes, lesson.taught)
            except Exception:
                log.exception("learned words: one letter's words dropped")
        kind = lesson.kind
        if self.counters is None or not (lesson.refs or lesson.packed) or kind is None:
            return None
        refs = [*lesson.refs, *unpack(lesson.packed)] if lesson.packed else lesson.refs
        try:
            self.counters.update(refs, kind, at=lesson.at, wait=0)
        except StorageError as exc:
            log.warning("shingle counters: one letter's %s increments dropped: %s", kind, exc)
            return None
        except Exception:
            log.exception("shingle counters: one letter's increments dropped")
            return None
        return kind

    def feedback(
        self, letter: Letter, kind: str, verdict: str | None = None, *, owner: int | None = None
    ) -> None:
        """A person moved a stored letter into Spam (``kind`` "spam") or out of it
        ("not_spam"); ``verdict``: what pochta said of it at delivery. Moving it against the
        verdict teaches its words as :data:`FEEDBACK_WEIGHT` letters of the person's class;
        moving it back undoes exactly that (the same weight taken off), so a letter moved to
        and fro any number of times teaches at most once. The installation's words learn it,
        and ``owner``'s own (an account's id) as well. Never raises."""
        if self.words is None or kind not in ("spam", "not_spam"):
            return
        said_spam = verdict in ("spam", "phishing")
        taught: words_mod.Kind
        if kind == "spam":  # into Spam: "spam", or undoing an earlier "not spam"
            taught, weight = ("ham", -FEEDBACK_WEIGHT) if said_spam else ("spam", FEEDBACK_WEIGHT)
        else:  # out of Spam: "not spam", or undoing an earlier "spam"
            taught, weight = ("ham", FEEDBACK_WEIGHT) if said_spam else ("spam", -FEEDBACK_WEIGHT)
        try:
            hashes = self.words.hashes(tokens_mod.tokenize(letter))
            self.words.learn(hashes, taught, weight)
            if owner is not None and owner != words_mod.INSTALLATION:
                self.words.learn(hashes, taught, weight, owner=owner)
        except Exception:
            log.exception("learned words: a person's word on one letter dropped")


MODEL_EXTRA = ("rules.score", "rules.phishing_score", "rules.content_score")
SHINGLE_GROUP = "shingles"


def rule_features(hits: Sequence[rules.Hit]) -> dict[str, float]:
    """The rules' points as features: ``rules.score`` (all), ``rules.phishing_score`` (group
    phishing) and ``rules.content_score`` (all but the group ``shingles``: the points of what
    the letter itself shows, without the counters' opinion)."""
    return {
        "rules.score": rules.score(hits),
        "rules.phishing_score": rules.phishing_score(hits),
        "rules.content_score": round(sum(h.score for h in hits if h.group != SHINGLE_GROUP), 6),
    }


def model_columns() -> list[str]:
    """The model's input columns, in order."""
    return list(
        dict.fromkeys(
            [
                *feats_mod.FEATURES,
                *(f"sign.{s}" for s in SYMBOLS),
                "phish.signs",
                *feats_mod.AUTH_FEATURES,
                tokens_mod.FEATURE,
                tokens_mod.WEIGHTS_FEATURE,
                *SHINGLE_FEATURES,
                *MODEL_EXTRA,
            ]
        )
    )
