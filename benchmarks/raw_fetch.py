"""Fetching letters back over HTTP (``GET /v1/messages/{id}/raw``) one at a time or from 4
threads on one ``httpx.Client``: the last phase of
``tests/integration/test_corpus.py::test_every_corpus_letter_over_smtp_comes_back_byte_identical``.
The letters are the unsealed corpus letters (``--letters`` of them), put in by ``pochta
import``; a running ``pochta serve`` answers. Rounds alternate; prints JSON with the load.

    python benchmarks/raw_fetch.py                 # 1,000 letters, 3 rounds of each
    python benchmarks/raw_fetch.py --letters 200 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from pochta_factory import corpus

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.conftest import start_server  # noqa: E402
from tests.integration.test_smtp import add_users, session  # noqa: E402

USER = "fetch@example.org"


def fetch(url: str, auth: dict[str, str], ids: list[int], threads: int) -> float:
    t0 = time.monotonic()
    with httpx.Client(base_url=url, headers=auth, timeout=60) as http:

        def raw(letter_id: int) -> int:
            r = http.get(f"/v1/messages/{letter_id}/raw")
            r.raise_for_status()
            return len(r.content)

        if threads == 1:
            sizes = [raw(i) for i in ids]
        else:
            with ThreadPoolExecutor(threads) as pool:
                sizes = list(pool.map(raw, ids))
    assert len(sizes) == len(ids)
    return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--letters", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="raw-fetch-") as tmp:
        src, data = Path(tmp) / "letters", Path(tmp) / "data"
        src.mkdir()
        for i, m in enumerate(corpus.unsealed()):
            if i == args.letters:
                break
            (src / f"{i:05d}.eml").write_bytes(m.raw)
        add_users(data, USER)
        cmd = [sys.executable, "-m", "pochta", "import", "--user", USER, "--data", str(data)]
        subprocess.run([*cmd, str(src)], check=True, capture_output=True)
        srv = start_server(data, Path(tmp) / "serve.log")
        try:
            auth = session(srv, USER)
            ids: list[int] = []
            with httpx.Client(base_url=srv.url, headers=auth, timeout=60) as http:
                for folder in ("Inbox", "Spam"):
                    cursor = None
                    while True:
                        params = {"folder": folder, "limit": 200}
                        if cursor:
                            params["cursor"] = cursor
                        page = http.get("/v1/messages", params=params).json()
                        ids += [m["id"] for m in page["messages"]]
                        cursor = page["next_cursor"]
                        if cursor is None:
                            break
            seen: dict[str, list[float]] = {"1 thread": [], "4 threads": []}
            loads = [os.getloadavg()[0]]
            for i in range(args.rounds):
                order = (1, 4) if i % 2 == 0 else (4, 1)
                for threads in order:
                    name = "1 thread" if threads == 1 else "4 threads"
                    seen[name].append(fetch(srv.url, auth, ids, threads))
                    loads.append(os.getloadavg()[0])
        finally:
            srv.stop(signal.SIGTERM)
    out: dict[str, object] = {
        name: {
            "median_seconds": round(statistics.median(ts), 2),
            "all": [round(t, 2) for t in ts],
            "letters_per_second": round(len(ids) / statistics.median(ts), 1),
        }
        for name, ts in seen.items()
    }
    out["letters"] = len(ids)
    out["load_average_1min"] = {"min": min(loads), "max": max(loads)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
