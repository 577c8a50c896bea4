"""IMAP FETCH of whole letters from pochta, next to Dovecot's imapd in the same run (issue 20).

The same 1,000 letters (the first unsealed ones of the SpamAssassin corpus, CRLF line ends,
as SMTP carries them) are in both: pochta's mailbox (imported into a fresh data directory, then a
real ``python -m pochta serve`` with IMAP on a free loopback port; the letters are split into
skeleton + blobs as any delivery splits them) and a Maildir read by a private Dovecot 2.3
(``dovecot -F -c CONF``: imap only, on loopback, static passdb and userdb, no TLS; the
letters written as files, so Dovecot serves them as they are).

Three figures, each the best of ``--rounds`` alternating runs, with one client for both:

- ``fetch_all``: ``FETCH 1:* (BODY.PEEK[])`` in one command;
- ``one_by_one``: ``UID FETCH n (BODY.PEEK[])`` for every letter, one command at a time
  (the client waits for each answer: the latency of one fetch);
- ``mbsync_pull``: ``mbsync -a`` of the folder into an empty local Maildir (Debian isync).

The client of the first two is a small raw-socket reader (reads lines and literals, checks
that the bytes equal the letters), so that the client costs little next to the server.

    python benchmarks/imap_fetch.py              # 1,000 letters, 5 rounds
    python benchmarks/imap_fetch.py --quick      # 200 letters, 1 round
    python benchmarks/imap_fetch.py --also /work/main/src   # and main's pochta, in the same rounds
    python benchmarks/imap_fetch.py --tests one_by_one --rounds 14   # one figure, more rounds

Each figure is the best of the rounds; ``median_ratios`` is the median of the rounds' own
ratios (pochta's time against Dovecot's in the same round: what a noisy machine moves least).
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta_factory import corpus

GOAL_FETCH_ALL = 0.8  # pochta / Dovecot letters/s, FETCH 1:* (issue 29)
GOAL_ONE_BY_ONE = 0.8  # pochta / Dovecot letters/s, one by one (issue 29; 0.5 in issue 20)
GOAL_MBSYNC = 2.0  # pochta's mbsync time / Dovecot's
PASSWORD = "benchmark-password"
USER = "reader@example.org"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(100).startswith(b"* OK"):
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"no IMAP greeting on {port}: {log.read_text()[-2000:]}")


class Client:
    """Just enough IMAP to log in, select and fetch, reading literals as they come."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb", buffering=1 << 16)
        self.f.readline()
        self.n = 0

    def command(self, text: bytes) -> tuple[list[bytes], list[bytes]]:
        """Send a command; its lines and the literals in them, up to the tagged answer."""
        self.n += 1
        tag = b"t%d" % self.n
        self.sock.sendall(tag + b" " + text + b"\r\n")
        lines, literals = [], []
        while True:
            line = self.f.readline()
            if not line:
                raise RuntimeError("the server closed the connection")
            m = re.search(rb"\{(\d+)\}\r\n$", line)
            if m:
                literals.append(self.f.read(int(m.group(1))))
                continue
            lines.append(line)
            if line.startswith(tag + b" "):
                if not line.startswith(tag + b" OK"):
                    raise RuntimeError(line.decode(errors="replace"))
                return lines, literals

    def close(self) -> None:
        self.f.close()
        self.sock.close()


def session(port: int) -> Client:
    c = Client(port)
    c.command(b'LOGIN "%s" "%s"' % (USER.encode(), PASSWORD.encode()))
    c.command(b"SELECT INBOX")
    return c


def fetch_all(port: int, letters: list[bytes]) -> float:
    c = session(port)
    t0 = time.perf_counter()
    _, got = c.command(b"FETCH 1:* (BODY.PEEK[])")
    seconds = time.perf_counter() - t0
    c.close()
    if sorted(got) != sorted(letters):
        raise RuntimeError(f"FETCH 1:* gave other bytes ({len(got)} letters)")
    return seconds


def one_by_one(port: int, letters: list[bytes]) -> float:
    c = session(port)
    lines, _ = c.command(b"UID SEARCH ALL")
    uids = [int(u) for u in lines[0].split()[2:]]
    got = []
    t0 = time.perf_counter()
    for uid in uids:
        got += c.command(b"UID FETCH %d (BODY.PEEK[])" % uid)[1]
    seconds = time.perf_counter() - t0
    c.close()
    if sorted(got) != sorted(letters):
        raise RuntimeError("UID FETCH gave other bytes")
    return seconds


MBSYNCRC = """\
IMAPAccount bench
Host 127.0.0.1
Port {port}
User {user}
Pass "{password}"
SSLType None
AuthMechs LOGIN

IMAPStore far
Account bench

MaildirStore near
Path {maildir}/
Inbox {maildir}/INBOX

Channel pull
Far :far:
Near :near:
Patterns INBOX
Create Near
Sync Pull
SyncState {state}/
"""


def mbsync_pull(port: int, where: Path, count: int) -> float:
    shutil.rmtree(where, ignore_errors=True)
    (where / "mail").mkdir(parents=True)
    (where / "state").mkdir()
    rc = where / "mbsyncrc"
    rc.write_text(
        MBSYNCRC.format(
            port=port, user=USER, password=PASSWORD, maildir=where / "mail", state=where / "state"
        )
    )
    t0 = time.perf_counter()
    done = subprocess.run(["mbsync", "-q", "-c", str(rc), "-a"], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"mbsync failed: {done.stderr}")
    files = list((where / "mail" / "INBOX").glob("*/*"))
    if len([f for f in files if f.parent.name in ("new", "cur")]) != count:
        raise RuntimeError(f"mbsync pulled {len(files)} letters, not {count}")
    return seconds


# -- the two servers ----------------------------------------------------------------------------
def start_pochta(
    work: Path, letters: list[bytes], src: str | None = None
) -> tuple[int, subprocess.Popen[bytes], Path]:
    """``src``: run pochta from this source tree (e.g. main's) rather than the installed one."""
    data = work / "pochta-data"
    env = {
        **os.environ,
        "POCHTA_ANTISPAM__POOL_PROCESSES": "0",
        "POCHTA_VALKYRIE__ENABLED": "false",
    }
    if src is not None:
        env["PYTHONPATH"] = src
    py = sys.executable
    subprocess.run(
        [py, "-m", "pochta", "init", "--data", str(data)], check=True, env=env, capture_output=True
    )
    subprocess.run(
        [py, "-m", "pochta", "user", "add", USER, "--password-stdin", "--data", str(data)],
        input=PASSWORD.encode() + b"\n",
        check=True,
        env=env,
        capture_output=True,
    )
    src = work / "letters"
    src.mkdir()
    for n, raw in enumerate(letters):
        (src / f"{n:05d}.eml").write_bytes(raw)
    t0 = time.perf_counter()
    subprocess.run(
        [py, "-m", "pochta", "import", str(src), "--user", USER, "--data", str(data)],
        check=True,
        env=env,
        capture_output=True,
    )
    note(f"pochta: imported {len(letters)} letters in {time.perf_counter() - t0:.1f} s")
    port = free_port()
    log = work / "pochta.log"
    proc = subprocess.Popen(
        [py, "-m", "pochta", "serve", "--port", str(free_port()), "--data", str(data)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={
            **env,
            "POCHTA_SMTP__ENABLED": "false",
            "POCHTA_IMAP__PORT": str(port),
            "POCHTA_LOG_LEVEL": "warning",
        },
    )
    wait_port(port, proc, log)
    return port, proc, log


DOVECOT_CONF = """\
# pochta benchmarks/imap_fetch.py: IMAP only, on loopback, one Maildir (static userdb)
protocols = imap
listen = 127.0.0.1
base_dir = {dir}/dovecot-run
state_dir = {dir}/dovecot-state
instance_name = pochta-imap-bench-{name}
log_path = {dir}/dovecot.log
ssl = no
disable_plaintext_auth = no
default_login_user = dovenull
default_internal_user = dovecot
mail_location = maildir:~/Maildir
passdb {{
  driver = static
  args = password={password}
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={dir}/vmail/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
"""


def start_dovecot(work: Path, letters: list[bytes]) -> tuple[int, subprocess.Popen[bytes], Path]:
    nobody = pwd.getpwnam("nobody")
    home = work / "vmail" / USER.split("@")[0]
    for sub in ("new", "cur", "tmp"):
        (home / "Maildir" / sub).mkdir(parents=True)
    now = int(time.time())
    for n, raw in enumerate(letters):
        (home / "Maildir" / "cur" / f"{now}.M{n}P1.bench:2,").write_bytes(raw)
    for path in [work / "vmail", *(work / "vmail").rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    (work / "dovecot-state").mkdir()
    conf = work / "dovecot.conf"
    port = free_port()
    conf.write_text(
        DOVECOT_CONF.format(
            dir=work,
            name=work.name,
            password=PASSWORD,
            uid=nobody.pw_uid,
            gid=nobody.pw_gid,
            port=port,
        )
    )
    log = work / "dovecot.stderr"
    proc = subprocess.Popen(
        ["dovecot", "-F", "-c", str(conf)], stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    wait_port(port, proc, log)
    return port, proc, log


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def figures(seconds: float, count: int, size: int) -> dict[str, float]:
    return {
        "seconds": round(seconds, 3),
        "letters_per_s": round(count / seconds, 1),
        "mb_per_s": round(size / seconds / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--letters", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--also", help="a second pochta, from this source tree (e.g. main's)")
    parser.add_argument(
        "--tests", default="fetch_all,one_by_one,mbsync_pull", help="which figures, by name"
    )
    parser.add_argument("--quick", action="store_true", help="200 letters, 1 round")
    args = parser.parse_args()
    count, rounds = (200, 1) if args.quick else (args.letters, args.rounds)
    letters = []
    for item in corpus.unsealed():
        raw = re.sub(rb"\r?\n", b"\r\n", item.raw)
        letters.append(raw)
        if len(letters) == count:
            break
    size = sum(map(len, letters))
    missing = [t for t in ("dovecot", "mbsync") if shutil.which(t) is None]
    result: dict[str, Any] = {
        "benchmark": "imap_fetch",
        "letters": count,
        "bytes": size,
        "rounds": rounds,
    }
    with tempfile.TemporaryDirectory(prefix="pochta-imap-bench-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        result["machine"] = machine(work)
        servers: dict[str, tuple[int, subprocess.Popen[bytes], Path]] = {}
        try:
            (work / "p").mkdir()
            servers["pochta"] = start_pochta(work / "p", letters)
            if args.also:
                (work / "a").mkdir()
                servers["pochta_also"] = start_pochta(work / "a", letters, args.also)
                result["pochta_also_src"] = args.also
            if "dovecot" in missing or os.geteuid() != 0:
                result["dovecot"] = "not run: needs dovecot-imapd and root"
            else:
                (work / "d").mkdir()
                os.chmod(work / "d", 0o755)
                servers["dovecot"] = start_dovecot(work / "d", letters)
            tests: dict[str, Callable[[int], float]] = {
                "fetch_all": lambda port: fetch_all(port, letters),
                "one_by_one": lambda port: one_by_one(port, letters),
            }
            if "mbsync" not in missing:
                tests["mbsync_pull"] = lambda port: mbsync_pull(port, work / "mbsync", count)
            tests = {t: run for t, run in tests.items() if t in args.tests.split(",")}
            best: dict[str, dict[str, float]] = {name: {} for name in servers}
            each: dict[str, dict[str, list[float]]] = {n: {t: [] for t in tests} for n in servers}
            for name in servers:  # warm up: indexes, caches
                one_by_one(servers[name][0], letters)
            for r in range(rounds):
                for test, run in tests.items():
                    for name, (port, _, _) in servers.items():
                        seconds = run(port)
                        note(f"round {r + 1}: {name} {test}: {seconds:.3f} s")
                        best[name][test] = min(best[name].get(test, seconds), seconds)
                        each[name][test].append(seconds)
            for name in servers:
                result[name] = {t: figures(s, count, size) for t, s in best[name].items()}
            if "dovecot" in servers:
                p, d = best["pochta"], best["dovecot"]
                result["ratios"] = {
                    t: round(d[t] / p[t], 2) for t in ("fetch_all", "one_by_one") if t in p
                }
                goals = {"fetch_all": GOAL_FETCH_ALL, "one_by_one": GOAL_ONE_BY_ONE}
                result["goals"] = {
                    f"{t}_at_least_{goal}_of_dovecot": d[t] / p[t] >= goal
                    for t, goal in goals.items()
                    if t in p
                }
                result["median_ratios"] = {
                    f"{name} {t}": round(
                        statistics.median(
                            d / p for d, p in zip(each["dovecot"][t], each[name][t], strict=True)
                        ),
                        2,
                    )
                    for name in servers
                    if name != "dovecot"
                    for t in ("fetch_all", "one_by_one")
                    if t in tests
                }
                if "pochta_also" in servers:
                    a = best["pochta_also"]
                    result["ratios_also"] = {t: round(d[t] / a[t], 2) for t in result["ratios"]}
                if "mbsync_pull" in p:
                    result["ratios"]["mbsync_pull_time"] = round(
                        p["mbsync_pull"] / d["mbsync_pull"], 2
                    )
                    result["goals"]["mbsync_within_2x_dovecot"] = (
                        p["mbsync_pull"] / d["mbsync_pull"] <= GOAL_MBSYNC
                    )
        finally:
            for _, proc, _ in servers.values():
                stop(proc)
    emit(result)


if __name__ == "__main__":
    main()
