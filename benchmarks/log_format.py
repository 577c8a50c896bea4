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
from collections.abc import Callable
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


def _deep(depth: int, call: Callable[[], None]) -> None:
    if depth:
        _deep(depth - 1, call)
    else:
        call()


def access_lines(
    loggers: dict[str, logging.Logger], lines: int, depth: int = 25, rounds: int = 10
) -> dict[str, float]:
    """uvicorn's access line as ``pochta serve`` writes it (text, the root handler, a
    request id bound), from ``depth`` frames down (where the ASGI stack sends the answer),
    through each logger: its whole cost, the lookup of the caller included when the logger
    makes one. The loggers and an empty call at the same depth take turns, round after
    round (the machine's load moves between rounds); each one's best round, less the empty
    call's, in microseconds a line."""
    logs.configure("info", "text", stream=Null())

    def line_of(log: logging.Logger) -> Callable[[], None]:
        def line() -> None:
            log.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5555", "PUT", "/v1/blobs/k", "1.1", 201)

        return line

    def nothing() -> None:
        return None

    calls = {name: line_of(log) for name, log in loggers.items()} | {"": nothing}
    best = dict.fromkeys(calls, float("inf"))
    with logs.bound(request_id="3f2a9c1b7d0e"):
        for _ in range(rounds):
            for name, call in calls.items():
                t = time.perf_counter()
                for _ in range(lines):
                    _deep(depth, call)
                best[name] = min(best[name], (time.perf_counter() - t) / lines)
    logging.getLogger().handlers[:] = []
    return {name: round((best[name] - best[""]) * 1e6, 2) for name in loggers}


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
            # uvicorn's access line 25 frames down: a logger that walks the stack for its
            # caller (what uvicorn.access was) and one that does not (logs.logger: what
            # logs.configure makes it now)
            "access_line_us": access_lines(
                {
                    "caller_looked_up": logging.getLogger("bench.access"),
                    "no_caller": logs.logger("bench.access_quick"),
                },
                args.lines // 4,
            ),
            "machine": machine(Path(".")),
        }
    )


if __name__ == "__main__":
    main()
