"""Training and evaluating the model on the public SpamAssassin corpus.

The corpus is replayed in date order through a fresh set of counters, so the shingle features
of each letter hold what was known at that letter's time. Training (``train``) uses ONLY the
groups easy-ham-1 and spam-1: features are computed before the letter is counted, then the
letter is counted with its true label. The decision threshold is tuned on the same groups
(the last fifth in time, with a model fitted on the first four fifths), then the model is
refitted on all of them.

Evaluation (``evaluate``) replays other groups; there the counters learn only from pochta's
own verdicts, never from the true labels.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pochta import corpus
from pochta.antispam import rules
from pochta.antispam.counters.memory import MemoryStore
from pochta.antispam.counters.service import Counters
from pochta.antispam.model import Model, fit
from pochta.antispam.shingles import Envelope, update_refs
from pochta.antispam.verdict import Scanner, model_columns

TRAIN_GROUPS = ("easy-ham-1", "spam-1")
EVAL_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
MAX_FPR = 0.002  # the threshold keeps false positives on held-out training ham below this

_BRACKET_IP = re.compile(rb"\[(\d{1,3}(?:\.\d{1,3}){3})\]")
_RETURN_PATH = re.compile(rb"^Return-Path:\s*<?([^>\s]*)>?", re.IGNORECASE | re.MULTILINE)


def envelope_of(raw: bytes) -> Envelope:
    """What the receiving server's SMTP session would have known: the first public IP in the
    Received headers (newest hop first) and the Return-Path address."""
    head = raw.split(b"\n\n", 1)[0].split(b"\r\n\r\n", 1)[0]
    ip = None
    for match in _BRACKET_IP.finditer(head):
        try:
            addr = ipaddress.ip_address(match.group(1).decode())
        except ValueError:
            continue
        if addr.is_global:
            ip = str(addr)
            break
    rp = _RETURN_PATH.search(head)
    sender = rp.group(1).decode("utf-8", "replace") if rp else None
    return Envelope(ip=ip, sender=sender)


def when(letter: corpus.CorpusLetter, fallback: float) -> float:
    for moment in (letter.received, letter.date):
        if moment is not None:
            return moment.timestamp()
    return fallback


def in_time_order(letters: Iterable[corpus.CorpusLetter]) -> list[tuple[float, Any]]:
    out = []
    last = 1_000_000_000.0
    for i, letter in enumerate(letters):
        t = when(letter, last)
        last = t
        out.append((t, i, letter))
    out.sort(key=lambda x: (x[0], x[1]))
    return [(t, letter) for t, _, letter in out]


@dataclass
class Replay:
    rows: list[dict[str, float]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0
    seconds: float = 0.0


def replay(
    letters: Sequence[tuple[float, corpus.CorpusLetter]],
    scanner: Scanner,
    *,
    learn_truth: bool,
    progress: Callable[[int], None] | None = None,
) -> Replay:
    """Features of every letter as known at its time; then the letter is counted: with its
    true label (``learn_truth``, training) or with the scanner's verdict (evaluation)."""
    out = Replay()
    counters = scanner.counters
    wall, cpu = time.perf_counter(), time.process_time()
    for t, letter in letters:
        env = envelope_of(letter.raw)
        if learn_truth:
            _, signs, ar, f, shingles = scanner.features(letter.raw, env, now=t)
            hits = rules.evaluate(scanner.rules, f, signs, ar)
            f = {**f, "rules.score": rules.score(hits), "rules.phishing_score": 0.0}
            f["rules.phishing_score"] = rules.phishing_score(hits)
            kind = "spam" if letter.label == "spam" else "ham"
            out.predicted.append("")
        else:
            verdict = scanner.scan(letter.raw, env, now=t)
            f, shingles = verdict.features, verdict.shingles
            kind = "ham" if verdict.label == "ham" else "spam"
            out.predicted.append(verdict.label)
        if counters is not None and shingles:
            counters.update(update_refs(shingles), kind, at=t)
        out.rows.append(f)
        out.labels.append(int(letter.label == "spam"))
        out.groups.append(letter.group)
        if progress is not None:
            progress(1)
    out.seconds = time.perf_counter() - wall
    out.cpu_seconds = time.process_time() - cpu
    return out


def fresh_scanner(model: Model | None = None) -> Scanner:
    return Scanner(model=model, counters=Counters(MemoryStore(), buffered=False))


def _threshold(probs: Sequence[float], labels: Sequence[int]) -> float:
    """The lowest threshold whose false-positive rate on ``labels`` stays below MAX_FPR."""
    ham = sorted((p for p, y in zip(probs, labels, strict=True) if y == 0), reverse=True)
    if not ham:
        return 0.5
    allowed = int(MAX_FPR * len(ham))
    return max(0.5, min(0.99, ham[allowed] + 1e-6))


def train(
    letters: Iterable[corpus.CorpusLetter] | None = None,
    *,
    iterations: int = 400,
    progress: Callable[[int], None] | None = None,
) -> tuple[Model, dict[str, Any]]:
    """A model from easy-ham-1 + spam-1 (or the letters given)."""
    chosen = list(letters if letters is not None else corpus.letters(TRAIN_GROUPS))
    ordered = in_time_order(chosen)
    data = replay(ordered, fresh_scanner(), learn_truth=True, progress=progress)
    columns = model_columns()
    cut = len(data.rows) * 4 // 5
    early = fit(data.rows[:cut], data.labels[:cut], columns, iterations=iterations)
    threshold = _threshold(early.probabilities(data.rows[cut:]), data.labels[cut:])
    info = {
        "trained_on": sorted({m.group for m in chosen}),
        "letters": len(chosen),
        "spam": sum(data.labels),
        "threshold_tuned_on": "last fifth in time of the training letters",
        "max_fpr": MAX_FPR,
        "iterations": iterations,
    }
    model = fit(data.rows, data.labels, columns, iterations=iterations, threshold=threshold)
    model.info = info
    return model, {**info, "threshold": threshold, "seconds": round(data.seconds, 1)}


def evaluate(
    model: Model | None,
    *,
    warm: Iterable[corpus.CorpusLetter] | None = None,
    groups: Sequence[str] = EVAL_GROUPS,
    only: Sequence[corpus.CorpusLetter] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Spam recall and false-positive rate per group, letters/s and CPU ms per letter, the
    counters learning only from the scanner's own verdicts. ``warm``: letters counted with
    their true labels first (the training groups: what a deployed pochta would know);
    ``only``: these letters instead of all of ``groups``."""
    scanner = fresh_scanner(model)
    if warm is not None:
        replay(in_time_order(warm), scanner, learn_truth=True)
    ordered = in_time_order(only if only is not None else corpus.letters(groups))
    data = replay(ordered, scanner, learn_truth=False, progress=progress)
    per_group: dict[str, dict[str, Any]] = {}
    for g in groups:
        idx = [i for i, name in enumerate(data.groups) if name == g]
        spam_idx = [i for i in idx if data.labels[i] == 1]
        ham_idx = [i for i in idx if data.labels[i] == 0]
        caught = sum(1 for i in spam_idx if data.predicted[i] != "ham")
        false = sum(1 for i in ham_idx if data.predicted[i] != "ham")
        per_group[g] = {
            "letters": len(idx),
            "spam_recall": round(caught / len(spam_idx), 4) if spam_idx else None,
            "false_positive_rate": round(false / len(ham_idx), 4) if ham_idx else None,
            "false_positives": false if ham_idx else None,
        }
    n = len(data.rows)
    return {
        "groups": per_group,
        "letters": n,
        "letters_per_s": round(n / data.seconds, 1) if data.seconds else None,
        "cpu_ms_per_letter": round(1000 * data.cpu_seconds / n, 2) if n else None,
    }
