"""CPU per letter of the wording + content-features stage on the normal mix: easy-ham-1 + spam-1
(3,000 letters), each letter parsed beforehand (parsing is not measured).

The stage is what the phishing checks read with pochta.antispam.signs.wording (greeting over
the first 600 characters, offer over subject + body, alarm over the subject, urgency over the
body, card-data and personal-data requests sentence by sentence) and
pochta.antispam.features.extract. Best of ``--rounds`` passes over all letters.

    python benchmarks/wording_stage.py            # 3,000 letters, best of 3 passes
    python benchmarks/wording_stage.py --quick    # 300 letters, 1 pass
    PYTHONPATH=/other/tree/src python benchmarks/wording_stage.py   # another tree: before/after
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pochta
from _common import emit, machine, note
from pochta.antispam import features
from pochta.antispam.signs import wording
from pochta.mime.letter import Letter, parse
from pochta_factory import corpus


def stage(letter: Letter) -> None:
    wording.find_all(wording.GREETING, wording.fold(letter.text[:600]), 2)
    body = wording.fold(letter.all_text)
    subject = wording.fold(letter.subject)
    wording.find_all(wording.OFFER, subject + "\n" + body)
    wording.find_all(wording.ALARM, subject)
    wording.find_all(wording.URGENCY, body)
    wording.requests(body, wording.CARD_ITEMS)
    wording.asks_for(body, wording.PERSONAL_OBJECTS)
    features.extract(letter)


def main(args: argparse.Namespace) -> None:
    letters = [parse(x.raw) for x in corpus.unsealed(["easy-ham-1", "spam-1"])]
    if args.quick:
        letters = letters[:: len(letters) // 300][:300]
    for letter in letters:  # what a Letter works out once is not the stage's
        _ = letter.all_text, letter.text, letter.links
    passes = []
    for _ in range(1 if args.quick else args.rounds):
        start = time.process_time()
        for letter in letters:
            stage(letter)
        passes.append(time.process_time() - start)
        note(f"pass: {passes[-1]:.2f} s")
    result: dict[str, Any] = {
        "benchmark": "wording_stage",
        "machine": machine(Path(".")),
        "tree": str(Path(pochta.__file__).resolve().parent),
        "letters": len(letters),
        "ms_per_letter": round(min(passes) * 1000 / len(letters), 3),
        "passes_s": [round(p, 3) for p in passes],
    }
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 letters, 1 pass")
    p.add_argument("--rounds", type=int, default=3, help="passes over the letters")
    return p.parse_args()


if __name__ == "__main__":
    main(_args())
