"""Anchors for benchmark scripts: the spam filters SpamAssassin and Rspamd, run beside pochta on
the same letters, with network tests OFF for both; and a mail server, Postfix -> Dovecot LMTP
(:class:`PostfixDovecot`), that takes the same SMTP traffic as ``pochta serve``.

Each anchor is a context manager that makes a private temporary directory, trains Bayes there
(when given training letters), starts the daemon(s) on free loopback ports, and on exit stops
them and removes the directory (kept when startup failed, so its logs can be read):

    with SpamAssassin(ham, spam) as sa, Rspamd(ham, spam) as rs:
        cpu0 = sa.cpu_seconds()
        results = sa.scan([letter.raw for letter in letters], concurrency=2)
        cpu = sa.cpu_seconds() - cpu0

What is measured:

- :meth:`SpamAssassin.scan` / :meth:`Rspamd.scan` return one :class:`Result` per letter, in
  order: the anchor's own verdict, score and rule names.
- ``cpu_seconds()`` is the user + system CPU time of the daemon's processes since they started
  (see :func:`tree_cpu_seconds`); take the difference around a scan.
- ``training`` holds what training did (seconds, letters, the Bayes counters afterwards).
- ``dns.queries`` lists every DNS query a daemon sent: both are pointed at a sink on a loopback
  port (:class:`DnsSink`) that answers REFUSED, so a lookup that slipped through fails fast and
  is recorded instead of leaving the machine.

No traffic leaves loopback: SpamAssassin runs with local tests only; Rspamd runs with every
module that does DNS, HTTP or UDP lookups disabled (:data:`RSPAMD_DISABLED`) and its maps read
from the copies the package ships (:data:`RSPAMD_LOCAL_MAPS`).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

LOOPBACK = "127.0.0.1"
TRAIN_HAM_GROUPS = ("easy-ham-1",)
TRAIN_SPAM_GROUPS = ("spam-1",)

RSPAMD_SPAM_ACTIONS = frozenset({"reject", "add header", "rewrite subject"})
"""Rspamd actions counted as a spam verdict. With the stock actions (add header at 6, rewrite
subject unset, reject at 15) this is score >= 6; ``greylist`` (score >= 4) is not spam."""

RSPAMD_MIN_LEARNS = 200
"""The stock ``min_learns`` of the Bayes classifier (/etc/rspamd/statistic.conf), left as is:
below it per class the classifier does not classify."""

RSPAMD_DISABLED: dict[str, str] = {
    "fuzzy_check": "UDP queries to fuzzy1/fuzzy2.rspamd.com (their names are resolved with the "
    "system resolver while the configuration loads)",
    "rbl": "DNS blocklists (Spamhaus, Mailspike, SenderScore, SEM, DNSWL, VirusFree, NiX Spam, "
    "blocklist.de) and the SURBL/URIBL/DBL/SEM/MSBL/RSPAMD_URIBL/RSPAMD_EMAILBL rules that "
    "3.x converts into rbl rules; its URL whitelist is a map fetched over HTTPS",
    "surbl": "URL blocklists over DNS (converted into rbl rules)",
    "emails": "e-mail blocklists over DNS (converted into rbl rules)",
    "spf": "DNS TXT lookups",
    "dkim": "DNS key lookups (C module)",
    "dmarc": "DNS TXT lookups",
    "arc": "DNS key lookups",
    "asn": "DNS lookups to asn.rspamd.com",
    "whitelist": "needs SPF/DKIM/DMARC results; two of its maps are fetched over HTTPS",
    "multimap": "its only stock rules (FREEMAIL_*, DISPOSABLE_*, score 0) use maps fetched from "
    "maps.rspamd.com",
    "mx_check": "DNS MX lookups (off in the stock configuration too)",
    "rspamd_update": "rule updates over HTTPS (off in the stock configuration too)",
    "url_redirector": "follows redirector URLs over HTTP (inactive anyway without a global redis)",
    "reputation": "DNS/redis reputation (inactive anyway without a global redis)",
    "once_received": "reverse-DNS (PTR) lookup of the sender IP whenever the MTA gave no host "
    "name, which offline fails and adds RDNS_DNSFAIL and RDNS_NONE to every letter",
}
"""Rspamd modules switched off (``enabled = false`` in ``local.d/<module>.conf``), and why."""

RSPAMD_PARTLY: dict[str, str] = {
    "hfilter": "helo_enabled, from_enabled, mid_enabled = false (they resolve host names) and "
    "hostname_enabled = false (it needs the sender's reverse-DNS name, which only a lookup "
    "gives: offline every letter would get HFILTER_HOSTNAME_UNKNOWN, +2.5); the URL and "
    "recipient checks stay",
    "phishing": "phishtank_enabled, openphish_enabled = false (DNS / HTTP feeds); exception "
    "maps read from the shipped local file; the local URL-mismatch check stays",
    "mime_types": "map read from the shipped local copy only",
    "mid": "map read from the shipped local copy only",
}
"""Rspamd modules kept with their network parts switched off."""

RSPAMD_MILTER_PROXY = """\
# pochta benchmarks/anchors.py: the proxy worker as Postfix's milter on a unix socket (over TCP
# each letter stalls ~40 ms: rspamd issue 1790), scanning the letters itself (self_scan, as
# Rspamd's quick-start guide sets it up), one process per core
bind_socket = "{socket} mode=0666";
milter = yes;
timeout = 120s;
upstream "local" {{
  default = yes;
  self_scan = yes;
}}
count = {count};
max_retries = 5;
discard_on_reject = false;
quarantine_on_reject = false;
spam_header = "X-Spam";
"""
"""``override.d/worker-proxy.inc`` with ``milter=True``."""

RSPAMD_MILTER_ACTIONS = """\
# pochta benchmarks/anchors.py: every letter is stored (the milter never rejects or
# greylists); "add header" (score >= 6) stays, so a spam verdict shows as the X-Spam header
reject = null;
greylist = null;
"""
"""``local.d/actions.conf`` with ``milter=True``."""

RSPAMD_LOCAL_MAPS = {
    "mime_types": 'file = ["${CONFDIR}/maps.d/mime_types.inc"];\n',
    "mid": 'source {\n  url = ["${CONFDIR}/maps.d/mid.inc"];\n}\n',
    "phishing": ('exceptions {\n  REDIRECTOR_FALSE = ["${CONFDIR}/maps.d/redirectors.inc"];\n}\n'),
}
"""``override.d`` files replacing stock maps that list an HTTPS source first."""

SPAMASSASSIN_SETTINGS = """\
# pochta benchmarks/anchors.py: local tests only, private Bayes, no learning while scanning
required_score      5.0
use_bayes           1
bayes_path          {bayes_path}
bayes_file_mode     0700
bayes_auto_learn    0
bayes_auto_expire   0
bayes_learn_to_journal 0
lock_method         flock
dns_available       no
dns_server          {dns}
skip_rbl_checks     1
"""
"""The private ``99_pochta_anchor.cf`` next to a copy of /etc/spamassassin. ``bayes_auto_learn 0``
keeps the Bayes database as trained while letters are scanned (SpamAssassin's default, 1, would
let it learn from its own verdicts, so results would depend on the order of the letters)."""

SPAMASSASSIN_REPORTED = (
    "required_score",
    "use_bayes",
    "bayes_path",
    "bayes_auto_learn",
    "bayes_min_ham_num",
    "bayes_min_spam_num",
    "dns_available",
    "skip_rbl_checks",
)
"""Settings read back from SpamAssassin after training (:meth:`SpamAssassin.effective_settings`)."""


class AnchorError(RuntimeError):
    """An anchor could not be set up: the message says which daemon and where its log is."""


@dataclass(frozen=True, slots=True)
class Result:
    """One letter's verdict from an anchor."""

    is_spam: bool  # SpamAssassin: score >= required 5.0; Rspamd: action in RSPAMD_SPAM_ACTIONS
    score: float
    symbols: tuple[str, ...]  # names of the rules that fired
    action: str | None = None  # Rspamd's action; None for SpamAssassin

    @property
    def bayes(self) -> bool:
        """Whether a Bayes rule fired (SpamAssassin BAYES_00..BAYES_999, Rspamd BAYES_*)."""
        return any(s.startswith("BAYES_") for s in self.symbols)


@dataclass
class Training:
    """What training did: seconds, letters given, letters learned, Bayes counters afterwards."""

    seconds: float = 0.0
    ham: int = 0
    spam: int = 0
    learned_ham: int = 0
    learned_spam: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> letters
    bayes: dict[str, Any] = field(default_factory=dict)
    bayes_active: bool = False  # counters at or above the filter's own minimum for use


def corpus_training(
    ham_groups: Iterable[str] = TRAIN_HAM_GROUPS,
    spam_groups: Iterable[str] = TRAIN_SPAM_GROUPS,
    limit: int | None = None,
) -> tuple[list[bytes], list[bytes]]:
    """Raw training letters from the corpus, the non-sealed ones: (ham, spam), at most ``limit`` of
    each."""
    from pochta_factory import corpus

    ham = [m.raw for m in corpus.unsealed(ham_groups)]
    spam = [m.raw for m in corpus.unsealed(spam_groups)]
    if limit is not None:
        ham, spam = ham[:limit], spam[:limit]
    return ham, spam


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


# -- CPU accounting ---------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, utime + stime, cutime + cstime) in clock ticks, or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is state (field 3 of stat(5)); utime, stime, cutime, cstime are fields 14..17
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and all its live descendants, each with
    the cumulative CPU of its children that have exited and been waited for (cutime + cstime).

    So workers that come and go are counted: while alive by their own utime + stime, once
    reaped through their parent's cutime + cstime. The tree is listed first, then each process
    is read parent before children, so a child reaped in between is missed for this one sample
    (it shows up in the parent's cutime at the next) but never counted twice. Threads are
    included (a process's stat sums its threads).
    """
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                children.setdefault(st[0], []).append(int(entry.name))
    total = 0
    queue = [root]
    while queue:
        pid = queue.pop(0)
        st = _stat(pid)
        if st is None:
            continue
        total += st[1] + st[2]
        queue.extend(children.get(pid, []))
    return total / ticks


def tree_cpu_by_name(root: int, label: str = "") -> dict[str, float]:
    """CPU seconds of ``root``'s tree by process name (``comm``): each live process's own
    utime + stime under ``label + comm``, the CPU of its exited, reaped children under
    ``label + comm + " (exited children)"``. Take the difference of two samples per key; a
    process that exits in between moves its CPU from its own key to its parent's "exited" key,
    so only the sum over keys is exact (it equals :func:`tree_cpu_seconds`)."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                children.setdefault(st[0], []).append(int(entry.name))
    out: dict[str, float] = {}
    queue = [root]
    while queue:
        pid = queue.pop(0)
        st = _stat(pid)
        if st is None:
            continue
        try:
            comm = label + Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        out[comm] = out.get(comm, 0.0) + st[1] / ticks
        if st[2]:
            key = f"{comm} (exited children)"
            out[key] = out.get(key, 0.0) + st[2] / ticks
        queue.extend(children.get(pid, []))
    return out


# -- helpers ----------------------------------------------------------------------------------


class DnsSink:
    """A UDP DNS 'server' on a loopback port that records each query's name and answers
    REFUSED, so a daemon pointed at it fails lookups fast and the lookups can be listed."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.queries: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns-sink", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            if len(data) < 12:
                continue
            name, end = _qname(data)
            self.queries.append(name)
            flags = struct.unpack("!H", data[2:4])[0]
            reply_flags = 0x8000 | (flags & 0x7900) | 0x0080 | 5  # QR, opcode, RD, RA; REFUSED
            header = data[:2] + struct.pack("!HHHHH", reply_flags, 1, 0, 0, 0)
            with contextlib.suppress(OSError):
                self.sock.sendto(header + data[12:end], peer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


def _qname(packet: bytes) -> tuple[str, int]:
    """The first question's name and the offset just past its type and class."""
    labels: list[str] = []
    i = 12
    while i < len(packet) and packet[i] != 0:
        n = packet[i]
        labels.append(packet[i + 1 : i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    return ".".join(labels) or ".", min(len(packet), i + 5)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _stop(proc: subprocess.Popen[bytes] | None, timeout: float = 20.0) -> None:
    """SIGTERM, wait, then SIGKILL the process group (each daemon gets a session of its own)."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # leftover workers; the group is ours alone
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def _service_user(name: str) -> tuple[int, int] | None:
    """(uid, gid) to run a daemon as when we are root, else None (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _chown_tree(path: Path, ids: tuple[int, int] | None) -> None:
    if ids is None:
        return
    for p in [path, *path.rglob("*")]:
        os.chown(p, *ids)


class _Anchor:
    """Temporary directory, process bookkeeping and clean-up shared by both anchors."""

    name = "anchor"
    short = "anchor"  # in the temporary directory's name

    def __init__(
        self, ham: Sequence[bytes], spam: Sequence[bytes], startup_timeout: float, keep_dir: bool
    ) -> None:
        self.train_ham = ham
        self.train_spam = spam
        self.startup_timeout = startup_timeout
        self.keep_dir = keep_dir
        self.dir = Path()
        self.training = Training()
        self.startup_seconds = 0.0
        self.dns: DnsSink | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._failed = False
        self.parent: Path | None = None  # where the temporary directory goes (None: $TMPDIR)

    def __enter__(self) -> Self:
        # short: Dovecot's unix sockets go in here (a socket's path has at most 107 bytes)
        self.dir = Path(tempfile.mkdtemp(prefix=f"anchor-{self.short}-", dir=self.parent))
        self.dir.chmod(0o755)  # the daemons may run as a service user
        self.dns = DnsSink()
        try:
            self._start()
        except BaseException:
            self._failed = True
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._failed = True  # keep the directory: the error may name a log in it
        self.close()

    def _start(self) -> None:
        raise NotImplementedError

    def _spawn(self, argv: list[str], log: Path, **kw: Any) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kw,
            )
        self._procs.append(proc)
        return proc

    def _wait_ready(
        self, what: str, proc: subprocess.Popen[bytes], ready: Any, logs: Sequence[Path]
    ) -> None:
        """Poll ``ready()`` until true; AnchorError (with the logs) if the process exits or the
        startup timeout passes."""
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if proc.poll() is not None:
                raise AnchorError(self._why(f"{what} exited with code {proc.returncode}", logs))
            with contextlib.suppress(OSError, httpx.HTTPError):
                if ready():
                    return
            if time.monotonic() > deadline:
                raise AnchorError(
                    self._why(f"{what} did not come up within {self.startup_timeout:.0f} s", logs)
                )
            time.sleep(0.25)

    def _why(self, what: str, logs: Sequence[Path]) -> str:
        parts = [f"{self.name}: {what}; logs kept in {self.dir}:"]
        for log in logs:
            parts.append(f"--- {log} (last lines)\n{_tail(log)}")
        return "\n".join(parts)

    def close(self) -> None:
        """Stop the daemons (newest first) and remove the directory, unless it is to be kept
        (``keep_dir``, or startup or the ``with`` body failed)."""
        for proc in reversed(self._procs):
            _stop(proc)
        self._procs.clear()
        if self.dns is not None:
            self.dns.close()
        if self.dir != Path() and not (self.keep_dir or self._failed):
            shutil.rmtree(self.dir, ignore_errors=True)

    def dns_queries(self) -> list[str]:
        """Names the daemon tried to resolve through its configured nameserver (should be [])."""
        return list(self.dns.queries) if self.dns is not None else []


# -- SpamAssassin -----------------------------------------------------------------------------


class SpamAssassin(_Anchor):
    """``spamd`` 4.x with local tests only (``-L``), a private site configuration (a copy of
    /etc/spamassassin plus :data:`SPAMASSASSIN_SETTINGS`) and a private Bayes database trained
    by ``sa-learn`` before the daemon starts. As root, spamd and sa-learn run as ``nobody``.

    Verdict: SpamAssassin's own, score >= required_score 5.0. Scans speak the spamd protocol
    (``SYMBOLS SPAMC/1.5``) over a socket, one connection per letter, as spamc does.
    """

    name = "spamassassin"
    short = "sa"
    required_score = 5.0

    def __init__(
        self,
        ham: Sequence[bytes] = (),
        spam: Sequence[bytes] = (),
        *,
        children: int = 2,
        startup_timeout: float = 120.0,
        keep_dir: bool = False,
    ) -> None:
        super().__init__(ham, spam, startup_timeout, keep_dir)
        self.children = children
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._ids = _service_user("nobody")

    @property
    def log(self) -> Path:
        return self.dir / "spamd.log"

    @staticmethod
    def settings(bayes_path: Path | str = "<dir>/bayes/bayes", dns: str = "<sink>") -> str:
        """The private settings file (:data:`SPAMASSASSIN_SETTINGS` filled in)."""
        return SPAMASSASSIN_SETTINGS.format(bayes_path=bayes_path, dns=dns)

    @property
    def site(self) -> Path:
        return self.dir / "site"

    def _start(self) -> None:
        assert self.dns is not None
        t0 = time.perf_counter()
        self.site.mkdir()
        for conf in Path("/etc/spamassassin").iterdir():
            if conf.is_file() and conf.suffix in {".pre", ".cf"}:
                shutil.copy(conf, self.site / conf.name)
        (self.dir / "bayes").mkdir()
        (self.dir / "home").mkdir()
        (self.site / "99_pochta_anchor.cf").write_text(
            self.settings(bayes_path=self.dir / "bayes" / "bayes", dns=self.dns.address)
        )
        _chown_tree(self.dir, self._ids)
        if self.train_ham or self.train_spam:
            self._train()
        self.port = free_port()
        argv = [
            "spamd",
            "-L",
            "-x",
            "-i",
            f"{LOOPBACK}:{self.port}",
            "-A",
            LOOPBACK,
            f"--siteconfigpath={self.site}",
            "-H",
            str(self.dir / "home"),
            f"--max-children={self.children}",
            f"--min-children={self.children}",
            "--syslog=stderr",
            "--pidfile",
            str(self.dir / "spamd.pid"),
        ]
        if self._ids is not None:
            argv += [
                "-u",
                pwd.getpwuid(self._ids[0]).pw_name,
                "-g",
                grp.getgrgid(self._ids[1]).gr_name,
            ]
        self.proc = self._spawn(argv, self.log, cwd=self.dir)
        self._wait_ready("spamd", self.proc, self._ping, [self.log])
        self.startup_seconds = time.perf_counter() - t0 - self.training.seconds

    def _ping(self) -> bool:
        with socket.create_connection((LOOPBACK, self.port), timeout=2) as s:
            s.sendall(b"PING SPAMC/1.5\r\n\r\n")
            return b"PONG" in _recv_all(s)

    def _run_as(self, argv: list[str], log: Path, timeout: float) -> str:
        kw: dict[str, Any] = {}
        if self._ids is not None:
            kw = {"user": self._ids[0], "group": self._ids[1], "extra_groups": []}
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.dir,
            env={**os.environ, "HOME": str(self.dir / "home")},
            **kw,
        )
        with log.open("a") as out:
            out.write(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            raise AnchorError(self._why(f"{argv[0]} exited with code {done.returncode}", [log]))
        return str(done.stdout)

    def _train(self) -> None:
        """sa-learn --ham / --spam from letters written one a file, then read the counters."""
        log = self.dir / "sa-learn.log"
        base = ["sa-learn", "-L", f"--siteconfigpath={self.site}", f"--dbpath={self.dir / 'bayes'}"]
        t0 = time.perf_counter()
        for kind, letters in (("ham", self.train_ham), ("spam", self.train_spam)):
            folder = self.dir / "train" / kind
            folder.mkdir(parents=True)
            for i, raw in enumerate(letters):
                (folder / f"{i:05d}").write_bytes(raw)
            _chown_tree(self.dir / "train", self._ids)
            out = self._run_as([*base, f"--{kind}", str(folder)], log, timeout=3600)
            m = re.search(r"Learned tokens from (\d+) message\(s\) \((\d+) message", out)
            if m:  # the rest were already learned (the same Message-ID and headers)
                setattr(self.training, f"learned_{kind}", int(m.group(1)))
                if int(m.group(2)) > int(m.group(1)):
                    self.training.skipped[f"{kind}: already learned"] = int(m.group(2)) - int(
                        m.group(1)
                    )
            shutil.rmtree(folder)
        self.training.seconds = time.perf_counter() - t0
        self.training.ham, self.training.spam = len(self.train_ham), len(self.train_spam)
        magic = self._run_as([*base, "--dump", "magic"], log, timeout=300)
        counters: dict[str, Any] = {}
        for line in magic.splitlines():  # "0.000  0  250  0  non-token data: nham"
            m = re.match(r"\s*\S+\s+\d+\s+(\d+)\s+\d+\s+non-token data: (.+)", line)
            if m:
                counters[m.group(2).strip()] = int(m.group(1))
        counters.update(self.effective_settings())
        self.training.bayes = counters
        self.training.bayes_active = counters.get("nham", 0) >= int(
            counters["bayes_min_ham_num"]
        ) and counters.get("nspam", 0) >= int(counters["bayes_min_spam_num"])

    def effective_settings(self) -> dict[str, str]:
        """The settings SpamAssassin really uses with the private site configuration, read from
        a Mail::SpamAssassin object built the way spamd builds it."""
        script = (
            "use Mail::SpamAssassin; my $sa = Mail::SpamAssassin->new({site_rules_filename => "
            "$ARGV[0], local_tests_only => 1, dont_copy_prefs => 1, userprefs_filename => "
            "'/dev/null'}); $sa->init(0); my $c = $sa->{conf}; print \"$_=$c->{$_}\\n\" for "
            "@ARGV[1..$#ARGV];"
        )
        out = self._run_as(
            ["perl", "-e", script, str(self.site), *SPAMASSASSIN_REPORTED],
            self.dir / "sa-learn.log",
            timeout=300,
        )
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def cpu_seconds(self) -> float:
        """CPU seconds of spamd and its children (see :func:`tree_cpu_seconds`): the parent,
        the live preforked children, and every child that already exited (spamd replaces a
        child after --max-conn-per-child letters) through the parent's cutime + cstime."""
        return tree_cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def check(self, raw: bytes) -> Result:
        """One letter through ``SYMBOLS SPAMC/1.5``: spamd answers with ``Spam: True ; s / r``
        and the comma-separated names of the rules that fired."""
        request = b"SYMBOLS SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(raw)
        with socket.create_connection((LOOPBACK, self.port), timeout=300) as s:
            s.sendall(request + raw)
            # spamd reads the letter by lines: a last line without a newline (hard-ham-1/00228)
            # is only complete at end of input, so say so, as spamc does
            s.shutdown(socket.SHUT_WR)
            reply = _recv_all(s)
        head, _, body = reply.partition(b"\r\n\r\n")
        status, *headers = head.decode("latin-1").split("\r\n")
        if " 0 EX_OK" not in status:
            raise AnchorError(f"spamd answered {status!r}; log: {self.log}")
        spam_header = next((h for h in headers if h.lower().startswith("spam:")), "")
        m = re.match(r"spam:\s*(\w+)\s*;\s*(-?[\d.]+)\s*/\s*(-?[\d.]+)", spam_header, re.I)
        if m is None:
            raise AnchorError(f"spamd answered without a Spam header: {head!r}")
        symbols = tuple(s for s in body.decode("latin-1").strip().split(",") if s)
        return Result(
            is_spam=m.group(1).lower() == "true", score=float(m.group(2)), symbols=symbols
        )

    def scan(self, raws: Sequence[bytes], concurrency: int = 2) -> list[Result]:
        """Verdicts for ``raws``, in order, ``concurrency`` letters in flight."""
        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(self.check, raws))

    def version(self) -> str:
        out = subprocess.run(["spamd", "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0] if out else "spamd"


def _recv_all(s: socket.socket) -> bytes:
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# -- Rspamd -----------------------------------------------------------------------------------


class Rspamd(_Anchor):
    """``rspamd`` 3.x in the foreground with the stock /etc/rspamd/rspamd.conf and a private
    LOCAL_CONFDIR (local.d / override.d written here), DBDIR, RUNDIR and LOGDIR, plus a private
    ``redis-server`` used only by the Bayes classifier (no global ``redis`` section, so the
    modules that need one stay unconfigured). Network checks are off: :data:`RSPAMD_DISABLED`,
    :data:`RSPAMD_PARTLY`, and every resolver lookup goes to :class:`DnsSink`.

    Bayes is trained through the controller's ``/learnham`` and ``/learnspam`` with
    ``Learn-Type: bulk`` (every letter is learned, as sa-learn does; without it, once 200 of a
    class are in, Rspamd refuses letters its Bayes already classifies with probability >= 95 %:
    on spam-1 it then learns about 290 of 500), one at a time, duplicates skipped by Rspamd.
    Verdict: action in :data:`RSPAMD_SPAM_ACTIONS`. Scans are ``POST /checkv2`` to the normal
    worker with the letter alone (no IP, HELO or envelope, as ``rspamc FILE`` sends it; Rspamd
    then takes the sender IP from the Received headers).
    """

    name = "rspamd"
    short = "rspamd"

    def __init__(
        self,
        ham: Sequence[bytes] = (),
        spam: Sequence[bytes] = (),
        *,
        workers: int = 2,
        bulk_learn: bool = True,
        milter: bool = False,
        startup_timeout: float = 180.0,
        keep_dir: bool = False,
    ) -> None:
        super().__init__(ham, spam, startup_timeout, keep_dir)
        self.workers = workers
        self.bulk_learn = bulk_learn
        self.milter = milter
        self.ports: dict[str, int] = {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.redis: subprocess.Popen[bytes] | None = None
        self._ids = _service_user("_rspamd")
        self._client: httpx.Client | None = None
        self.hyperscan = False  # whether the workers had loaded hyperscan when startup ended

    @property
    def log(self) -> Path:
        return self.dir / "log" / "rspamd.log"

    @property
    def milter_socket(self) -> Path:
        """The proxy worker's milter socket (``milter=True``), for Postfix's ``smtpd_milters``."""
        return self.dir / "run" / "milter.sock"

    def _conf(self) -> dict[str, str]:
        """local.d / override.d files, by relative path."""
        assert self.dns is not None
        p = self.ports
        off = "count = -1;\n"
        files = {
            "local.d/options.inc": (
                "dns {\n"
                f'  nameserver = ["{self.dns.address}"];\n'
                "  timeout = 0.5s;\n  retransmits = 1;\n}\n"
            ),
            "override.d/worker-normal.inc": (
                f'bind_socket = "{LOOPBACK}:{p["normal"]}";\n'
                f"count = {1 if self.milter else self.workers};\n"
            ),
            "override.d/worker-controller.inc": (
                f'bind_socket = "{LOOPBACK}:{p["controller"]}";\ncount = 1;\n'
                f'secure_ip = "{LOOPBACK}";\n'
            ),
            # not started (count = -1, as the stock fuzzy worker), and off the standard ports
            "override.d/worker-proxy.inc": (
                RSPAMD_MILTER_PROXY.format(socket=self.milter_socket, count=self.workers)
                if self.milter
                else f'bind_socket = "{LOOPBACK}:{p["proxy"]}";\n{off}'
            ),
            "override.d/worker-fuzzy.inc": f'bind_socket = "{LOOPBACK}:{p["fuzzy"]}";\n{off}',
            "local.d/classifier-bayes.conf": (
                f'backend = "redis";\nservers = "{LOOPBACK}:{p["redis"]}";\n'
            ),
            "local.d/hfilter.conf": "helo_enabled = false;\nfrom_enabled = false;\n"
            "mid_enabled = false;\nhostname_enabled = false;\n",
            "local.d/phishing.conf": "phishtank_enabled = false;\nopenphish_enabled = false;\n",
        }
        if self.milter:
            files["local.d/actions.conf"] = RSPAMD_MILTER_ACTIONS
        for module in RSPAMD_DISABLED:
            files[f"local.d/{module}.conf"] = "enabled = false;\n"
        for module, text in RSPAMD_LOCAL_MAPS.items():
            files[f"override.d/{module}.conf"] = text
        return files

    def _start(self) -> None:
        t0 = time.perf_counter()
        for d in ("conf/local.d", "conf/override.d", "db", "run", "log", "redis"):
            (self.dir / d).mkdir(parents=True)
        self.ports = {k: free_port() for k in ("normal", "controller", "proxy", "fuzzy", "redis")}
        for rel, text in self._conf().items():
            (self.dir / "conf" / rel).write_text(text)
        redis_log = self.dir / "redis" / "redis.log"
        self.redis = self._spawn(
            [
                "redis-server",
                "--bind",
                LOOPBACK,
                "--port",
                str(self.ports["redis"]),
                "--dir",
                str(self.dir / "redis"),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
                "--logfile",
                str(redis_log),
            ],
            self.dir / "redis" / "stderr.log",
        )
        self._wait_ready(
            "redis-server",
            self.redis,
            self._redis_ping,
            [self.dir / "redis" / "stderr.log", redis_log],
        )
        _chown_tree(self.dir / "conf", self._ids)
        for d in ("db", "run", "log"):
            _chown_tree(self.dir / d, self._ids)
        argv = ["rspamd", "-f", "-c", "/etc/rspamd/rspamd.conf"]
        for var, sub in (
            ("LOCAL_CONFDIR", "conf"),
            ("DBDIR", "db"),
            ("RUNDIR", "run"),
            ("LOGDIR", "log"),
        ):
            argv += ["--var", f"{var}={self.dir / sub}"]
        if self._ids is not None:
            argv += [
                "-u",
                pwd.getpwuid(self._ids[0]).pw_name,
                "-g",
                grp.getgrgid(self._ids[1]).gr_name,
            ]
        stderr = self.dir / "rspamd.stderr"
        self.proc = self._spawn(argv, stderr)
        self._client = httpx.Client(timeout=300)
        self._wait_ready("rspamd", self.proc, self._ready, [stderr, self.log])
        self.hyperscan = self._wait_hyperscan(deadline=time.monotonic() + self.startup_timeout)
        self.startup_seconds = time.perf_counter() - t0
        if self.train_ham or self.train_spam:
            self._train()

    def _wait_hyperscan(self, deadline: float) -> bool:
        """Wait until every normal worker has loaded the hyperscan database that the hs_helper
        compiles after startup (until then the workers match with PCRE, slower), so that scans
        and their CPU are measured in the steady state. False when it never shows in the log
        (an rspamd built without hyperscan) before the deadline."""
        loaded = re.compile(
            r"\((normal|rspamd_proxy)\).*full hyperscan database of \d+ regexps has been loaded"
        )
        scanners = self.workers + 1 if self.milter else self.workers  # + the idle normal one
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                found = loaded.findall(self.log.read_text(errors="replace"))
                if len(found) >= scanners:
                    return True
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.5)
        return False

    def _redis_ping(self) -> bool:
        with socket.create_connection((LOOPBACK, self.ports["redis"]), timeout=2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")

    def _url(self, worker: str, path: str) -> str:
        return f"http://{LOOPBACK}:{self.ports[worker]}{path}"

    def _ready(self) -> bool:
        assert self._client is not None
        return all(
            self._client.get(self._url(w, "/ping"), timeout=2).text.strip() == "pong"
            for w in ("normal", "controller")
        ) and (not self.milter or self.milter_socket.exists())

    def _train(self) -> None:
        """POST every letter to /learnham or /learnspam, then read the Bayes counters."""
        assert self._client is not None
        t0 = time.perf_counter()
        headers = {"Learn-Type": "bulk"} if self.bulk_learn else {}

        def learn(item: tuple[str, bytes]) -> tuple[str, str | None]:
            kind, raw = item
            assert self._client is not None
            r = self._client.post(
                self._url("controller", f"/learn{kind}"), content=raw, headers=headers
            )
            if r.status_code == 200 and r.json().get("success"):
                return kind, None
            if r.status_code == 204:  # learn_condition said no (without bulk: already sure)
                return kind, "refused by learn_condition (204)"
            try:
                reason = str(r.json().get("error", r.text))
            except ValueError:
                reason = r.text
            return kind, (
                "already learned"
                if "already learned" in reason
                else reason[:80] or str(r.status_code)
            )

        items = [("ham", raw) for raw in self.train_ham] + [
            ("spam", raw) for raw in self.train_spam
        ]
        # one at a time: the controller is one process anyway, and two copies of a letter
        # learned concurrently would both count, so the counters would vary from run to run
        for kind, skipped in map(learn, items):
            if skipped is None:
                name = f"learned_{kind}"
                setattr(self.training, name, getattr(self.training, name) + 1)
            else:
                key = f"{kind}: {skipped}"
                self.training.skipped[key] = self.training.skipped.get(key, 0) + 1
        self.training.seconds = time.perf_counter() - t0
        self.training.ham, self.training.spam = len(self.train_ham), len(self.train_spam)
        self.training.bayes = self.bayes_counters()
        self.training.bayes_active = all(
            self.training.bayes[k] >= RSPAMD_MIN_LEARNS for k in ("learns_ham", "learns_spam")
        )

    def bayes_counters(self) -> dict[str, int]:
        """Letters learned per class, from the ``RS`` hash the classifier keeps in redis (what
        it compares with min_learns), and the number of redis keys (tokens and bookkeeping)."""
        import redis

        with redis.Redis(host=LOOPBACK, port=self.ports["redis"]) as r:
            stats = {k.decode(): v.decode() for k, v in r.hgetall("RS").items()}
            keys = int(r.dbsize())
        return {
            "learns_ham": int(stats.get("learns_ham", 0)),
            "learns_spam": int(stats.get("learns_spam", 0)),
            "min_learns": RSPAMD_MIN_LEARNS,
            "redis_keys": keys,
        }

    def cpu_seconds(self) -> float:
        """CPU seconds of all rspamd processes: main, workers (normal, controller, hs_helper)
        and any that exited (see :func:`tree_cpu_seconds`). redis-server is not included:
        :meth:`redis_cpu_seconds`."""
        return tree_cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def redis_cpu_seconds(self) -> float:
        """CPU seconds of the private redis-server that holds the Bayes statistics."""
        return tree_cpu_seconds(self.redis.pid) if self.redis is not None else 0.0

    def check(self, raw: bytes) -> Result:
        """One letter through the normal worker's ``POST /checkv2``."""
        assert self._client is not None
        r = self._client.post(self._url("normal", "/checkv2"), content=raw)
        if r.status_code != 200:
            raise AnchorError(
                f"rspamd /checkv2 answered {r.status_code}: {r.text[:200]}; log: {self.log}"
            )
        data = r.json()
        action = str(data.get("action", ""))
        return Result(
            is_spam=action in RSPAMD_SPAM_ACTIONS,
            score=float(data.get("score", 0)),
            symbols=tuple(sorted(data.get("symbols", {}))),
            action=action,
        )

    def scan(self, raws: Sequence[bytes], concurrency: int = 2) -> list[Result]:
        """Verdicts for ``raws``, in order, ``concurrency`` letters in flight."""
        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(self.check, raws))

    def log_findings(self) -> dict[str, list[str]]:
        """Log lines that would show a network attempt: host-name resolution, HTTP(S) maps,
        DNS errors. Should all be empty."""
        patterns = {
            "resolve": re.compile(r"rspamd_resolve_addrs|getaddrinfo|cannot resolve", re.I),
            "http_map": re.compile(r"map.*https?://|https?://.*map", re.I),
            "dns_error": re.compile(r"error looking up|DNS request|dns_fail|timed out", re.I),
        }
        found: dict[str, list[str]] = {k: [] for k in patterns}
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return found
        for line in lines:
            if "rspamd_task_write_log" in line:  # a letter's result: its URLs, not a fetch
                continue
            for key, rx in patterns.items():
                if rx.search(line):
                    found[key].append(line[:300])
        return found

    def version(self) -> str:
        out = subprocess.run(["rspamd", "--version"], capture_output=True, text=True).stdout
        return out.strip().splitlines()[0] if out else "rspamd"

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        super().close()


# -- Postfix -> Dovecot LMTP ------------------------------------------------------------------

POSTFIX_MAIN_CF = """\
# pochta benchmarks/anchors.py: accept mail for {domain} on loopback and hand it over LMTP to
# a private Dovecot on loopback; nothing else. No DNS, no relayhost, and no SMTP client at all
# (master.cf has no smtp or relay service): every other destination is the error transport.
compatibility_level = 3.6
queue_directory = {dir}/postfix-queue
data_directory = {dir}/postfix-data
meta_directory = /etc/postfix
mail_owner = postfix
setgid_group = postdrop
myhostname = anchor.pochta.invalid
mydomain = pochta.invalid
myorigin = $myhostname
mydestination =
mynetworks = 127.0.0.0/8
inet_interfaces = loopback-only
inet_protocols = ipv4
relayhost =
relay_domains = {domain}
relay_recipient_maps =
transport_maps = inline:{{{domain}=lmtp:inet:127.0.0.1:{lmtp}}}
relay_transport = lmtp:inet:127.0.0.1:{lmtp}
default_transport = error:pochta benchmark anchor: no delivery outside {domain}
local_transport = error:pochta benchmark anchor: no local delivery
virtual_transport = error:pochta benchmark anchor: no virtual delivery
local_recipient_maps =
alias_maps =
alias_database =
smtp_dns_support_level = disabled
lmtp_dns_support_level = disabled
disable_dns_lookups = yes
smtp_host_lookup = native
lmtp_host_lookup = native
smtpd_peername_lookup = no
biff = no
append_dot_mydomain = no
maillog_file = {dir}/postfix.log
maillog_file_prefixes = {dir}
"""
"""Postfix's private ``main.cf``. Everything else is Postfix 3.7's default: the cleanup daemon
fsyncs each queue file before smtpd answers 250 (always; Postfix has no setting to turn it off),
``in_flow_delay = 1s``, LMTP destination concurrency 20, process limit 100."""

POSTFIX_MILTER_CF = """\
# the letter goes through Rspamd's milter (its proxy worker) before smtpd answers the DATA
smtpd_milters = unix:{socket}
non_smtpd_milters =
milter_protocol = 6
milter_default_action = tempfail
milter_mail_macros = i {{mail_addr}} {{client_addr}} {{client_name}} {{auth_authen}}
"""
"""Appended to :data:`POSTFIX_MAIN_CF` when a milter is given. ``tempfail``: a milter that
cannot be reached makes smtpd answer 451, which the client counts as not sent, rather than
letting the letter through unscanned."""

POSTFIX_MASTER_CF = """\
# pochta benchmarks/anchors.py: no chroot, no smtp/relay client, no pickup (no local submission)
127.0.0.1:{smtpd} inet n - n - - smtpd
cleanup   unix n - n - 0 cleanup
qmgr      unix n - n 300 1 qmgr
rewrite   unix - - n - - trivial-rewrite
bounce    unix - - n - 0 bounce
defer     unix - - n - 0 bounce
trace     unix - - n - 0 bounce
verify    unix - - n - 1 verify
flush     unix n - n 1000? 0 flush
proxymap  unix - - n - - proxymap
proxywrite unix - - n - 1 proxymap
showq     unix n - n - - showq
lmtp      unix - - n - - lmtp
error     unix - - n - - error
retry     unix - - n - - error
discard   unix - - n - - discard
anvil     unix - - n - 1 anvil
scache    unix - - n - 1 scache
postlog   unix-dgram n - n - 1 postlogd
"""

DOVECOT_CONF = """\
# pochta benchmarks/anchors.py: LMTP only, on loopback, into one Maildir per user (static userdb)
protocols = lmtp
listen = 127.0.0.1
base_dir = {dir}/dovecot-run
state_dir = {dir}/dovecot-state
instance_name = {instance}
log_path = {dir}/dovecot.log
ssl = no
default_login_user = dovenull
default_internal_user = dovecot
mail_location = maildir:~/Maildir
mail_fsync = {mail_fsync}
passdb {{
  driver = static
  args = nopassword=y
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={dir}/vmail/%n allow_all_users=yes
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp}
  }}
}}
"""
"""Dovecot's private configuration (no /etc/dovecot file is read). With ``mail_fsync =
optimized`` (the default) each LMTP delivery into Maildir fsyncs the letter's file and
fdatasyncs the uidlist and the index log before Dovecot answers 250 (seen with strace: one
fsync + two fdatasync per letter); ``always`` adds more."""

POSTFIX_QUEUES = ("maildrop", "incoming", "active", "deferred", "hold")


class PostfixDovecot(_Anchor):
    """Postfix 3.x (``postfix -c DIR start-fg``, a private config, queue and data directory)
    relaying every letter for ``domain`` over ``lmtp:inet:127.0.0.1:<port>`` to Dovecot 2.3
    (``dovecot -F -c CONF``) with a static userdb and one Maildir per user, all in a temporary
    directory, on free loopback ports. Needs root (both masters start as root and drop to their
    service users; mail is stored as ``nobody``), and ``parent`` and its ancestors searchable by
    others (``o+x``: Postfix opens its data directory as the ``postfix`` user).

    ``port`` is Postfix's smtpd; ``lmtp_port`` Dovecot's LMTP listener. A letter is *accepted*
    when smtpd answers 250 (it is then fsynced in Postfix's queue), *delivered* when it is a
    file in the Maildir and gone from the queue: :meth:`wait_delivered`.
    ``cpu_seconds()`` is Postfix's processes (master, smtpd, cleanup, trivial-rewrite, qmgr,
    lmtp, postlogd, ...) plus Dovecot's (master, lmtp, auth, log, ...).
    """

    name = "postfix-dovecot"
    short = "pd"

    def __init__(
        self,
        domain: str = "example.org",
        *,
        mail_fsync: str = "optimized",
        milter: Path | None = None,
        parent: Path | str | None = None,
        startup_timeout: float = 60.0,
        keep_dir: bool = False,
    ) -> None:
        super().__init__((), (), startup_timeout, keep_dir)
        self.domain = domain
        self.mail_fsync = mail_fsync
        self.milter = milter  # a milter's unix socket, or None
        self.parent = Path(parent) if parent is not None else None
        self.port = 0
        self.lmtp_port = 0
        self.postfix: subprocess.Popen[bytes] | None = None
        self.dovecot: subprocess.Popen[bytes] | None = None

    @staticmethod
    def missing() -> str | None:
        """Why the anchor cannot run here (``"not installed: ..."``, ``"needs root"``), or
        None when it can."""
        absent = [
            what
            for what, path in (
                ("postfix", shutil.which("postfix") or shutil.which("/usr/sbin/postfix")),
                ("dovecot-core", shutil.which("dovecot") or shutil.which("/usr/sbin/dovecot")),
                (
                    "dovecot-lmtpd",
                    "/usr/lib/dovecot/lmtp" if Path("/usr/lib/dovecot/lmtp").exists() else None,
                ),
            )
            if path is None
        ]
        if absent:
            return "not installed: " + ", ".join(absent)
        if os.geteuid() != 0:
            return "needs root (postfix and dovecot masters start as root)"
        return None

    @property
    def log(self) -> Path:
        return self.dir / "postfix.log"

    @property
    def conf(self) -> Path:
        return self.dir / "postfix"

    @property
    def pids(self) -> list[int]:
        """Roots of the two process trees, for :func:`tree_cpu_seconds`."""
        return [p.pid for p in (self.postfix, self.dovecot) if p is not None]

    def _start(self) -> None:
        t0 = time.perf_counter()
        self.port, self.lmtp_port = free_port(), free_port()
        while self.lmtp_port == self.port:
            self.lmtp_port = free_port()
        bad = {25, 2525, 8025, 2424}
        if bad & {self.port, self.lmtp_port}:
            raise AnchorError(f"{self.name}: picked a reserved port")
        for d in self.dir.parents:  # postfix, dovecot and nobody must reach their directories
            if not d.stat().st_mode & 0o001:
                raise AnchorError(f"{self.name}: {d} is not searchable by others (chmod o+x)")
        # Dovecot first: Postfix delivers as soon as it is up
        nobody = pwd.getpwnam("nobody")
        (self.dir / "vmail").mkdir()
        os.chown(self.dir / "vmail", nobody.pw_uid, nobody.pw_gid)
        (self.dir / "dovecot-state").mkdir()
        dovecot_conf = self.dir / "dovecot.conf"
        dovecot_conf.write_text(
            DOVECOT_CONF.format(
                dir=self.dir,
                instance=f"pochta-anchor-{self.dir.name}",
                mail_fsync=self.mail_fsync,
                uid=nobody.pw_uid,
                gid=nobody.pw_gid,
                lmtp=self.lmtp_port,
            )
        )
        stderr = self.dir / "dovecot.stderr"
        self.dovecot = self._spawn(["dovecot", "-F", "-c", str(dovecot_conf)], stderr)
        self._wait_ready(
            "dovecot",
            self.dovecot,
            lambda: _banner(self.lmtp_port, b"LHLO"),
            [stderr, self.dir / "dovecot.log"],
        )
        self.conf.mkdir()
        main_cf = POSTFIX_MAIN_CF.format(dir=self.dir, domain=self.domain, lmtp=self.lmtp_port)
        if self.milter is not None:
            main_cf += POSTFIX_MILTER_CF.format(socket=self.milter)
        (self.conf / "main.cf").write_text(main_cf)
        (self.conf / "master.cf").write_text(POSTFIX_MASTER_CF.format(smtpd=self.port))
        (self.dir / "postfix-queue").mkdir()
        check = subprocess.run(
            ["postfix", "-c", str(self.conf), "check"], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise AnchorError(f"{self.name}: postfix check failed: {check.stderr}")
        stderr = self.dir / "postfix.stderr"
        self.postfix = self._spawn(["postfix", "-c", str(self.conf), "start-fg"], stderr)
        self._wait_ready(
            "postfix", self.postfix, lambda: _banner(self.port, b"EHLO"), [stderr, self.log]
        )
        self.startup_seconds = time.perf_counter() - t0

    def master_pid(self) -> int | None:
        try:
            return int((self.dir / "postfix-queue" / "pid" / "master.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def postfix_cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.postfix.pid) if self.postfix is not None else 0.0

    def dovecot_cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.dovecot.pid) if self.dovecot is not None else 0.0

    def cpu_seconds(self) -> float:
        """CPU seconds of both process trees (see :func:`tree_cpu_seconds`)."""
        return self.postfix_cpu_seconds() + self.dovecot_cpu_seconds()

    def cpu_by_process(self) -> dict[str, float]:
        """:func:`tree_cpu_by_name` of both trees, keys ``postfix/<comm>``, ``dovecot/<comm>``."""
        out: dict[str, float] = {}
        if self.postfix is not None:
            out.update(tree_cpu_by_name(self.postfix.pid, "postfix/"))
        if self.dovecot is not None:
            out.update(tree_cpu_by_name(self.dovecot.pid, "dovecot/"))
        return out

    def maildir_count(self) -> int:
        """Letters in the users' Maildirs (new/ and cur/; tmp/ holds letters being written)."""
        n = 0
        for sub in self.dir.glob("vmail/*/Maildir"):
            for d in ("new", "cur"):
                with contextlib.suppress(FileNotFoundError), os.scandir(sub / d) as it:
                    n += sum(1 for _ in it)
        return n

    def queue_count(self) -> int:
        """Letters in Postfix's queues (maildrop, incoming, active, deferred, hold)."""
        n = 0
        for q in POSTFIX_QUEUES:
            for _, _, files in os.walk(self.dir / "postfix-queue" / q):
                n += len(files)
        return n

    def wait_delivered(
        self, letters: int, timeout: float = 300.0, poll: float = 0.02
    ) -> tuple[int, int, float]:
        """Wait until the Maildirs hold ``letters`` letters and Postfix's queue is empty, or
        ``timeout`` seconds. Returns (letters in the Maildirs, letters still queued, the
        ``time.perf_counter()`` when that was seen)."""
        deadline = time.monotonic() + timeout
        while True:
            stored = self.maildir_count()
            if stored >= letters:
                queued = self.queue_count()
                if queued == 0:
                    return stored, 0, time.perf_counter()
            if time.monotonic() > deadline:
                return stored, self.queue_count(), time.perf_counter()
            time.sleep(poll)

    def log_summary(self) -> dict[str, Any]:
        """From Postfix's log: deliveries by status, the relays used (should only be Dovecot
        on loopback) and warnings; from Dovecot's log: errors."""
        statuses: dict[str, int] = {}
        relays: dict[str, int] = {}
        warnings: list[str] = []
        with contextlib.suppress(OSError):
            for line in self.log.read_text(errors="replace").splitlines():
                m = re.search(r"\brelay=(\S+?),.*\bstatus=(\w+)", line)
                if m:
                    relays[m.group(1)] = relays.get(m.group(1), 0) + 1
                    statuses[m.group(2)] = statuses.get(m.group(2), 0) + 1
                elif re.search(r"\b(warning|error|fatal|panic):", line):
                    warnings.append(line[:300])
        errors: list[str] = []
        with contextlib.suppress(OSError):
            for line in (self.dir / "dovecot.log").read_text(errors="replace").splitlines():
                if re.search(r"\b(Warning|Error|Fatal|Panic):", line):
                    errors.append(line[:300])
        return {
            "postfix_status": statuses,
            "postfix_relays": relays,
            "postfix_warnings": warnings[:10],
            "dovecot_errors": errors[:10],
        }

    def settings(self) -> dict[str, Any]:
        """What the JSON should say about this anchor's setup."""
        return {
            "postfix": self.version("postfix"),
            "dovecot": self.version("dovecot"),
            "smtpd": f"{LOOPBACK}:{self.port}",
            "lmtp": f"{LOOPBACK}:{self.lmtp_port}",
            "route": f"relay_domains = {self.domain}, transport lmtp:inet:{LOOPBACK}:"
            f"{self.lmtp_port}; default, local and virtual transports = error; no smtp client "
            "service; DNS off; inet_interfaces = loopback-only, inet_protocols = ipv4",
            "postfix_fsync": "cleanup fsyncs each queue file before the 250 (stock, always)",
            "dovecot_mail_fsync": self.mail_fsync,
            "dovecot_storage": "Maildir (one file per letter) + dovecot index, static userdb",
            "postfix_stock_tuning": "in_flow_delay 1s, lmtp concurrency 20, process limit 100",
            "logging": "postfix to a file through postlogd, dovecot to a file (in the CPU)",
        }

    @staticmethod
    def version(which: str) -> str:
        argv = (
            ["postconf", "-d", "-h", "mail_version"]
            if which == "postfix"
            else ["dovecot", "--version"]
        )
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        except OSError:
            return "not installed"
        return out.strip().split()[0] if out.strip() else "unknown"

    def close(self) -> None:
        """``postfix stop`` (master stops its children), then stop both trees, then make sure
        no master of ours is left (its pid file names it)."""
        master = self.master_pid()
        if self.postfix is not None and self.postfix.poll() is None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    ["postfix", "-c", str(self.conf), "stop"], capture_output=True, timeout=60
                )
        super().close()  # SIGTERM / SIGKILL the groups (dovecot master stops its children)
        if master is not None:
            deadline = time.monotonic() + 10
            while _alive(master) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(master):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(master, signal.SIGKILL)


class PostfixRspamdDovecot(PostfixDovecot):
    """The whole C stack an operator runs instead of pochta: :class:`PostfixDovecot` whose
    smtpd hands every letter to Rspamd's milter before answering the DATA, the milter being
    Rspamd's proxy worker on a unix socket (:data:`RSPAMD_MILTER_PROXY`: over TCP each letter
    stalls ~40 ms, rspamd issue 1790) scanning the letter itself, ``workers`` proxy processes.
    ``rspamd``: one already running with ``milter=True`` (started and trained once, shared by
    several rounds; not closed here) instead of starting one.
    Rspamd is :class:`Rspamd` (network checks off, Bayes in a private redis, trained on
    ``ham`` / ``spam`` before Postfix starts) with reject and greylist off
    (:data:`RSPAMD_MILTER_ACTIONS`), so every letter is stored; a spam verdict adds the
    ``X-Spam`` header. Dovecot's static userdb takes any user of ``domain``: one Maildir per
    recipient, as many mailboxes as the client addresses.

    ``cpu_seconds()`` sums Postfix's, Dovecot's and Rspamd's processes and the redis-server
    that holds the Bayes statistics; ``cpu_by_process()`` has them under ``postfix/``,
    ``dovecot/``, ``rspamd/`` and ``redis/``.
    """

    name = "postfix-rspamd-dovecot"
    short = "prd"

    def __init__(
        self,
        ham: Sequence[bytes] = (),
        spam: Sequence[bytes] = (),
        domain: str = "example.org",
        *,
        workers: int = 2,
        rspamd: Rspamd | None = None,
        parent: Path | str | None = None,
        startup_timeout: float = 240.0,
        keep_dir: bool = False,
    ) -> None:
        super().__init__(domain, parent=parent, startup_timeout=startup_timeout, keep_dir=keep_dir)
        self.own_rspamd = rspamd is None
        if rspamd is None:
            rspamd = Rspamd(
                ham, spam, workers=workers, milter=True, startup_timeout=startup_timeout
            )
            rspamd.parent = self.parent
        elif not rspamd.milter:
            raise ValueError("the Rspamd given must run with milter=True")
        self.rspamd = rspamd

    @staticmethod
    def missing() -> str | None:
        why = PostfixDovecot.missing()
        absent = [w for w in ("rspamd", "redis-server") if shutil.which(w) is None]
        if absent:
            why = "; ".join([*([why] if why else []), "not installed: " + ", ".join(absent)])
        return why

    def _start(self) -> None:
        t0 = time.perf_counter()
        if self.own_rspamd:
            self.rspamd.__enter__()  # trained before Postfix takes a letter
        self.milter = self.rspamd.milter_socket
        super()._start()
        self.startup_seconds = time.perf_counter() - t0

    def rspamd_cpu_seconds(self) -> float:
        """Rspamd's processes and its Bayes redis-server."""
        return self.rspamd.cpu_seconds() + self.rspamd.redis_cpu_seconds()

    def cpu_seconds(self) -> float:
        return super().cpu_seconds() + self.rspamd_cpu_seconds()

    def cpu_by_process(self) -> dict[str, float]:
        out = super().cpu_by_process()
        if self.rspamd.proc is not None:
            out.update(tree_cpu_by_name(self.rspamd.proc.pid, "rspamd/"))
        if self.rspamd.redis is not None:
            out.update(tree_cpu_by_name(self.rspamd.redis.pid, "redis/"))
        return out

    def spam_headers(self) -> int:
        """Stored letters that carry Rspamd's ``X-Spam`` header (its spam verdicts)."""
        n = 0
        for path in self.dir.glob("vmail/*/Maildir/*/*"):
            with contextlib.suppress(OSError), path.open("rb") as f:
                head = f.read(65536).split(b"\n\n", 1)[0].split(b"\r\n\r\n", 1)[0]
                n += b"\nX-Spam:" in b"\n" + head
        return n

    def log_summary(self) -> dict[str, Any]:
        out = super().log_summary()
        out["rspamd_dns_queries"] = self.rspamd.dns_queries()[:10]
        out["rspamd_network_findings"] = {
            k: v[:5] for k, v in self.rspamd.log_findings().items() if v
        }
        return out

    def settings(self) -> dict[str, Any]:
        out = super().settings()
        out.update(
            {
                "rspamd": self.rspamd.version(),
                "milter": f"unix:{self.milter} (Rspamd proxy worker, milter = yes, self_scan, "
                f"{self.rspamd.workers} processes); milter_default_action = tempfail",
                "rspamd_actions": "reject and greylist off: every letter stored; add header "
                "at 6 (X-Spam)",
                "rspamd_network": "off (see anchors.RSPAMD_DISABLED / RSPAMD_PARTLY), DNS to a "
                "sink that answers REFUSED",
                "rspamd_bayes": {
                    "ham": self.rspamd.training.ham,
                    "spam": self.rspamd.training.spam,
                    **self.rspamd.training.bayes,
                    "active": self.rspamd.training.bayes_active,
                },
                "rspamd_hyperscan_loaded": self.rspamd.hyperscan,
            }
        )
        return out

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.own_rspamd:
                self.rspamd.keep_dir = self.rspamd.keep_dir or self._failed
                self.rspamd.close()


def _alive(pid: int) -> bool:
    st = _stat(pid)
    if st is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _banner(port: int, hello: bytes) -> bool:
    """True when an SMTP/LMTP server on ``port`` greets with 220 and answers ``hello`` with
    250; then QUIT."""
    with socket.create_connection((LOOPBACK, port), timeout=2) as s:
        f = s.makefile("rb")
        if not f.readline().startswith(b"220"):
            return False
        s.sendall(hello + b" anchor.pochta.invalid\r\n")
        while line := f.readline():
            if line[:4] == b"250 ":
                break
            if not line.startswith(b"250-"):
                return False
        else:
            return False
        s.sendall(b"QUIT\r\n")
        f.readline()
        return True
