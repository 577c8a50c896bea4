"""The worker's answer for a letter it decided (issue 29.3): its pickled size and the server's
CPU to read it (``pickle.loads``, under the server's GIL), whole (the analysis and verdict as
the worker made them) against what is sent now (``pochta.mailbox.intake.for_the_server``).

The letters are the evaluation groups' unsealed letters (``smtp_delivery.TEST_GROUPS``); each
is prepared, analyzed and decided in this process as a worker does (fresh counters, the
shipped model), then both answers are pickled as the pool pickles them (highest protocol).
The reading times alternate whole / slim in rounds, each round reading every answer once;
the figure is the median round, and the ratio slim / whole within the same run.

    PYTHONPATH=../src python worker_answer.py [--letters N] [--rounds R]
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import emit, machine, note
from pochta.app import build
from pochta.config import load_settings
from pochta.mailbox.intake import for_the_server
from pochta.mailbox.prepare import prepare
from pochta.types import Envelope
from pochta_factory import corpus

TEST_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")  # as smtp_delivery.py
ENVELOPE = Envelope(ip="192.0.2.1", sender="s@example.net", recipients=("bench@example.org",))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--letters", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        info = machine(Path(tmp))
        p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
        try:
            scanner = p.scanner
            assert scanner is not None
            raws = [m.raw for m in corpus.unsealed(TEST_GROUPS)][: args.letters]
            whole: list[bytes] = []
            slim: list[bytes] = []
            for raw in raws:
                prepared = prepare(
                    raw, ENVELOPE, "helo", inline_limit=4096, analyzer=scanner.analyzer
                )
                assert prepared.analysis is not None
                analysis, verdict = scanner.judge(prepared.analysis)
                answer = dataclasses.replace(prepared, analysis=analysis, verdict=verdict)
                whole.append(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
                slim.append(
                    pickle.dumps(for_the_server(answer, scanner.model), pickle.HIGHEST_PROTOCOL)
                )
        finally:
            p.close()
    note(f"{len(raws)} letters prepared; reading in {args.rounds} rounds")
    times: dict[str, list[float]] = {"whole": [], "slim": []}
    for _ in range(args.rounds):
        for name, answers in (("whole", whole), ("slim", slim)):
            started = time.process_time()
            for blob in answers:
                pickle.loads(blob)
            times[name].append((time.process_time() - started) / len(answers))
    read = {k: statistics.median(v) for k, v in times.items()}
    n = len(raws)
    emit(
        {
            "benchmark": "worker_answer",
            "machine": info,
            "letters": n,
            "letter_bytes_mean": round(sum(map(len, raws)) / n),
            "answer_bytes_mean": {
                "whole": round(sum(map(len, whole)) / n),
                "slim": round(sum(map(len, slim)) / n),
            },
            "answer_bytes_median": {
                "whole": statistics.median(map(len, whole)),
                "slim": statistics.median(map(len, slim)),
            },
            "read_us_per_letter": {k: round(v * 1e6, 1) for k, v in read.items()},
            "read_rounds_us": {k: [round(x * 1e6, 1) for x in v] for k, v in times.items()},
            "bytes_ratio_slim_to_whole": round(sum(map(len, slim)) / sum(map(len, whole)), 3),
            "read_ratio_slim_to_whole": round(read["slim"] / read["whole"], 3),
            "command": " ".join(["python", *sys.argv]),
        }
    )


if __name__ == "__main__":
    main()
