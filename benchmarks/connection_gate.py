"""The cost of the connection limits per connection (issue 27, item 2): one ``Gate.admit`` and
its ``release`` (what every SMTP, IMAP and HTTP connection from an untrusted address pays), on
the in-memory table and on the memory-mapped slots of ``serve --workers N`` with 1, 2 and 4
live slots (the others filled with the connections of 2,000 addresses each, as busy workers
would hold them). Addresses are drawn from 10,000 random IPv4 addresses of 500 networks, under
the default SMTP limits, so almost every connection is admitted. A second figure: one address
over its limit (a flood), each attempt refused.

    python benchmarks/connection_gate.py            # 200,000 connections per setup
    python benchmarks/connection_gate.py --quick
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import emit, machine, note
from pochta.config import SmtpSettings
from pochta.guard.anvil import Gate, Limits
from pochta.guard.anvil.mapped import MappedConnectionTable
from pochta.guard.anvil.memory import MemoryConnectionTable
from pochta.types import ConnectionTable

SECRET = b"benchmark-secret-0123456789abcdef"


def smtp_limits() -> Limits:
    s = SmtpSettings()
    return Limits(
        per_ip=s.max_connections_per_ip,
        rate_per_ip=s.max_connection_rate_per_ip,
        per_network=s.max_connections_per_network,
        rate_per_network=s.max_connection_rate_per_network,
        total=s.max_connections,
        rate_total=s.max_connection_rate,
    )


def addresses(n: int, rng: random.Random) -> list[str]:
    networks = [
        f"{rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}" for _ in range(500)
    ]
    return [f"{rng.choice(networks)}.{rng.randint(1, 254)}" for _ in range(n)]


def gate(table: ConnectionTable, clock: list[float]) -> Gate:
    return Gate(table, {"smtp": smtp_limits()}, secret=SECRET, clock=lambda: clock[0])


def measure(table: ConnectionTable, others: list[ConnectionTable], n: int) -> dict[str, Any]:
    rng = random.Random(7)
    pool = addresses(10_000, rng)
    clock = [1_000_000.0]
    for other in others:  # busy siblings: 2,000 addresses with a connection open each
        g = gate(other, clock)
        for address in rng.sample(pool, 2000):
            g.admit("smtp", address)
    g = gate(table, clock)
    picks = [rng.choice(pool) for _ in range(n)]
    started, cpu = time.perf_counter(), time.process_time()
    for address in picks:
        clock[0] += 0.0005  # 2,000 connections a second: the rate windows move on
        g.admit("smtp", address).release()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    # a flood: one address over its limits, every attempt refused
    flood = 50_000 if n >= 100_000 else 5_000
    for _ in range(60):
        g.admit("smtp", "192.0.2.66")
    refused = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(flood):
        refused += not g.admit("smtp", "192.0.2.66").allowed
    flood_elapsed, flood_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert refused == flood
    return {
        "connections": n,
        "us_per_admitted_connection": round(elapsed / n * 1e6, 2),
        "cpu_us_per_admitted_connection": round(cpu / n * 1e6, 2),
        "us_per_refused_attempt": round(flood_elapsed / flood * 1e6, 2),
        "cpu_us_per_refused_attempt": round(flood_cpu / flood * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 20_000 if args.quick else args.connections
    with tempfile.TemporaryDirectory(prefix="pochta-gate-") as tmp:
        where = Path(tmp)
        result: dict[str, Any] = {"benchmark": "connection_gate", "machine": machine(where)}
        setups: dict[str, Any] = {}
        note("memory table")
        setups["memory"] = measure(MemoryConnectionTable(), [], n)
        for live in (1, 2, 4):
            note(f"mapped slots, {live} live")
            directory = where / f"slots-{live}"
            others: list[ConnectionTable] = [
                MappedConnectionTable(directory) for _ in range(live - 1)
            ]
            table = MappedConnectionTable(directory)
            setups[f"mapped_{live}_processes"] = measure(table, others, n)
            for t in [table, *others]:
                t.close()
        result["setups"] = setups
        emit(result)


if __name__ == "__main__":
    main()
