"""A process that runs pochta's single-run job mechanism, driven by test_singleton.py.

    python job_runner.py redis PORT LEDGER | python job_runner.py sqlite DBFILE LEDGER

Starts a ``Singleton`` "ledger" (lease 1 s, a round every 0.05 s); each round appends one
line ``<pid> <token> <start> <end>`` (CLOCK_MONOTONIC, host-wide) to LEDGER and spends 20 ms
in between, as a job working on a shared resource would. Runs until SIGTERM (then stops the
job: the lock is released) or SIGKILL (the lease runs out).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from pochta.config import RedisSettings
from pochta.guard.lock import Lease, Locks
from pochta.guard.lock.redis import RedisFence, RedisLockBackend
from pochta.guard.lock.sqlite import SqliteFence, SqliteLockBackend
from pochta.guard.singleton import Singleton
from pochta.redisconn import connect
from pochta.types import Fence, LockBackend


def main(kind: str, where: str, ledger: str) -> None:
    backend: LockBackend
    fence: Fence
    if kind == "redis":
        client = connect(RedisSettings(nodes=[f"127.0.0.1:{int(where)}"]))
        backend, fence = RedisLockBackend(client), RedisFence(client)
    else:
        backend, fence = SqliteLockBackend(Path(where)), SqliteFence(Path(where))
    locks = Locks(backend, ttl=1.0)

    def round_(lease: Lease) -> None:
        start = time.monotonic()
        time.sleep(0.02)
        lease.check()
        with open(ledger, "a") as f:
            f.write(f"{os.getpid()} {lease.token} {start:.6f} {time.monotonic():.6f}\n")

    job = Singleton(locks, "ledger", round_, interval=0.05, fence=fence)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    job.start()
    print("started", flush=True)
    done.wait()
    job.stop()
    locks.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
