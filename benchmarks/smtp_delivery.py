"""SMTP delivery rate for the SpamAssassin corpus, with and without verdicts, and import rate
(issues 3 and 15).

A real ``python -m pochta serve`` (embedded defaults, sync=full: every 250 is durable) runs on
free loopback ports with a fresh data directory and one mailbox. A separate client process
per connection sends corpus letters with smtplib (each letter CRLF-normalized as it goes on the
wire), one letter per transaction, connections kept open. Letters/s counts 250 answers.
"verdicts": every letter scored (antispam on, the default: parsed and analyzed in the worker
processes, decided and counted in the server); "no verdicts": ``antispam.enabled = false`` (the
letter is still parsed once and its shingles counted). The two are run alternately for each
number of connections; ``server_cpu_ms_per_letter`` is the CPU of the server and its worker
processes (from /proc) over the letters delivered.

Anchor (issue 15): Postfix -> Dovecot LMTP (benchmarks/anchors.py :class:`PostfixDovecot`:
stock Postfix 3.7 relaying over ``lmtp:inet:127.0.0.1:<port>`` to Dovecot 2.3 with one Maildir,
both private to a temporary directory on free loopback ports) is run in the same run, after
pochta with and without verdicts for each number of connections, with the same client (the
same letters, the same smtplib client processes, the same recipient). ``accepted_per_s`` counts
Postfix's 250 answers, as pochta's figure does (the letter is then fsynced in Postfix's queue);
``delivered_end_to_end_per_s`` waits until every letter is a file in Dovecot's Maildir and the
queue is empty. Its ``server_cpu_ms_per_letter`` is every Postfix and Dovecot process over the
whole run, to the last delivery. On by default when postfix, dovecot-core and dovecot-lmtpd are
installed and we are root (``--no-anchors`` skips it); otherwise the JSON says why not.

Import: ``pochta import`` of the same letters (a directory of files) in one process.

``--stack`` (issue 29): what an operator runs instead of pochta, side by side. The letters
neither filter learned from (the unsealed letters of easy-ham-2, hard-ham-1 and spam-2), sent
round-robin to ``--mailboxes`` (100) mailboxes, at 1, 4 and 8 connections, to three systems in
turn, the order rotated each round: ``pochta serve`` with its defaults (verdicts on, log level
info, IMAP on; its 250 means stored), Postfix -> Rspamd milter -> Dovecot LMTP
(:class:`anchors.PostfixRspamdDovecot`: Rspamd's proxy worker as the milter on a unix socket,
Bayes trained on easy-ham-1 + spam-1, network checks off, reject and greylist off so every
letter is stored; Rspamd is started and trained once and shared by the rounds, Postfix and
Dovecot are new each round) and Postfix -> Dovecot LMTP. The anchors' rate is end to end
(every letter in a Maildir); CPU per letter sums every process of each system (for the full
stack also Rspamd and its Bayes redis-server). The table has each system's median over the
rounds and pochta's ratio to each anchor; the goal (issue 29) is >= 1.5x the full stack at
1, 4 and 8 connections with <= 6 ms of CPU per letter. Needs root and Debian's postfix,
dovecot-core, dovecot-lmtpd, rspamd and redis-server (``apt-get install``); without them the
JSON says which are missing and pochta runs alone.

    python benchmarks/smtp_delivery.py            # the whole corpus, 1/4/8 connections
    python benchmarks/smtp_delivery.py --quick    # 300 letters, 4 connections
    python benchmarks/smtp_delivery.py --no-anchors   # pochta only
    python benchmarks/smtp_delivery.py --stack    # ~2,440 letters, 3 rounds (~30 min)
    python benchmarks/smtp_delivery.py --stack --quick   # 300 letters, 1 round (~10 min)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import smtplib
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from anchors import (
    AnchorError,
    PostfixDovecot,
    PostfixRspamdDovecot,
    Rspamd,
    corpus_training,
    tree_cpu_seconds,
)
from pochta_factory import corpus

GOAL = 240.0  # letters/s with verdicts and 4 connections: Postfix -> Dovecot LMTP's rate here
RATIO_GOAL = 0.6  # with verdicts / without, same run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wire(raw: bytes) -> bytes:
    out = re.sub(rb"\r\n|\r|\n", b"\r\n", raw)
    return out if out.endswith(b"\r\n") else out + b"\r\n"


def add_user(data: Path) -> None:
    subprocess.run(  # its lines would go into the JSON on stdout
        [sys.executable, "-m", "pochta", "init", "--data", str(data)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "user", "add", "bench@example.org"),
            *("--password-stdin", "--data", str(data)),
        ],
        input=b"benchmark password\n",
        check=True,
        capture_output=True,
    )


def own_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


ANSWER: str | None = None
"""``--answer``: ``smtp.answer`` of the pochta runs (None: pochta's default, nothing set, so
that an older pochta, which has no such setting, runs the same script)."""


def serve(
    data: Path, log: Path, verdicts: bool, *, defaults: bool = False
) -> tuple[subprocess.Popen[bytes], int]:
    """``pochta serve`` on free ports; ``defaults``: IMAP on and logs at info, as shipped
    (else IMAP off and logs at warning, this script's historical setting)."""
    http, smtp = free_port(), free_port()
    env = {
        **os.environ,
        "POCHTA_ANTISPAM__ENABLED": "true" if verdicts else "false",
        "POCHTA_SMTP__PORT": str(smtp),
        "POCHTA_SMTP__LMTP_PORT": "0",
        "POCHTA_SERVICE_TOKEN": "benchmark-service-token-0123456789",
    }
    if ANSWER is not None:
        env["POCHTA_SMTP__ANSWER"] = ANSWER
    if defaults:
        env["POCHTA_IMAP__PORT"] = str(free_port())
    else:
        env |= {"POCHTA_IMAP__ENABLED": "false", "POCHTA_LOG_LEVEL": "warning"}
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pochta", "serve", "--port", str(http), "--data", str(data)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 120  # a loaded machine: the start takes tens of seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", smtp), timeout=0.5).close()
            return proc, smtp
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(log.read_text())


def client(
    port: int, letters: list[bytes], start: Any, out: Any, rcpts: list[str] | None = None
) -> None:
    """Send ``letters`` on one connection, letter i to ``rcpts[i]`` (default: all to
    bench@example.org); put the number answered 250 on ``out`` (always, so that a refused
    letter or a dropped connection shows as a shortfall, never a hang)."""
    start.wait()
    ok = 0
    to = rcpts if rcpts is not None else ["bench@example.org"] * len(letters)
    try:
        with smtplib.SMTP("127.0.0.1", port, timeout=120) as smtp:
            for raw, rcpt in zip(letters, to, strict=True):
                try:
                    smtp.sendmail("feeder@example.net", [rcpt], raw)
                    ok += 1
                except smtplib.SMTPResponseException as exc:  # a 4xx/5xx: count it as not sent
                    print(f"refused: {exc.smtp_code} {exc.smtp_error!r}", file=sys.stderr)
    finally:
        out.put(ok)


def start_clients(
    port: int, letters: list[bytes], connections: int, rcpts: list[str] | None = None
) -> tuple[Any, Any, list[Any]]:
    """One client process per connection, connected and waiting for ``start.set()``; each
    puts the number of letters answered 250 on ``out`` when done. ``rcpts``: the recipient of
    each letter (default: bench@example.org)."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=client,
            args=(
                port,
                letters[i::connections],
                start,
                out,
                None if rcpts is None else rcpts[i::connections],
            ),
        )
        for i in range(connections)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # clients connected and waiting
    return start, out, procs


def smtp_run(
    letters: list[bytes],
    connections: int,
    workdir: Path,
    verdicts: bool,
    *,
    template: Path | None = None,
    rcpts: list[str] | None = None,
) -> dict[str, Any]:
    """One round of ``pochta serve``; ``template``: a data directory with the mailboxes of
    ``rcpts`` to copy, served with pochta's defaults (else one mailbox, IMAP off, warning)."""
    name = f"smtp-{connections}-{'verdicts' if verdicts else 'plain'}"
    data = workdir / name
    if template is None:
        add_user(data)
    else:
        shutil.copytree(template, data)
    proc, port = serve(data, workdir / f"{name}.log", verdicts, defaults=template is not None)
    try:
        start, out, procs = start_clients(port, letters, connections, rcpts)
        before = wait_stored(data, 0, timeout=0)  # letters the data directory came with
        cpu0, main0 = tree_cpu_seconds(proc.pid), own_cpu(proc.pid)
        t0 = time.perf_counter()
        start.set()
        sent = sum(out.get() for _ in procs)
        answered = time.perf_counter() - t0
        stored = wait_stored(data, before + sent, timeout=max(120.0, sent / 10)) - before
        elapsed = time.perf_counter() - t0
        cpu, main_cpu = tree_cpu_seconds(proc.pid) - cpu0, own_cpu(proc.pid) - main0
        for p in procs:
            p.join()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)
    nbytes = sum(len(m) for m in letters)
    return {
        "verdicts": verdicts,
        "connections": connections,
        "server_cpu_ms_per_letter": round(1000 * cpu / sent, 2) if sent else None,
        "of_which_main_process_ms": round(1000 * main_cpu / sent, 2) if sent else None,
        "letters": sent,
        "stored": stored,
        "seconds": round(elapsed, 2),
        "letters_per_s": round(sent / elapsed, 1),
        "answered_per_s": round(sent / answered, 1),
        "mb_per_s": round(nbytes / elapsed / 1e6, 2),
    }


def wait_stored(data: Path, sent: int, timeout: float, poll: float = 0.05) -> int:
    """Letters DELIVERED in the index of ``data``, waited for until there are ``sent`` (with
    ``smtp.answer = "queued"`` a 250 comes before the letter is stored: a letter counts once
    the store holds it, as the anchors' count once Dovecot's Maildir has it)."""
    deadline = time.monotonic() + timeout
    with contextlib.closing(
        sqlite3.connect(f"file:{data / 'mailbox.sqlite3'}?mode=ro", uri=True, timeout=30)
    ) as conn:
        while True:
            ((n,),) = conn.execute("SELECT count(*) FROM letters WHERE state = 1").fetchall()
            if n >= sent or time.monotonic() > deadline:
                return int(n)
            time.sleep(poll)


def anchor_run(
    letters: list[bytes],
    connections: int,
    workdir: Path,
    *,
    rcpts: list[str] | None = None,
    rspamd: Rspamd | None = None,
) -> dict[str, Any]:
    """The same clients against Postfix -> Dovecot LMTP (with ``rspamd``, a running
    ``Rspamd(milter=True)``: Postfix -> Rspamd milter -> Dovecot LMTP): 250s counted, then
    every letter waited for in the Maildirs."""
    pd = (
        PostfixDovecot("example.org", parent=workdir)
        if rspamd is None
        else PostfixRspamdDovecot(rspamd=rspamd, parent=workdir)
    )
    with pd:
        start, out, procs = start_clients(pd.port, letters, connections, rcpts)
        pf0, dv0, by0 = pd.postfix_cpu_seconds(), pd.dovecot_cpu_seconds(), pd.cpu_by_process()
        all0 = pd.cpu_seconds()
        t0 = time.perf_counter()
        start.set()
        sent = sum(out.get() for _ in procs)
        accepted = time.perf_counter() - t0
        cpu_accepted = pd.cpu_seconds() - all0
        stored, queued, done = pd.wait_delivered(sent, timeout=max(120.0, sent / 10), poll=0.05)
        end_to_end = done - t0
        pf, dv = pd.postfix_cpu_seconds() - pf0, pd.dovecot_cpu_seconds() - dv0
        total = pd.cpu_seconds() - all0
        by1 = pd.cpu_by_process()
        spam = pd.spam_headers() if isinstance(pd, PostfixRspamdDovecot) else None
        for p in procs:
            p.join()
        logs = pd.log_summary()
        settings = pd.settings()
        startup = pd.startup_seconds
    by = {k: by1.get(k, 0.0) - by0.get(k, 0.0) for k in {*by0, *by1}}
    per = (lambda x: round(1000 * x / sent, 2)) if sent else (lambda x: None)
    return {
        "connections": connections,
        "letters": sent,
        "seconds_accepted": round(accepted, 2),
        "accepted_per_s": round(sent / accepted, 1),
        "delivered": stored,
        "still_queued": queued,
        "seconds_end_to_end": round(end_to_end, 2),
        "delivered_end_to_end_per_s": round(stored / end_to_end, 1),
        "server_cpu_ms_per_letter": per(total),
        "postfix_cpu_ms_per_letter": per(pf),
        "dovecot_cpu_ms_per_letter": per(dv),
        **({} if spam is None else {"rspamd_and_redis_cpu_ms_per_letter": per(total - pf - dv)}),
        **({} if spam is None else {"stored_with_x_spam_header": spam}),
        "cpu_ms_per_letter_until_last_250": per(cpu_accepted),
        "cpu_ms_per_letter_by_process": {
            k: per(v) for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v >= 0.005
        },
        "startup_seconds": round(startup, 2),
        "log": logs,
        "settings": settings,
    }


def import_run(raws: list[bytes], workdir: Path) -> dict[str, Any]:
    src = workdir / "import-src"
    src.mkdir()
    for i, raw in enumerate(raws):
        (src / f"{i:05d}.eml").write_bytes(raw)
    data = workdir / "import-data"
    add_user(data)
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "import", "--user", "bench@example.org"),
            *("--json", "--data", str(data), str(src)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - t0
    report = json.loads(done.stdout)
    return {
        "letters": report["letters"],
        "seconds_including_start": round(elapsed, 2),
        "letters_per_s": round(report["letters"] / elapsed, 1),
        "savings_percent": report["savings_percent"],
    }


def main() -> None:
    global ANSWER
    args = _args()
    ANSWER = args.answer
    if args.stack:
        stack_main(args)
        return
    raws = [m.raw for m in corpus.unsealed()]
    if args.quick:
        raws = raws[:300]
    on_wire = [wire(r) for r in raws]
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-smtp-", dir=args.dir))
    workdir.chmod(0o711)  # Postfix reaches its directories in here as the postfix user
    try:
        result: dict[str, Any] = {
            "benchmark": "smtp_delivery",
            "machine": machine(workdir),
            "corpus_letters": len(raws),
            "corpus_bytes": sum(len(r) for r in raws),
            "goal_letters_per_s_with_verdicts_4_connections": GOAL,
            "goal_ratio_with_without": RATIO_GOAL,
            "smtp": [],
        }
        anchor = _anchor_status(args.anchors)
        result["postfix_dovecot"] = {"status": anchor or "ran", "runs": []}
        for connections in [4] if args.quick else [1, 4, 8]:
            for verdicts in (True, False):
                note(f"smtp: {connections} connection(s), verdicts {verdicts}")
                result["smtp"].append(smtp_run(on_wire, connections, workdir, verdicts))
            if anchor is None:
                note(f"smtp: {connections} connection(s), postfix -> dovecot lmtp")
                try:
                    run = anchor_run(on_wire, connections, workdir)
                except AnchorError as e:
                    anchor = result["postfix_dovecot"]["status"] = f"failed: {e}"
                    note(anchor)
                else:
                    result["postfix_dovecot"]["settings"] = run.pop("settings")
                    result["postfix_dovecot"]["runs"].append(run)
        note("import")
        result["import"] = import_run(raws, workdir)
        rate = {(r["connections"], r["verdicts"]): r["letters_per_s"] for r in result["smtp"]}
        with4, without4 = rate[(4, True)], rate[(4, False)]
        result["with_verdicts_4_connections"] = with4
        result["ratio_with_without_4_connections"] = round(with4 / without4, 3)
        result["table"] = _table(result["smtp"], result["postfix_dovecot"]["runs"])
        for row in result["table"]:
            if row["connections"] == 4 and "postfix_dovecot_accepted_per_s" in row:
                result["ratio_with_verdicts_to_postfix_dovecot_4_connections"] = {
                    "accepted": row["ratio_verdicts_to_postfix_dovecot_accepted"],
                    "end_to_end": row["ratio_verdicts_to_postfix_dovecot_end_to_end"],
                }
        result["goal_met"] = with4 >= GOAL
        result["ratio_goal_met"] = with4 / without4 >= RATIO_GOAL
        emit(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- --stack: pochta's defaults, many mailboxes, both anchors (issue 29) ----------------------

TEST_GROUPS = ("easy-ham-2", "hard-ham-1", "spam-2")
"""pochta_factory.training.EVAL_GROUPS: letters neither pochta's model nor the anchor's Bayes
(trained on easy-ham-1 + spam-1) learned from; their sealed letters are left out."""
STACK_RATIO_GOAL = 1.5  # pochta / Postfix + Rspamd + Dovecot, end to end, at 1, 4 and 8
STACK_CPU_GOAL_MS = 6.0  # pochta's CPU per letter


def pochta_template(workdir: Path, addresses: list[str]) -> Path:
    """A data directory (``pochta init``) with one mailbox per address, copied for each
    round."""
    data = workdir / "template"
    subprocess.run(
        [sys.executable, "-m", "pochta", "init", "--data", str(data)],
        check=True,
        capture_output=True,
    )
    add = (  # one argon2 hash for all: a hundred would take a minute, and nobody logs in
        "import sys\nfrom pathlib import Path\nfrom pochta.cli.common import opened\n"
        "from pochta.guard.passwords import hash_password\n"
        "secret = hash_password('benchmark password')\n"
        "with opened(Path(sys.argv[1]), None) as p:\n"
        "    for a in sys.argv[2:]:\n        p.mailbox.index.add_user(a, secret)\n"
    )
    subprocess.run([sys.executable, "-c", add, str(data), *addresses], check=True)
    return data


def stack_main(args: argparse.Namespace) -> None:
    """Rounds of pochta (defaults), Postfix -> Rspamd milter -> Dovecot and Postfix -> Dovecot,
    at 1, 4 and 8 connections, the order rotated each round; medians and their ratios."""
    raws = [m.raw for m in corpus.unsealed(TEST_GROUPS)]
    if args.quick:
        raws = raws[:: max(1, len(raws) // QUICK_STACK_LETTERS)][:QUICK_STACK_LETTERS]
    on_wire = [wire(r) for r in raws]
    addresses = [f"box{i}@example.org" for i in range(args.mailboxes)]
    rcpts = [addresses[i % len(addresses)] for i in range(len(on_wire))]
    rounds = args.rounds or (1 if args.quick else 3)
    workdir = Path(tempfile.mkdtemp(prefix="pochta-bench-stack-", dir=args.dir))
    workdir.chmod(0o711)  # Postfix reaches its directories in here as the postfix user
    result: dict[str, Any] = {
        "benchmark": "smtp_delivery --stack",
        "machine": machine(workdir),
        "letters": len(raws),
        "letters_from": f"the unsealed letters of {', '.join(TEST_GROUPS)}",
        "bytes": sum(len(r) for r in raws),
        "mailboxes": len(addresses),
        "rounds": rounds,
        "pochta": "serve with its defaults (verdicts on, log level info, IMAP on), sync=full"
        + (f", smtp.answer = {ANSWER}" if ANSWER else "")
        + "; a letter counts once the index holds it DELIVERED",
        "goals": {"ratio_to_full_stack": STACK_RATIO_GOAL, "cpu_ms": STACK_CPU_GOAL_MS},
        "runs": [],
    }
    why = None if args.anchors is not False else "skipped (--no-anchors)"
    why = why or PostfixRspamdDovecot.missing()
    result["anchors"] = why or "ran"
    rspamd: Rspamd | None = None
    try:
        template = pochta_template(workdir, addresses)
        if why is None:
            note("rspamd: starting and training Bayes")
            ham, spam = corpus_training(limit=QUICK_TRAINING if args.quick else None)
            rspamd = Rspamd(ham, spam, milter=True)
            rspamd.parent = workdir
            rspamd.__enter__()
        systems = ["pochta", *(["full_stack", "postfix_dovecot"] if rspamd else [])]
        for r in range(rounds):
            for n in args.connections:
                order = systems[r % len(systems) :] + systems[: r % len(systems)]
                for system in order:
                    note(f"round {r + 1}/{rounds}: {n} connection(s), {system}")
                    if system == "pochta":
                        run = smtp_run(on_wire, n, workdir, True, template=template, rcpts=rcpts)
                    else:
                        run = anchor_run(
                            on_wire,
                            n,
                            workdir,
                            rcpts=rcpts,
                            rspamd=rspamd if system == "full_stack" else None,
                        )
                        result.setdefault("settings", {})[system] = run.pop("settings")
                    result["runs"].append({"round": r + 1, "system": system, **run})
        result["table"] = _stack_table(result["runs"], args.connections)
        emit(result)
    finally:
        if rspamd is not None:
            rspamd.close()
        shutil.rmtree(workdir, ignore_errors=True)


QUICK_STACK_LETTERS = 300
QUICK_TRAINING = 250  # letters of each class the anchor's Bayes learns in --quick


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _stack_table(runs: list[dict[str, Any]], connections: list[int]) -> list[dict[str, Any]]:
    """Per number of connections: each system's median letters/s (pochta: its 250s, which mean
    stored; the anchors: end to end, every letter in a Maildir) and CPU ms per letter, and
    pochta's ratio to each anchor."""
    rows = []
    for n in connections:
        row: dict[str, Any] = {"connections": n}
        for system in ("pochta", "full_stack", "postfix_dovecot"):
            mine = [r for r in runs if r["system"] == system and r["connections"] == n]
            if not mine:
                continue
            key = "letters_per_s" if system == "pochta" else "delivered_end_to_end_per_s"
            row[f"{system}_per_s"] = _median([r[key] for r in mine])
            row[f"{system}_cpu_ms"] = _median(
                [r["server_cpu_ms_per_letter"] for r in mine if r["server_cpu_ms_per_letter"]]
            )
            if system == "pochta":
                row["pochta_main_process_cpu_ms"] = _median(
                    [r["of_which_main_process_ms"] for r in mine if r["of_which_main_process_ms"]]
                )
        for anchor in ("full_stack", "postfix_dovecot"):
            if row.get(f"{anchor}_per_s") and row.get("pochta_per_s"):
                row[f"ratio_to_{anchor}"] = round(row["pochta_per_s"] / row[f"{anchor}_per_s"], 3)
        if "ratio_to_full_stack" in row:
            row["goal_met"] = (
                row["ratio_to_full_stack"] >= STACK_RATIO_GOAL
                and (row["pochta_cpu_ms"] or 1e9) <= STACK_CPU_GOAL_MS
            )
        rows.append(row)
    return rows


def _anchor_status(wanted: bool | None) -> str | None:
    """None when Postfix -> Dovecot is to run; else why not."""
    if wanted is False:
        return "skipped (--no-anchors)"
    return PostfixDovecot.missing()


def _table(pochta: list[dict[str, Any]], anchor: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per number of connections: letters/s and server CPU ms per letter of pochta
    with verdicts, without, and Postfix -> Dovecot, and the ratios to the anchor."""
    rows = []
    for n in sorted({r["connections"] for r in pochta}):
        row: dict[str, Any] = {"connections": n}
        for r in pochta:
            if r["connections"] == n:
                kind = "verdicts" if r["verdicts"] else "no_verdicts"
                row[f"pochta_{kind}_per_s"] = r["letters_per_s"]
                row[f"pochta_{kind}_cpu_ms"] = r["server_cpu_ms_per_letter"]
        for a in anchor:
            if a["connections"] == n:
                row["postfix_dovecot_accepted_per_s"] = a["accepted_per_s"]
                row["postfix_dovecot_end_to_end_per_s"] = a["delivered_end_to_end_per_s"]
                row["postfix_dovecot_cpu_ms"] = a["server_cpu_ms_per_letter"]
                with_v = row.get("pochta_verdicts_per_s")
                if with_v is not None:
                    row["ratio_verdicts_to_postfix_dovecot_accepted"] = round(
                        with_v / a["accepted_per_s"], 3
                    )
                    row["ratio_verdicts_to_postfix_dovecot_end_to_end"] = round(
                        with_v / a["delivered_end_to_end_per_s"], 3
                    )
        rows.append(row)
    return rows


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 letters: check the script works")
    p.add_argument("--dir", default=None, help="where the data directories go (default: /tmp)")
    p.add_argument(
        "--stack",
        action="store_true",
        help="pochta with its defaults and --mailboxes mailboxes against Postfix -> Rspamd "
        "milter -> Dovecot and Postfix -> Dovecot, alternating rounds (issue 29)",
    )
    p.add_argument("--mailboxes", type=int, default=100, help="--stack: mailboxes (100)")
    p.add_argument("--rounds", type=int, default=0, help="--stack: rounds (3; --quick 1)")
    p.add_argument(
        "--connections",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[1, 4, 8],
        help="--stack: numbers of connections (1,4,8)",
    )
    p.add_argument(
        "--answer",
        choices=["delivered", "queued"],
        default=None,
        help="smtp.answer of the pochta runs (default: pochta's own default, not set)",
    )
    p.add_argument(
        "--anchors",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run Postfix -> Dovecot LMTP side by side (default: when installed and root)",
    )
    return p.parse_args()


if __name__ == "__main__":
    main()
