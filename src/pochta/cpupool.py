"""The CPU pool: pool processes for CPU-bound work, with a hard deadline per task.

Why: Python's ``re`` holds the GIL, so scoring a crafted letter in a thread of the server
stalled every client (a normal letter took 17.9 s, ``/healthz`` 27 s). Such work runs here
instead, in ``processes`` worker processes (``cores()`` is one per usable core), never on
the event loop nor under the server's GIL. The task's own code should stop at a soft budget;
``deadline`` is the last line of defence: a task still running then has its worker killed
(SIGKILL) and replaced, its caller gets ``CpuPoolTimeout`` at once, and the other workers'
tasks go on untouched.

Errors (``pochta.errors``): ``CpuPoolTimeout`` (deadline passed, worker killed),
``CpuPoolProcessDied`` (the worker exited under the task: a crash, ``os._exit``, the OOM killer),
``CpuPoolUnavailable`` (not started or closed, no worker could be started, or
``max_pending`` tasks already wait: refused at once, so memory stays bounded whatever
clients send). An exception that ``fn`` raises reaches the caller as itself, with the
worker's traceback as its ``__cause__`` (a ``RemoteTraceback``), as in ``concurrent.futures``;
one that does not survive pickling arrives as a ``RuntimeError`` that names it.

The deadline counts from the moment a worker takes the task; the wait for a worker is
bounded by ``max_pending`` instead. It includes importing ``fn``'s module the first time a
worker meets it, so the initializer should import what the tasks need. Cancelling ``arun``
(the client went away) drops a waiting task; a running one goes on to its end or its
deadline and its result is dropped.

Start method: ``forkserver``. ``fork`` would copy a server that runs threads (uvicorn, the
SQLite writers, the shingles flusher) with their locks held, a deadlock waiting in the
child: Python 3.12 warns about it, and 3.14 made forkserver the default on Linux. The fork
server is a fresh interpreter started by fork+exec; it forks each worker from itself, in
~7 ms plus the worker's imports (spawn: ~40 ms plus imports). ``preload`` names the modules the
fork server imports once, before it forks any worker (see :func:`preload`): a worker then
starts with them, shares their pages with its siblings, and a replacement after a deadline
starts in milliseconds. ``fn``, its arguments, its result and the initializer travel by
pickle: module-level functions and plain data (a function's module is imported by the worker
that unpickles it, so it should be a light one: ``app.py`` is not).

How: one thread in the server per worker owns that worker's own pipe. It takes a task from
the shared queue, sends it, waits with ``poll(deadline)``, and kills and replaces its worker
when the deadline passes or the pipe breaks. Workers share nothing, so killing one at any
moment cannot wedge another. Against the alternatives (``benchmarks/worker_pool.py``):

- ``concurrent.futures.ProcessPoolExecutor`` cannot stop one task: killing a worker breaks
  the pool (``BrokenProcessPool`` for every task in it).
- ``pebble.ProcessPool`` (maintained, one author, LGPL) kills and replaces a worker whose
  task timed out, but its workers share one pipe behind one lock, and it stops a worker
  while holding that lock: SIGTERM, up to 3 s of grace, then SIGKILL. A task that does not
  return to the interpreter (C code; here one that ignores SIGTERM) with a 1 s timeout told
  its caller after 4.1 s and stalled the other worker's tasks for 3.0 s. Its open issue
  #153, a task handed to a worker just being stopped and never answered, we reproduced
  with 5.2.3: a 1-worker pool, a task timing out with another queued behind it, 393 rounds.

The cost per task hardly matters beside scoring (~17 ms of CPU per letter), but it is lower
too. Medians of 5 rounds taken in turns, 2 workers, forkserver, Python 3.11, the 2-core VM
shared with other test suites (load average 5.6 to 11):

                                              pochta        stdlib        pebble 5.2.3
    round trip of ``noop``, median / p99      90 / 239 us   192 / 1127    187 / 2472
    5 KB in, 10 KB out, 2 asyncio callers     7,353 /s      2,357 /s      3,121 /s
    the same, 4 asyncio callers               7,032 /s      4,652 /s      3,675 /s
    the same, 2 / 4 threads                   7,061 / 8,536 4,524 / 3,195 4,008 / 4,364
    stubborn task, 1 s deadline: caller told  1.0 s         (cannot)      4.1 s
    meanwhile the other worker's worst task   7 ms          -             3.0 s

Use in ``app.py`` (one place wires)::

    pool = CpuPool(settings.antispam.processes, initializer=scorer.init_pool_process,
                   initargs=(rules_file, model_dir))   # starts nothing
    pool.start()   # lifespan startup: the processes start; each runs the initializer once
    ...
    pool.close()   # lifespan shutdown, once the listeners have stopped

and in the SMTP handler's ``handle_DATA``, which only translates::

    try:
        verdict = await pool.arun(scorer.score, raw, envelope, deadline=5.0)
    except CpuPoolError:   # overran, crashed or overloaded: 451, or deliver unscored
        ...
"""

from __future__ import annotations

import asyncio
import collections
import gc
import logging
import multiprocessing
import os
import pickle
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, Final, TypeVar, TypeVarTuple

from pochta import logs, metrics
from pochta.errors import CpuPoolProcessDied, CpuPoolTimeout, CpuPoolUnavailable

log = logging.getLogger("pochta.cpupool")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

START_METHOD: Final = "forkserver"
START_TIMEOUT = 60.0  # seconds a new worker may take for its imports and its initializer
STOP_GRACE = 2.0  # seconds an idle worker gets to exit once its pipe is closed

_READY, _FAILED, _OK, _RAISED = "ready", "failed", "ok", "raised"


def cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class RemoteTraceback(Exception):
    """The worker's traceback, attached as ``__cause__`` to an exception a task raised."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Counters since ``start()``, cheap to read (for metrics)."""

    processes: int  # workers the pool keeps
    pending: int  # tasks waiting for a worker now
    running: int  # tasks on a worker now
    completed: int  # tasks that returned or raised
    killed: int  # tasks that overran their deadline: their worker was killed
    died: int  # tasks whose worker exited under them
    rejected: int  # tasks refused because max_pending tasks were waiting
    restarts: int  # worker processes started to replace one that was killed or died


@dataclass(eq=False, slots=True)
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    deadline: float | None
    future: Future[Any]
    ids: dict[str, Any]  # the log ids bound by the caller (``pochta.logs``), bound in the worker


@dataclass(eq=False, slots=True)
class _PoolProcess:
    process: BaseProcess
    conn: Connection
    generation: int = 0  # the pool's initargs it was started with (``reinitialize``)

    def kill(self) -> None:
        self.process.kill()
        self.process.join(STOP_GRACE)
        self.conn.close()
        self._gone()

    def stop(self) -> None:
        """Close the pipe: an idle worker reads EOF and exits; one that does not is killed."""
        self.conn.close()
        self.process.join(STOP_GRACE)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join(STOP_GRACE)
        self._gone()

    def _gone(self) -> None:
        """A worker that records metrics (its shingle counters' buffer) stops counting."""
        if self.process.pid is not None and self.process.exitcode is not None:
            metrics.process_exited(self.process.pid)


class CpuPool:
    """``processes`` worker processes that run module-level functions; see the module doc."""

    def __init__(
        self,
        processes: int,
        *,
        initializer: Callable[..., object] | None = None,
        initargs: tuple[object, ...] = (),
        max_pending: int = 100,
        name: str = "pochta-worker",
        finalizer: Callable[[], object] | None = None,
        preload: Sequence[str] = (),
    ) -> None:
        if processes < 1:
            raise ValueError("a worker pool needs at least one process")
        if max_pending < 0:
            raise ValueError("max_pending must be 0 or more")
        self.processes = processes
        self.max_pending = max_pending
        self.name = name
        self._initializer = initializer
        self._initargs = initargs
        self._finalizer = finalizer  # run by a worker whose pipe closed, before it exits
        self._preload = tuple(preload)  # modules the fork server imports once for every worker
        self._ctx = multiprocessing.get_context(START_METHOD)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: collections.deque[_Job] = collections.deque()
        self._urgent: collections.deque[_Job] = collections.deque()  # served before _queue
        self._workers: list[_PoolProcess | None] = [None] * processes
        self._idle: set[int] = set()  # slots waiting for a task (their worker may be stopped)
        self._threads: list[threading.Thread] = []
        self._started = self._closed = False
        self._counts = collections.Counter[str]()
        self._generation = 0  # grows with every ``reinitialize``

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers and run the initializer in each; raises ``CpuPoolUnavailable``
        (with the worker's traceback) if one fails. A second call does nothing."""
        with self._lock:
            if self._closed:
                raise CpuPoolUnavailable("the worker pool is closed")
            if self._started:
                return
            self._started = True
        if self._preload:
            preload(self._preload)
        workers: list[_PoolProcess] = []
        try:
            for i in range(self.processes):  # all start at once, then each is awaited
                workers.append(self._launch(i))
            for worker in workers:
                self._await_ready(worker)
        except BaseException:
            for worker in workers:
                worker.kill()
            with self._lock:
                self._closed = True
                self._workers = [None] * self.processes
            raise
        with self._lock:
            self._idle.update(range(self.processes))  # each thread's first _take() adds it too
        for i in range(self.processes):
            thread = threading.Thread(target=self._serve, args=(i,), name=f"{self.name}-{i}")
            thread.daemon = True  # a pool never closed must not keep the interpreter alive
            self._threads.append(thread)
            thread.start()

    def reinitialize(self, initargs: tuple[object, ...]) -> None:
        """Workers started from now on run the initializer with ``initargs``; each running
        one is replaced by such a worker after its task, each idle one before its next task
        (a new model's token table reaches every worker process this way)."""
        with self._lock:
            self._initargs = initargs
            self._generation += 1

    def _outdated(self, worker: _PoolProcess | None) -> bool:
        with self._lock:
            return worker is not None and worker.generation != self._generation

    def close(self) -> None:
        """Stop the workers. Waiting tasks and tasks still running get ``CpuPoolUnavailable``
        (a running task's worker is killed); idle workers exit cleanly. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting = [*self._urgent, *self._queue]
            self._urgent.clear()
            self._queue.clear()
            busy = [w for i, w in enumerate(self._workers) if w is not None and i not in self._idle]
            self._wake.notify_all()
        for job in waiting:
            _fail(job.future, CpuPoolUnavailable("the worker pool closed"))
        for worker in busy:
            worker.process.kill()  # its thread sees the pipe break and answers the caller
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> CpuPool:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers now (for metrics and operators)."""
        with self._lock:
            return [w.process.pid for w in self._workers if w is not None and w.process.pid]

    @property
    def stats(self) -> PoolStats:
        with self._lock:
            c = self._counts
            return PoolStats(
                processes=self.processes,
                pending=len(self._urgent) + len(self._queue),
                running=c["running"],
                completed=c["completed"],
                killed=c["killed"],
                died=c["died"],
                rejected=c["rejected"],
                restarts=c["started"] - self.processes,
            )

    # -- running tasks ------------------------------------------------------------------

    def run(
        self,
        fn: Callable[[*Ts], T],
        *args: *Ts,
        deadline: float | None = None,
        urgent: bool = False,
    ) -> T:
        """``fn(*args)`` in a worker; blocks the calling thread (threads, the CLI). An
        ``urgent`` task is taken before every task that is not (e.g. a small letter before
        big ones, so that a flood of big letters cannot hold up the small)."""
        future: Future[T] = self._submit(fn, args, deadline, urgent)
        return future.result()

    def submit(
        self,
        fn: Callable[[*Ts], T],
        *args: *Ts,
        deadline: float | None = None,
        urgent: bool = False,
    ) -> Future[T]:
        """``fn(*args)`` in a worker, not waited for (work that needs no answer: the caller
        may add a callback). Raises ``CpuPoolUnavailable`` at once, as ``run``."""
        return self._submit(fn, args, deadline, urgent)

    async def arun(
        self,
        fn: Callable[[*Ts], T],
        *args: *Ts,
        deadline: float | None = None,
        urgent: bool = False,
    ) -> T:
        """``fn(*args)`` in a worker, awaited: the event loop runs on meanwhile."""
        future: Future[T] = self._submit(fn, args, deadline, urgent)
        return await asyncio.wrap_future(future)

    def _submit(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        deadline: float | None,
        urgent: bool = False,
    ) -> Future[Any]:
        if deadline is not None and not deadline > 0:
            raise ValueError("deadline must be a positive number of seconds")
        job = _Job(fn, args, deadline, Future(), logs.context())
        with self._lock:
            if self._closed or not self._started:
                raise CpuPoolUnavailable("the worker pool is not running")
            waiting = len(self._urgent) + len(self._queue)
            if waiting >= self.max_pending + len(self._idle):  # idle slots take at once
                self._counts["rejected"] += 1
                raise CpuPoolUnavailable(f"{self.max_pending} tasks already wait for a worker")
            (self._urgent if urgent else self._queue).append(job)
            self._wake.notify()
        job.future.add_done_callback(self._forget)
        return job.future

    def _forget(self, future: Future[Any]) -> None:
        """A caller gave up on a waiting task: it no longer takes a place in the queue."""
        if future.cancelled():
            with self._lock:
                for queue in (self._urgent, self._queue):
                    for job in queue:
                        if job.future is future:
                            queue.remove(job)
                            return

    # -- one thread per worker ------------------------------------------------------------

    def _serve(self, slot: int) -> None:
        """Feed tasks to the worker of ``slot``; replace it when it is killed or dies."""
        try:
            while (job := self._take(slot)) is not None:
                worker = self._workers[slot]
                try:
                    if self._outdated(worker):  # idle since the pool was reinitialized
                        assert worker is not None
                        worker.stop()
                        worker = None
                    if worker is None:  # its replacement failed to start: try again
                        worker = self._replace(slot)
                except CpuPoolUnavailable as exc:
                    self._done(job, exc)
                    continue
                try:
                    healthy = self._execute(worker, job)
                except Exception as exc:  # a bug here must not leave a caller waiting for ever
                    log.exception("worker %s-%d failed", self.name, slot)
                    if not job.future.done():
                        self._done(job, CpuPoolUnavailable(f"the worker pool failed: {exc!r}"))
                    healthy = False
                if not healthy or self._outdated(worker):
                    self._replace_quietly(slot, worker)
        finally:
            last = self._workers[slot]
            if last is not None:
                last.stop()

    def _take(self, slot: int) -> _Job | None:
        """The next task that nobody cancelled, or None once the pool closes."""
        with self._lock:
            self._idle.add(slot)
            while True:
                while not self._urgent and not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return None
                job = (self._urgent or self._queue).popleft()
                if job.future.set_running_or_notify_cancel():
                    self._idle.discard(slot)
                    self._counts["running"] += 1
                    return job

    def _execute(self, worker: _PoolProcess, job: _Job) -> bool:
        """Run one task and answer its caller; False when the worker has to go."""
        what = getattr(job.fn, "__qualname__", repr(job.fn))
        try:
            worker.conn.send((job.fn, job.args, job.ids))
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            self._done(job, exc)  # nothing was written: the worker is fine
            return True
        except OSError:
            self._done(job, self._died(worker, what))
            return False
        if not worker.conn.poll(job.deadline):
            worker.process.kill()
            log.warning("%s ran past its %.3g s deadline: worker killed", what, job.deadline)
            self._done(job, CpuPoolTimeout(f"{what} ran past its {job.deadline:g} s deadline"))
            return False
        try:
            reply = worker.conn.recv()
        except (EOFError, OSError):
            self._done(job, self._died(worker, what))
            return False
        except Exception as exc:  # the answer arrived whole but does not unpickle here
            self._done(job, exc)
            return True
        if reply[0] == _OK:
            self._done(job, None, reply[1])
        else:
            raised, remote = reply[1], reply[2]
            raised.__cause__ = RemoteTraceback(remote)
            self._done(job, raised)
        return True

    def _died(self, worker: _PoolProcess, what: str) -> Exception:
        worker.process.join(STOP_GRACE)
        if self._closed:
            return CpuPoolUnavailable(f"the worker pool closed while {what} ran")
        code = worker.process.exitcode
        log.warning("a worker exited with code %s while it ran %s", code, what)
        return CpuPoolProcessDied(f"the worker running {what} exited with code {code}")

    def _done(self, job: _Job, exc: BaseException | None, result: object = None) -> None:
        with self._lock:
            self._counts["running"] -= 1
            if isinstance(exc, CpuPoolTimeout):
                self._counts["killed"] += 1
            elif isinstance(exc, CpuPoolProcessDied):
                self._counts["died"] += 1
            elif not isinstance(exc, CpuPoolUnavailable):
                self._counts["completed"] += 1
        if exc is None:
            job.future.set_result(result)
        else:
            _fail(job.future, exc)

    # -- worker processes -----------------------------------------------------------------

    def _replace_quietly(self, slot: int, old: _PoolProcess) -> None:
        old.kill()
        with self._lock:
            self._workers[slot] = None
            if self._closed:
                return
        try:
            self._replace(slot)
        except CpuPoolUnavailable as exc:
            if not self._closed:  # the next task on this slot tries again
                log.error("could not replace worker %s-%d: %s", self.name, slot, exc.message)

    def _replace(self, slot: int) -> _PoolProcess:
        worker = self._launch(slot)
        try:
            self._await_ready(worker)
        except BaseException:
            worker.kill()
            with self._lock:
                self._workers[slot] = None
            raise
        return worker

    def _launch(self, slot: int) -> _PoolProcess:
        ours, theirs = self._ctx.Pipe()
        with self._lock:
            initargs, generation = self._initargs, self._generation
        args = (theirs, self._initializer, initargs, logs.snapshot(), self._finalizer)
        process = self._ctx.Process(target=_worker_main, args=args, name=f"{self.name}-{slot}")
        process.daemon = True  # multiprocessing's atexit ends it if close() was never called
        try:
            process.start()  # pickles the initializer and its arguments
        except Exception as exc:
            ours.close()
            raise CpuPoolUnavailable(f"cannot start a worker process: {exc}") from exc
        finally:
            theirs.close()
        worker = _PoolProcess(process, ours, generation)
        with self._lock:
            self._workers[slot] = worker
            self._counts["started"] += 1
            if not self._closed:
                return worker
        worker.kill()
        raise CpuPoolUnavailable("the worker pool closed")

    def _await_ready(self, worker: _PoolProcess) -> None:
        if not worker.conn.poll(START_TIMEOUT):
            raise CpuPoolUnavailable(f"a worker did not start within {START_TIMEOUT:g} s")
        try:
            status, detail = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(STOP_GRACE)
            code = worker.process.exitcode
            raise CpuPoolUnavailable(f"a worker exited with code {code} while starting") from None
        if status != _READY:
            raise CpuPoolUnavailable(f"a worker's initializer failed:\n{detail}")


def preload(modules: Sequence[str]) -> None:
    """The fork server imports ``modules`` once, when it starts, and every worker forked from
    it has them already: a worker then starts in milliseconds and shares those pages with its
    siblings, instead of importing them itself (seconds of CPU each, and their memory each).
    The fork server is one per process and starts with the first worker of any pool: modules
    asked after that are imported by each worker as before. A module that fails to import is
    skipped there (``multiprocessing`` ignores it) and imported, or fails, in the worker."""
    with _preload_lock:
        wanted = [*_preloaded, *(m for m in modules if m not in _preloaded)]
        _preloaded[:] = wanted
        multiprocessing.get_context(START_METHOD).set_forkserver_preload(wanted)


_preload_lock = threading.Lock()
_preloaded: list[str] = ["__main__"]  # multiprocessing's own default


def freeze() -> None:
    """What this process holds now is left out of the cyclic garbage collector's walks from
    now on (``gc.freeze``, after one collection of what is garbage already). A worker's
    modules, tables, model and stores live as long as the worker: yet each full collection
    walked them all (~79,000 objects in a letter worker, 52-68 ms of CPU at load 18; one
    within a new worker's first few hundred letters, then as the letters' leftovers pile
    up) and, in a worker forked from the fork server, wrote to each one's page, copying the
    pages it shares with its siblings. Every worker calls it once its initializer has run
    (:func:`_worker_main`): what it inherited from the fork server it froze already, first
    thing, without a walk (``gc.freeze`` alone moves the collector's lists whole), so this
    collection walks only what the worker built itself. An object frozen is still freed when
    its last reference goes; only a cycle of frozen objects that becomes garbage stays (a
    worker's are rebuilt only by a new worker: ``reinitialize``, a model switch). Called
    by a worker's own start only, never on import: it changes the whole process."""
    gc.collect()
    gc.freeze()


def _fail(future: Future[Any], exc: BaseException) -> None:
    if not future.done():  # a waiting task may have been cancelled meanwhile
        future.set_exception(exc)


def _worker_main(
    conn: Connection,
    initializer: Callable[..., object] | None,
    initargs: tuple[object, ...],
    log: logs.Snapshot | None = None,
    finalizer: Callable[[], object] | None = None,
) -> None:
    """A worker's whole life: the initializer once, then tasks until the pipe closes, then
    the finalizer (a worker killed never runs it). It logs as the server does (``log``), each
    task's lines with the ids its caller had bound."""
    gc.freeze()  # what the fork server loaded (inherited: shared pages): never walked here
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the server to handle
    logs.restore(log)
    if initializer is not None:
        try:
            initializer(*initargs)
        except BaseException:
            conn.send((_FAILED, traceback.format_exc()))
            return
    freeze()  # what the initializer built lives as long as this worker
    conn.send((_READY, os.getpid()))
    try:
        _serve_tasks(conn)
    finally:
        if finalizer is not None:
            try:
                finalizer()
            except Exception:
                logging.getLogger("pochta.cpupool").exception("a worker's finalizer failed")


def _serve_tasks(conn: Connection) -> None:
    while True:
        reply: tuple[object, ...]
        try:
            fn, args, ids = conn.recv()
        except (EOFError, OSError):
            return  # the pool closed our pipe, or the server is gone
        except BaseException as exc:  # fn's module would not import here
            reply = _raised(exc)
        else:
            try:
                with logs.bound(**ids):
                    reply = (_OK, fn(*args))
            except BaseException as exc:
                reply = _raised(exc)
        try:
            conn.send(reply)
        except OSError:
            return  # the server is gone
        except Exception as exc:  # the result would not pickle; nothing was written
            conn.send(_raised(exc))


def _raised(exc: BaseException) -> tuple[object, ...]:
    """The answer for an exception, made sure to cross the pipe and unpickle on the far side."""
    remote = "".join(traceback.format_exception(exc))
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 (our own bytes)
    except Exception:
        exc = RuntimeError(f"{type(exc).__qualname__} (not picklable): {exc}")
    return (_RAISED, exc, remote)
