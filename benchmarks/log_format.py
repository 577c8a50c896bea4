"""Cost of one log line in each format pochta could write (issue 20): the stdlib's
``logging.Formatter`` (the line pochta wrote before), structlog's ``ProcessorFormatter`` as
``pochta.logs`` configures it (text and JSON, with the ids bound in a context variable), and a
minimal JSON formatter on the stdlib alone (what we would write instead of structlog, without
the ids and the console renderer). A line like the delivery line, with two ids bound, written
to a null stream; microseconds per line, best of 5 rounds.

    python benchmarks/log_format.py [--lines 20000]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import time
from pathlib import Path

from _common import emit, machine
from pochta import logs


class StdlibJson(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "timestamp": self.formatTime(record),
                "level": record.levelname.lower(),
                "logger": record.name,
                "event": record.getMessage(),
            }
        )


class Null(io.TextIOBase):
    def write(self, s: str) -> int:
        return len(s)


def per_line(formatter: logging.Formatter, lines: int) -> float:
    handler = logging.StreamHandler(Null())
    handler.setFormatter(formatter)
    log = logging.getLogger("bench.smtp")
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    best = float("inf")
    with logs.bound(queue_id="3f2a9c1b7d0e", session="0a1b2c3d4e5f"):
        for _ in range(5):
            t = time.perf_counter()
            for i in range(lines):
                log.info("delivered %s: %d bytes to %d recipient(s), letters %s, verdict %s",
                         "3f2a9c1b7d0e", 42_089, 1, str(i), "ham")  # fmt: skip
            best = min(best, (time.perf_counter() - t) / lines)
    return round(best * 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    args = parser.parse_args()
    emit(
        {
            "benchmark": "log_format",
            "lines": args.lines,
            "us_per_line": {
                "stdlib_text": per_line(
                    logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"),
                    args.lines,
                ),
                "stdlib_json_minimal": per_line(StdlibJson(), args.lines),
                "structlog_text": per_line(logs.formatter("text"), args.lines),
                "structlog_json": per_line(logs.formatter("json"), args.lines),
            },
            "machine": machine(Path(".")),
        }
    )


if __name__ == "__main__":
    main()
