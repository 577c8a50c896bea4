"""Short personal letters against the shipped model: 15 one-line letters a person writes
("See you at noon.", "Please review and let me know."), each sent three ways: with its words
as the subject, with "Re: " before it, and with a greeting and a name around the line
("Hi Ann, ... Peter"). Printed, as one JSON object: how many of the 15 the scanner files in
Spam (``in_spam``), and per way the largest P(spam) and the lines in Spam. No corpus letter
is read. The shipped model, or ``--model DIR`` (``pochta model train --output DIR``):

    PYTHONPATH=src python benchmarks/short_letters.py [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.mailtools

from tests.mailtools import letter

from pochta.antispam.model import booster
from pochta.antispam.verdict import Scanner

LINES = (
    "Please find the report attached.",
    "See you at noon.",
    "Thanks, got it.",
    "Call me when you can.",
    "Here is the file you asked for.",
    "Can we move the meeting to Thursday?",
    "Sounds good to me.",
    "The invoice is attached.",
    "Please review and let me know.",
    "Running late, start without me.",
    "Happy birthday!",
    "Attached are the slides from today.",
    "Photos from the weekend attached.",
    "Lunch tomorrow?",
    "Please sign and return the attached form.",
)

WAYS: dict[str, Callable[[str], bytes]] = {
    "the line as subject": lambda t: letter(subject=t[:20], text=t + "\n"),
    "Re: subject": lambda t: letter(subject="Re: " + t[:20], text=t + "\n"),
    "greeting and name": lambda t: letter(subject=t[:20], text=f"Hi Ann,\n\n{t}\n\nPeter\n"),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, help="a model directory (default: the shipped one)")
    args = p.parse_args()
    model = booster.load(args.model) if args.model else booster.load()
    if model is None:
        raise SystemExit("no model")
    scanner = Scanner(model=model)
    ways: dict[str, dict[str, object]] = {}
    for way, make in WAYS.items():
        verdicts = [scanner.scan(make(line)) for line in LINES]
        spam = [line for line, v in zip(LINES, verdicts, strict=True) if v.label != "ham"]
        top = max(v.probability or 0.0 for v in verdicts)
        ways[way] = {"in_spam": len(spam), "max_p": round(top, 3), "lines_in_spam": spam}
    info = model.info or {}
    print(json.dumps({
        "letters": len(LINES),
        "model": {"trained_on": info.get("trained_on"), "letters": info.get("letters"),
                  "threshold": model.threshold},
        "in_spam": {way: w["in_spam"] for way, w in ways.items()},
        "ways": ways,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
