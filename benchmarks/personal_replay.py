"""Personal learning by replay (issue 28): misfiled letters with each user's own words next to
the installation's words alone.

The non-sealed SpamAssassin corpus letters (easy-ham-1, easy-ham-2, hard-ham-1, spam-1, spam-2;
a sealed letter is hashed and dropped, never read: ``pochta_factory.corpus.unsealed``) are
delivered in date order to 10 simulated users whose mail differs:

- a legitimate letter goes to 3 of the 10 users chosen by its mailing list (List-Id) or, without
  one, its sender's domain: each list has its own readers, and a reader gets all of it;
- a spam letter goes to 3 users chosen by its file name;
- users 0-3 are *bulk-averse*: of the lists and bulk senders they get (a letter with List-Id,
  List-Unsubscribe or Precedence bulk / list / junk), half (chosen by list and user) are
  spam to them — they subscribed once and no longer want it — while the other readers of the
  same list want it. Every other letter is what the corpus says it is, for everyone.

Each delivered copy is filed by pochta's verdict for that user; a misfiled copy is corrected
by its owner with probability ``--share`` (default 30 %, chosen by a hash of the letter and the
user, the same in every mode) right away, through the feedback rule's words
(``Scanner.feedback`` with the owner: the installation's and the user's own words learn).

Modes, each from empty learned words, on the same stream:

    installation   the verdict is the installation's (shipped + installation words) for
                   everyone: what pochta did before personal learning
    personal ...   the verdict per user is ``Scanner.for_owner`` with a PersonalRule
                   (min_spam, min_ham, weight, bound): the rule's variants side by side;
                   "+B": the user's own words also as a term after the model of at most
                   B log-odds (``words.personal.own_term``)

Misfiled %: copies whose folder (Inbox / Spam) is not what their owner wants, counted at
delivery (before any correction), overall, for the "disputed" copies (bulk-averse users'
unwanted lists), for the rest, per corpus group, and over the second half of the stream (when
the users have taught something). The shipped model was trained on easy-ham-1 + spam-1 (its
``info``): those groups are easy for it; the comparison between modes is what this measures.
No shingle counters (both modes alike: the model reads them as unknown senders).

    python benchmarks/personal_replay.py            # all 4,847 non-sealed letters
    python benchmarks/personal_replay.py --quick    # 600 of them: check the script works
    python benchmarks/personal_replay.py --model DIR   # a model `pochta model train --output
        # DIR` wrote (with word weights) instead of the shipped one
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam.model import booster as model_mod
from pochta.antispam.verdict import Analysis, Scanner, Verdict
from pochta.antispam.words import Words
from pochta.antispam.words.memory import MemoryWordStore
from pochta.antispam.words.personal import Personal, PersonalRule
from pochta.mime.letter import Letter, parse
from pochta_factory import corpus, training

USERS = 10
READERS = 3  # users each letter goes to
AVERSE = frozenset(range(4))  # users who do not want half of their lists
BULK = ("bulk", "list", "junk")
RULES = {
    # the user's words through the word statistic only (bound 0)
    "personal 3/1 x2": PersonalRule(3, 1, 2, 0.0),
    "personal 3/1 x1": PersonalRule(3, 1, 1, 0.0),
    "personal 3/1 x4": PersonalRule(3, 1, 4, 0.0),
    "personal 10/3 x2": PersonalRule(10, 3, 2, 0.0),
    "personal 1/0 x8": PersonalRule(1, 0, 8, 0.0),
    "personal 200/200 x1": PersonalRule(200, 200, 1, 0.0),  # SpamAssassin's wait
    # the user's own words also as a term after the model, at most ``bound`` log-odds
    "personal 3/1 x2 +1": PersonalRule(3, 1, 2, 1.0),  # the default: in full after 3 of each
    "personal 3/1 x2 +1 now": PersonalRule(3, 1, 2, 1.0, ramp=0),  # in full at once
    "personal 3/1 x2 +1 r10": PersonalRule(3, 1, 2, 1.0, ramp=10),
    "personal 3/1 x2 +1 r5": PersonalRule(3, 1, 2, 1.0, ramp=5),
    "personal 3/1 x2 +2": PersonalRule(3, 1, 2, 2.0),
    "personal 3/1 x2 +3": PersonalRule(3, 1, 2, 3.0),
    "personal 10/3 x2 +2": PersonalRule(10, 3, 2, 2.0),
}


def _h(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:8], "big")


def source(letter: Letter) -> tuple[str, bool]:
    """The list or sender a legitimate letter comes from, and whether it is bulk mail."""
    list_id = (letter.header("list-id") or "").strip().lower()
    precedence = (letter.header("precedence") or "").strip().lower()
    bulk = bool(list_id or letter.header("list-unsubscribe") or precedence in BULK)
    if list_id:
        return "list:" + list_id[-200:], bulk
    domain = letter.from_.address.rpartition("@")[2].lower() if letter.from_ is not None else ""
    return "domain:" + domain, bulk


def readers(key: str) -> list[int]:
    h = _h(key)
    first = h % USERS
    step = 1 + (h // USERS) % (USERS - 1)  # distinct readers, spread over the users
    out: list[int] = []
    u = first
    while len(out) < READERS:
        if u not in out:
            out.append(u)
        u = (u + step) % USERS
        if u == first:
            u = (u + 1) % USERS
    return out


@dataclass
class Copy:
    user: int
    wants_spam: bool
    disputed: bool  # a bulk-averse user's unwanted list letter
    corrects: bool  # its owner corrects it when misfiled


@dataclass
class Tally:
    copies: int = 0
    misfiled: int = 0
    ham: int = 0
    ham_in_spam: int = 0
    spam: int = 0
    spam_in_inbox: int = 0

    def add(self, wants_spam: bool, in_spam: bool) -> None:
        self.copies += 1
        wrong = wants_spam != in_spam
        self.misfiled += wrong
        if wants_spam:
            self.spam += 1
            self.spam_in_inbox += wrong
        else:
            self.ham += 1
            self.ham_in_spam += wrong

    def as_dict(self) -> dict[str, Any]:
        def pct(a: int, b: int) -> float | None:
            return round(100 * a / b, 2) if b else None

        return {
            "copies": self.copies,
            "misfiled_pct": pct(self.misfiled, self.copies),
            "wanted_in_spam_pct": pct(self.ham_in_spam, self.ham),
            "unwanted_in_inbox_pct": pct(self.spam_in_inbox, self.spam),
        }


@dataclass
class Mode:
    name: str
    scanner: Scanner
    personal: bool
    tallies: dict[str, Tally] = field(default_factory=dict)
    corrections: int = 0

    def tally(self, key: str) -> Tally:
        return self.tallies.setdefault(key, Tally())

    def deliver(
        self,
        parsed: Letter,
        analysis: Analysis,
        group: str,
        copies: list[Copy],
        late: bool,
    ) -> None:
        everyone = self.scanner.decide(analysis)
        for c in copies:
            v: Verdict = everyone
            if self.personal:
                v = self.scanner.for_owner(everyone, analysis, c.user + 1)
            in_spam = v.folder == "Spam"
            for key in (
                "all",
                "disputed" if c.disputed else "undisputed",
                f"group:{group}",
                *(["second_half"] if late else []),
            ):
                self.tally(key).add(c.wants_spam, in_spam)
            if in_spam != c.wants_spam and c.corrects:
                self.corrections += 1
                self.scanner.feedback(
                    parsed, "spam" if c.wants_spam else "not_spam", v.label, owner=c.user + 1
                )


def modes(model: model_mod.Model, only: list[str] | None) -> list[Mode]:
    out = []
    names = ["installation", *RULES]
    for name in names:
        if only and name not in only:
            continue
        words = Words(MemoryWordStore(), shipped=model.tokens, buffered=False)
        personal = None
        if name in RULES:
            personal = Personal(words, RULES[name], refresh=0.0)
        scanner = Scanner(model=model, words=words, personal=personal)
        out.append(Mode(name, scanner, personal is not None))
    return out


def main() -> None:
    args = _args()
    model = model_mod.load(args.model)
    if model is None:
        raise SystemExit(f"no model in {args.model or 'the package'}: run `pochta model train`")
    letters = [m for _, m in training.in_time_order(corpus.unsealed())]
    if args.quick:
        letters = letters[:: max(1, len(letters) // 600)]
    note(f"{len(letters)} non-sealed letters, {USERS} users")
    analyzer = Scanner(model=model).analyzer
    run = modes(model, args.mode)
    started = time.perf_counter()
    disputed = 0
    for i, m in enumerate(letters):
        parsed = parse(m.raw)
        analysis = analyzer.analyze(parsed)
        copies = []
        if m.label == "spam":
            for u in readers("spam:" + m.name):
                copies.append(Copy(u, True, False, _h(m.name, str(u)) % 100 < args.share * 100))
        else:
            key, bulk = source(parsed)
            for u in readers(key):
                unwanted = bulk and u in AVERSE and _h(key, str(u)) % 2 == 0
                disputed += unwanted
                fixes = _h(m.name, str(u)) % 100 < args.share * 100
                copies.append(Copy(u, unwanted, unwanted, fixes))
        for mode in run:
            mode.deliver(parsed, analysis, m.group, copies, i >= len(letters) // 2)
        if i % 500 == 0:
            note(f"{i} / {len(letters)} letters, {time.perf_counter() - started:.0f} s")
    result: dict[str, Any] = {
        "benchmark": "personal_replay",
        "machine": machine(Path(tempfile.gettempdir())),
        "letters": len(letters),
        "users": USERS,
        "readers_per_letter": READERS,
        "bulk_averse_users": sorted(AVERSE),
        "disputed_copies": disputed,
        "share_correcting": args.share,
        "model": {**model.info, "threshold": model.threshold},
        "model_dir": str(args.model) if args.model else "shipped",
        "word_weights": model.tokens is not None and model.tokens.weights is not None,
        "seconds": round(time.perf_counter() - started, 1),
        "modes": {},
    }
    for mode in run:
        personal = mode.scanner.personal
        result["modes"][mode.name] = {
            "rule": None
            if personal is None
            else {
                "min_spam": personal.rule.min_spam,
                "min_ham": personal.rule.min_ham,
                "weight": personal.rule.weight,
                "bound": personal.rule.bound,
                "ramp": personal.rule.ramp,
            },
            "corrections": mode.corrections,
            "users_whose_words_count": len(personal.refresh()) if personal is not None else 0,
            **{k: t.as_dict() for k, t in sorted(mode.tallies.items())},
        }
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="600 letters: check the script works")
    p.add_argument("--share", type=float, default=0.3, help="misfiled copies their owner corrects")
    p.add_argument("--model", type=Path, default=None, help="a model directory (default: shipped)")
    p.add_argument(
        "--mode", action="append", help="only these modes (repeat; default: all)", default=None
    )
    return p.parse_args()


if __name__ == "__main__":
    main()
