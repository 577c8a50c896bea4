"""How long recorded deletions wait after a crash: the SIGKILL campaign's last wait, staged.

A process takes the deletion job's lock (``job:mailbox-deletions``), 2 s later the
deletions' own lock (``mailbox-deletions``), as a leader does when it finishes deletions, and
is killed with SIGKILL 4 s after that: both leases run out, the deletions' one 2 s after the
job's (each lease is renewed on its own schedule). Then ``pochta serve`` starts and the
seconds until ``pending_deletions`` is 0 are measured from the kill (the job lock's lease,
10 s, is the floor: a dead leader keeps the job that long).

    python benchmarks/deletions_after_crash.py            # 1 run
    python benchmarks/deletions_after_crash.py --runs 2

Run it with the ``PYTHONPATH`` of the pochta to measure (A/B: alternate two trees).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.integration.conftest import start_server
from tests.mailtools import letter, payload

from pochta.app import build
from pochta.config import load_settings

LETTERS = 20

HOLDER = """
import os, signal, sys, time
from pathlib import Path
from pochta.app import build
from pochta.config import load_settings
p = build(load_settings(data_dir=Path(sys.argv[1])))
p.locks.acquire("job:mailbox-deletions", timeout=5)
time.sleep(2)
p.locks.acquire("mailbox-deletions", timeout=5)
print("held", flush=True)
time.sleep(4)
os.kill(os.getpid(), signal.SIGKILL)
"""


def one(root: Path) -> dict[str, float]:
    data = root / "data"
    p = build(load_settings(data_dir=data))
    try:
        user = p.mailbox.add_user("ann@example.org", "a long enough password")
        for i in range(LETTERS):
            done = p.mailbox.deliver(letter(attachments=[("a", payload(i, 9_000))]), [user])
            p.mailbox.delete(user.id, done.ids[0])
        pending = p.mailbox.stats()["pending_deletions"]
    finally:
        p.close()
    holder = subprocess.run(
        [sys.executable, "-c", HOLDER, str(data)], capture_output=True, timeout=120
    )
    killed = time.monotonic()
    if holder.returncode != -signal.SIGKILL:
        raise SystemExit(f"the holder was not killed: {holder.stderr.decode()}")
    server = start_server(
        data, root / "serve.log", settings={"POCHTA_ANTISPAM__POOL_PROCESSES": "0"}
    )
    try:
        healthy = time.monotonic() - killed
        watch = build(load_settings(data_dir=data))
        try:
            while watch.mailbox.stats()["pending_deletions"]:
                if time.monotonic() - killed > 120:
                    raise SystemExit("deletions did not finish in 120 s")
                time.sleep(0.1)
        finally:
            watch.close()
        finished = time.monotonic() - killed
    finally:
        server.stop()
    return {"pending": pending, "healthy_s": round(healthy, 2), "finished_s": round(finished, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    runs = parser.parse_args().runs
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            result = one(Path(tmp))
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(json.dumps({**result, "load": " ".join(load), "pid": os.getpid()}), flush=True)


if __name__ == "__main__":
    main()
