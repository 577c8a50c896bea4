"""What pochta counts for Prometheus, recorded where the work is done (the service layer).

Every metric is made here, on first use, and recorded through the small functions below
(``delivery``, ``verdict``, ``stored``, ``blob_op``, ...): the code that does the work calls
one function, and this file is the one list of names, labels and buckets. ``/metrics``
(:mod:`pochta.server.api.metrics`) adds what is read when scraped (pairs, disks, Valkyrie's
totals).

**Several processes.** ``pochta serve`` records in its own process (the worker processes of
:mod:`pochta.cpupool` only compute; their results, timings included, come back to the server,
which records them), and there may be several servers behind one port (``pochta serve
--processes N``). So the server uses prometheus-client's multiprocess mode: ``use_directory``
(called by ``pochta serve`` before the first metric exists, and before it starts any other
process) points ``PROMETHEUS_MULTIPROC_DIR`` at ``<data_dir>/metrics/<pid>``, where every
process of that server writes its values to small memory-mapped files; a scrape of any of
them sums the files (``MultiProcessCollector``). A directory left by a server that is gone is
removed at the next start. Gauges that are per process are summed over the live processes
(``livesum``); a process that exits is forgotten with ``process_exited(pid)``. Without the
variable (tests, CLI commands) the values live in the process, as prometheus-client does by
default.

prometheus-client decides its mode when it is first imported, so this module imports it only
inside functions: nothing imports it before ``use_directory`` has run (a test keeps it so).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge, Histogram

ENV = "PROMETHEUS_MULTIPROC_DIR"
P = ParamSpec("P")
R = TypeVar("R")

LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Histogram buckets of every latency, seconds."""


def use_directory(data_dir: Path) -> Path:
    """Record in multiprocess mode, in ``<data_dir>/metrics/<this pid>`` (made empty); the
    processes this one starts afterwards inherit it. Directories of servers no longer running
    are removed. RuntimeError when prometheus-client was imported already (it would then stay
    in single-process mode and the figures of sibling processes would be missing)."""
    if "prometheus_client" in sys.modules and os.environ.get(ENV) is None:
        raise RuntimeError("prometheus_client was imported before metrics.use_directory()")
    root = data_dir.resolve() / "metrics"
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if old.is_dir() and (not old.name.isdigit() or not _alive(int(old.name))):
            shutil.rmtree(old, ignore_errors=True)
    path = root / str(os.getpid())
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    os.environ[ENV] = str(path)
    return path


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # ours from an earlier run in this process: start afresh
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def multiprocess() -> bool:
    return bool(os.environ.get(ENV))


def process_exited(pid: int) -> None:
    """A process of this server exited: its per-process gauges stop counting."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(pid)  # type: ignore[no-untyped-call]


class _Metrics:
    """Every metric pochta records (made once per process, on first use)."""

    def __init__(self) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.deliveries: Counter = Counter(
            "pochta_deliveries_total",
            "Letters answered at the end of DATA, by protocol, result (delivered, deferred,"
            " refused) and SMTP reply code",
            ["protocol", "result", "code"],
        )
        self.verdicts: Counter = Counter(
            "pochta_verdicts_total",
            "Verdicts given (deliveries and the scan API), by label; partial=yes when the"
            " time budget cut the analysis short",
            ["label", "partial"],
        )
        self.scan_seconds: Histogram = Histogram(
            "pochta_scan_seconds",
            "Time to score one letter: analysis CPU in the worker + the decision in the server",
            buckets=LATENCY,
        )
        self.letters: Counter = Counter(
            "pochta_letters_stored_total", "Letters stored (one per recipient)"
        )
        self.letter_bytes: Counter = Counter(
            "pochta_letter_bytes_total", "Bytes of the letters stored, as delivered (per copy)"
        )
        self.stored_bytes: Counter = Counter(
            "pochta_stored_bytes_total",
            "Bytes the deliveries added physically (skeletons and newly uploaded attachments)",
        )
        self.saved_bytes: Counter = Counter(
            "pochta_dedup_saved_bytes_total",
            "Attachment bytes not stored again thanks to deduplication (each reference to a"
            " file already stored, or stored once for several recipients, counts its size)",
        )
        self.attachments: Counter = Counter(
            "pochta_attachments_total",
            "Attachment references counted by deliveries: uploaded (first copy) or"
            " deduplicated (already stored)",
            ["outcome"],
        )
        self.blob_ops: Counter = Counter(
            "pochta_blob_operations_total",
            "Blob store operations, by operation and result (ok or the error code)",
            ["op", "result"],
        )
        self.blob_seconds: Histogram = Histogram(
            "pochta_blob_operation_seconds",
            "Blob store operation latency",
            ["op"],
            buckets=LATENCY,
        )
        self.buffer_cells: Gauge = Gauge(
            "pochta_shingle_buffer_cells",
            "Shingle counter increments waiting in the write buffer (sampled every flush tick)",
            multiprocess_mode="livesum",
        )
        self.buffer_capacity: Gauge = Gauge(
            "pochta_shingle_buffer_capacity_cells",
            "shingles.max_cells: past it, writers wait (back-pressure)",
            multiprocess_mode="livesum",
        )
        self.flush_seconds: Histogram = Histogram(
            "pochta_shingle_flush_seconds",
            "Time to write one batch of shingle counters to the store",
            buckets=LATENCY,
        )
        self.flush_cells: Counter = Counter(
            "pochta_shingle_flushed_cells_total",
            "Counter cells written to the store, by result (ok, failed: put back and retried)",
            ["result"],
        )
        self.backpressure: Counter = Counter(
            "pochta_shingle_backpressure_total",
            "Updates that found the buffer full: waited (then went in) or dropped",
            ["outcome"],
        )
        self.lock_wait: Histogram = Histogram(
            "pochta_lock_wait_seconds",
            "Time spent waiting for a held lock, by lock kind (the name before ':')",
            ["lock"],
            buckets=LATENCY,
        )
        self.lock_timeouts: Counter = Counter(
            "pochta_lock_timeouts_total", "Lock acquisitions that gave up waiting", ["lock"]
        )
        self.leases_lost: Counter = Counter(
            "pochta_lock_leases_lost_total",
            "Leases found lost by their holder (expired, taken, or the backend unreachable)",
            ["lock"],
        )
        self.rate_limited: Counter = Counter(
            "pochta_rate_limit_refusals_total", "Requests refused by a rate limit", ["limit"]
        )
        self.unscored: Counter = Counter(
            "pochta_letters_unscored_total",
            "Letters that could not be scored: the worker passed antispam.deadline_seconds"
            " (timeout) or died; action is what antispam.on_timeout made of them (inbox, spam,"
            " defer)",
            ["reason", "action"],
        )
        self.connections_refused: Counter = Counter(
            "pochta_connections_refused_total",
            "Connections refused by a connection limit, by protocol and limit (per_ip,"
            " rate_per_ip, per_network, rate_per_network, total, rate_total)",
            ["protocol", "limit"],
        )
        self.connections_untracked: Counter = Counter(
            "pochta_connections_untracked_total",
            "Connections let in without some of their counts: the connection table had no"
            " room for their address or network",
            ["protocol"],
        )
        self.mail_refused: Counter = Counter(
            "pochta_mail_refused_total",
            "MAIL FROM commands refused before any letter, by reason (disk_reserve: the spool's"
            " file system is below its reserve; queue_full: the incoming queue is at its limits)",
            ["reason"],
        )
        self.queue_tries: Counter = Counter(
            "pochta_queue_tries_total",
            "Tries of the incoming queue's letters (smtp.answer = queued), by outcome (done,"
            " drop, hold, retry)",
            ["outcome"],
        )
        self.queue_letters: Gauge = Gauge(
            "pochta_queue_letters",
            "Letters waiting in the incoming queue's slots of the live server processes"
            " (smtp.answer = queued), held ones left out; smtp.queue_max_letters is each"
            " process's limit",
            multiprocess_mode="livesum",
        )
        self.queue_bytes: Gauge = Gauge(
            "pochta_queue_bytes",
            "Bytes of the letters counted by pochta_queue_letters (limit: smtp.queue_max_bytes)",
            multiprocess_mode="livesum",
        )
        self.queue_oldest: Gauge = Gauge(
            "pochta_queue_oldest_seconds",
            "Age of the oldest letter waiting in the incoming queue (held ones left out; 0:"
            " none), the largest over the live server processes; read at each /healthz check",
            multiprocess_mode="livemax",
        )
        self.login_failures: Counter = Counter(
            "pochta_login_failures_total",
            "Failed logins, by reason (invalid_credentials, password_reset_required, rate_limited)",
            ["reason"],
        )
        self.dns_questions: Counter = Counter(
            "pochta_dns_questions_total",
            "DNS questions of sender authentication, by what became of them: answered (records"
            " or none, from the server or its cache), failed (SERVFAIL, REFUSED...), timed_out,"
            " shared (joined the same question in flight), abandoned (every letter waiting gave"
            " up), server_down (at once: the server is not answering), queue_full (at once:"
            " too many wait)",
            ["result"],
        )
        self.dns_cache_hits: Counter = Counter(
            "pochta_dns_cache_hits_total",
            "DNS questions answered from the cache (antispam.dns_cache_size), not the server",
        )
        self.dns_server_down: Gauge = Gauge(
            "pochta_dns_server_down",
            "1 while the DNS server is held for down (its breaker is open: no reply to three"
            " questions nor to a probe), every check temperror at once; 0 while it answers",
            multiprocess_mode="livemax",
        )
        self.dns_server_downs: Counter = Counter(
            "pochta_dns_server_outages_total",
            "Times the DNS server was found not answering (its breaker opened)",
        )


_lock = threading.Lock()
_made: _Metrics | None = None


def m() -> _Metrics:
    """The metrics of this process (made on first use)."""
    global _made
    if _made is None:
        with _lock:
            if _made is None:
                _made = _Metrics()
    return _made


# -- recording ------------------------------------------------------------------------------
def delivery(protocol: str, reply: str) -> None:
    """The reply to a letter's DATA (LMTP: the first recipient's line)."""
    code = reply[:3]
    result = {"2": "delivered", "4": "deferred"}.get(code[:1], "refused")
    m().deliveries.labels(protocol, result, code).inc()


def unscored(reason: str, action: str) -> None:
    m().unscored.labels(reason, action).inc()


def verdict(label: str, partial: bool, seconds: float) -> None:
    metrics = m()
    metrics.verdicts.labels(label, "yes" if partial else "no").inc()
    metrics.scan_seconds.observe(seconds)


def stored(
    letters: int, size: int, stored_bytes: int, attachments: int, uploaded: int, saved: int
) -> None:
    """One delivery: ``letters`` copies of ``size`` bytes, ``stored_bytes`` added physically;
    ``attachments`` references per copy, ``uploaded`` of them stored for the first time;
    ``saved``: the attachment bytes of the references that were not uploaded."""
    metrics = m()
    metrics.letters.inc(letters)
    metrics.letter_bytes.inc(size * letters)
    metrics.stored_bytes.inc(stored_bytes)
    if saved:
        metrics.saved_bytes.inc(saved)
    if uploaded:
        metrics.attachments.labels("uploaded").inc(uploaded)
    if attachments * letters > uploaded:
        metrics.attachments.labels("deduplicated").inc(attachments * letters - uploaded)


def blob_op(op: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: count each call of a blob store operation by result, and time it."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            started = time.perf_counter()
            result = "ok"
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                result = getattr(exc, "code", "error")
                raise
            finally:
                metrics = m()
                metrics.blob_ops.labels(op, result).inc()
                metrics.blob_seconds.labels(op).observe(time.perf_counter() - started)

        return wrapper

    return decorate


def shingle_buffer(cells: int, capacity: int) -> None:
    metrics = m()
    metrics.buffer_cells.set(cells)
    metrics.buffer_capacity.set(capacity)


def shingle_flush(seconds: float, ok_cells: int, failed_cells: int) -> None:
    metrics = m()
    metrics.flush_seconds.observe(seconds)
    if ok_cells:
        metrics.flush_cells.labels("ok").inc(ok_cells)
    if failed_cells:
        metrics.flush_cells.labels("failed").inc(failed_cells)


def shingle_backpressure(outcome: str) -> None:
    m().backpressure.labels(outcome).inc()


def _kind(name: str) -> str:
    return name.split(":", 1)[0][:40]


def lock_waited(name: str, seconds: float, acquired: bool) -> None:
    metrics = m()
    metrics.lock_wait.labels(_kind(name)).observe(seconds)
    if not acquired:
        metrics.lock_timeouts.labels(_kind(name)).inc()


def lease_lost(name: str) -> None:
    m().leases_lost.labels(_kind(name)).inc()


def rate_limited(limit: str) -> None:
    m().rate_limited.labels(limit).inc()


def connection_refused(protocol: str, limit: str) -> None:
    m().connections_refused.labels(protocol, limit).inc()


def connection_untracked(protocol: str) -> None:
    m().connections_untracked.labels(protocol).inc()


def queued(outcome: str) -> None:
    m().queue_tries.labels(outcome).inc()


def queue_oldest(seconds: float) -> None:
    m().queue_oldest.set(seconds)


def queue_depth(letters: int, size: int) -> None:
    metrics = m()
    metrics.queue_letters.set(letters)
    metrics.queue_bytes.set(size)


def mail_refused(reason: str) -> None:
    m().mail_refused.labels(reason).inc()


def login_failed(reason: str) -> None:
    m().login_failures.labels(reason).inc()


def dns_question(result: str) -> None:
    m().dns_questions.labels(result).inc()


def dns_cache_hit() -> None:
    m().dns_cache_hits.inc()


def dns_server(*, down: bool, went_down: bool) -> None:
    """The breaker's state after a probe of the DNS server."""
    metrics = m()
    metrics.dns_server_down.set(1 if down else 0)
    if went_down:
        metrics.dns_server_downs.inc()


@contextlib.contextmanager
def timer() -> Iterator[Callable[[], float]]:
    """``with timer() as elapsed: ...; elapsed()`` in seconds."""
    started = time.perf_counter()
    yield lambda: time.perf_counter() - started


# -- exposition -----------------------------------------------------------------------------
def exposition(*collectors: Any) -> tuple[bytes, str]:
    """The text a scrape gets and its content type: every process of this server (multiprocess
    mode) or this process, then ``collectors`` (read at scrape time)."""
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        REGISTRY,
        CollectorRegistry,
        generate_latest,
    )
    from prometheus_client import multiprocess as mp

    m()  # every family is listed, at 0, from the first scrape
    if multiprocess():
        registry = CollectorRegistry()
        mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    extra = CollectorRegistry()
    for collector in collectors:
        extra.register(collector)
    return text + generate_latest(extra), CONTENT_TYPE_LATEST
