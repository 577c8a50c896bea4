"""Blocking calls of the SMTP edge run on pools of their own (pochta.executors, issue 27): a
stalled mailbox index holds the recipient lookups, not the event loop's default pool (six
threads on two cores) that the rest of the process shares."""

from __future__ import annotations

import asyncio
import contextvars
import smtplib
import threading
import time
from pathlib import Path

import pytest

from pochta.config import SmtpSettings
from pochta.executors import Executors, HandOff, run_in
from pochta.server import smtp
from pochta.types import User


class StalledIndex:
    """A mailbox whose index does not answer until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = 0

    def user(self, email: str) -> User | None:
        self.waiting += 1
        self.release.wait(30)
        return None


def _rcpt(port: int, codes: list[int]) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
        client.ehlo()
        client.mail("a@example.net")
        codes.append(client.rcpt("b@example.org")[0])


def test_stalled_recipient_lookups_leave_the_default_pool_free(tmp_path: Path) -> None:
    index = StalledIndex()
    executors = Executors.start(lookups=4, deliveries=2)

    async def go() -> float:
        settings = SmtpSettings(host="127.0.0.1", port=0, lmtp_port=0, hostname="mx.test")
        servers = await smtp.start(
            index,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            settings,
            tmp_path / "spool",
            executors=executors,
        )
        port = servers[0].sockets[0].getsockname()[1]
        codes: list[int] = []
        clients = [threading.Thread(target=_rcpt, args=(port, codes)) for _ in range(10)]
        for c in clients:
            c.start()
        while index.waiting < 4:  # the lookup pool is full; six lookups wait behind
            await asyncio.sleep(0.01)
        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.to_thread(lambda: None), 5)  # anyone else's thread work
        took = time.monotonic() - t0
        index.release.set()
        await asyncio.gather(*(asyncio.to_thread(c.join, 30) for c in clients))
        for server in servers:
            server.close()
        assert codes == [550] * 10  # the lookups went on once the index answered
        return took

    try:
        assert asyncio.run(go()) < 1.0
    finally:
        index.release.set()
        executors.close()


def test_run_in_carries_the_callers_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="-")
    executors = Executors.start(lookups=1, deliveries=1)

    async def go() -> str:
        var.set("queue 1")
        return await run_in(executors.local, var.get)

    try:
        assert asyncio.run(go()) == "queue 1"
    finally:
        executors.close()


def _names(prefix: str) -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(prefix)}


def test_handoff_answers_raises_and_carries_the_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="-")
    pool = HandOff(2, thread_name_prefix="t-answers")

    def fail() -> None:
        raise KeyError("k")

    async def go() -> tuple[str, int]:
        var.set("upload 7")
        got = await run_in(pool, var.get)
        with pytest.raises(KeyError):
            await run_in(pool, fail)
        return got, await run_in(pool, pow, 2, 10)

    try:
        assert asyncio.run(go()) == ("upload 7", 1024)
        # one call at a time: the thread that ended its call took the next one
        assert _names("t-answers") == {"t-answers_0"}
    finally:
        pool.shutdown()
    assert _names("t-answers") == set()


def test_handoff_runs_at_most_max_workers_and_queues_the_rest() -> None:
    pool = HandOff(2, thread_name_prefix="t-bound")
    release = threading.Event()
    running: list[int] = []
    peak = [0]
    lock = threading.Lock()

    def held(i: int) -> int:
        with lock:
            running.append(i)
            peak[0] = max(peak[0], len(running))
        release.wait(10)
        with lock:
            running.remove(i)
        return i

    async def go() -> list[int]:
        calls = [asyncio.ensure_future(pool.call(held, i)) for i in range(5)]
        while len(running) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert len(running) == 2  # three wait in the queue
        release.set()
        return list(await asyncio.gather(*calls))

    try:
        assert asyncio.run(go()) == [0, 1, 2, 3, 4]
        assert peak[0] == 2
        assert _names("t-bound") == {"t-bound_0", "t-bound_1"}
    finally:
        pool.shutdown()


def test_handoff_skips_a_call_cancelled_while_waiting_and_shutdown_cancels_the_queue() -> None:
    pool = HandOff(1, thread_name_prefix="t-cancel")
    release = threading.Event()
    ran: list[str] = []

    def job(name: str) -> str:
        ran.append(name)
        if name == "first":
            release.wait(10)
        return name

    async def go() -> None:
        first = asyncio.ensure_future(pool.call(job, "first"))
        while not ran:
            await asyncio.sleep(0.01)
        cancelled = asyncio.ensure_future(pool.call(job, "cancelled"))
        dropped = asyncio.ensure_future(pool.call(job, "dropped"))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        await asyncio.sleep(0.05)
        release.set()
        assert await first == "first"
        assert await dropped == "dropped"
        # the next ones wait behind a held call when the pool is shut down
        release.clear()
        held = asyncio.ensure_future(pool.call(job, "first"))
        while ran.count("first") < 2:
            await asyncio.sleep(0.01)
        waiting = asyncio.ensure_future(pool.call(job, "never"))
        await asyncio.sleep(0.05)
        pool.shutdown(wait=False, cancel_futures=True)
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        assert await held == "first"  # the running call ended
        with pytest.raises(RuntimeError):
            await pool.call(job, "after")

    asyncio.run(go())
    assert ran == ["first", "dropped", "first"]


def test_handoff_as_an_executor() -> None:
    with HandOff(2, thread_name_prefix="t-submit") as pool:
        assert pool.submit(divmod, 7, 2).result(5) == (3, 1)
        assert pool.submit(int, "ff", base=16).result(5) == 255
        with pytest.raises(ZeroDivisionError):
            pool.submit(divmod, 1, 0).result(5)
        assert list(pool.map(abs, [-1, -2])) == [1, 2]
    assert _names("t-submit") == set()


def test_handoff_a_done_callback_may_wait_on_the_pool() -> None:
    # a concurrent future's callbacks run in the thread that ran its call: that thread is not
    # free until they return, so a call they wait on gets a thread of its own (as with
    # ThreadPoolExecutor) instead of waiting for the thread that waits for it
    pool = HandOff(2, thread_name_prefix="t-callback")
    got: list[str] = []

    def callback(_: object) -> None:
        try:
            got.append(pool.submit(str, "inner").result(5))
        except BaseException as exc:  # reported by the assertion below
            got.append(repr(exc))

    try:
        go = threading.Event()
        outer = pool.submit(go.wait, 5)
        outer.add_done_callback(callback)  # before the call ends: run by the pool's thread
        go.set()
        assert outer.result(5) is True
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == ["inner"]
    finally:
        pool.shutdown(wait=False)


def test_handoff_a_thread_that_could_not_start_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = threading.Thread.start
    refused: list[str] = []

    def start_once_refused(thread: threading.Thread) -> None:
        if thread.name.startswith("t-start") and not refused:
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_once_refused)
    pool = HandOff(1, thread_name_prefix="t-start")

    async def go() -> int:
        with pytest.raises(RuntimeError, match="can't start"):
            await pool.call(abs, -1)
        return await asyncio.wait_for(pool.call(abs, -2), 5)

    try:
        assert asyncio.run(go()) == 2  # the next call started the pool's one thread
    finally:
        pool.shutdown()  # joins the thread that ran, no other
    assert refused and _names("t-start") == set()


def test_handoff_passes_on_any_base_exception_and_its_thread_goes_on() -> None:
    class Stop(BaseException):
        pass

    def stop() -> None:
        raise Stop

    pool = HandOff(1, thread_name_prefix="t-base")

    async def go() -> int:
        with pytest.raises(Stop):
            await asyncio.wait_for(pool.call(stop), 5)
        # StopIteration cannot be set on an asyncio future: a RuntimeError, not a hang
        with pytest.raises(RuntimeError) as raised:
            await asyncio.wait_for(pool.call(next, iter(())), 5)
        assert isinstance(raised.value.__cause__, StopIteration)
        return await asyncio.wait_for(pool.call(abs, -3), 5)

    try:
        assert asyncio.run(go()) == 3
        with pytest.raises(Stop):
            pool.submit(stop).result(5)
        assert _names("t-base") == {"t-base_0"}
    finally:
        pool.shutdown()


def test_handoff_caller_cancelled_while_its_call_runs_and_loop_closed_before_answer() -> None:
    pool = HandOff(1, thread_name_prefix="t-gone")
    started, release = threading.Event(), threading.Event()
    ended: list[str] = []
    loop_errors: list[dict[str, object]] = []
    orphans: list[asyncio.Future[str]] = []

    def held(name: str) -> str:
        started.set()
        release.wait(10)
        ended.append(name)
        return name

    async def cancel_while_running() -> str:
        asyncio.get_running_loop().set_exception_handler(lambda _, c: loop_errors.append(c))
        task = asyncio.ensure_future(pool.call(held, "cancelled"))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()  # the call ends; its answer finds the future cancelled
        return await asyncio.wait_for(pool.call(str, "next"), 5)

    async def leave_while_running() -> None:
        orphans.append(asyncio.ensure_future(pool.call(held, "orphan")))
        while not started.is_set():
            await asyncio.sleep(0.01)

    try:
        assert asyncio.run(cancel_while_running()) == "next"
        assert ended == ["cancelled"] and loop_errors == []
        started.clear()
        release.clear()
        asyncio.run(leave_while_running())  # the loop closes while the call runs
        release.set()

        async def after() -> str:
            return await asyncio.wait_for(pool.call(str, "after"), 5)

        # the answer to the closed loop was dropped; the same thread serves the next loop
        assert asyncio.run(after()) == "after"
        assert ended == ["cancelled", "orphan"] and orphans[0].cancelled()
        assert _names("t-gone") == {"t-gone_0"}
    finally:
        pool.shutdown()


def test_handoff_shutdown_cancels_the_submitted_calls_waiting_and_lets_the_running_end() -> None:
    pool = HandOff(1, thread_name_prefix="t-down")
    started, release = threading.Event(), threading.Event()

    def held() -> str:
        started.set()
        release.wait(10)
        return "ran"

    running = pool.submit(held)
    assert started.wait(5)
    waiting = pool.submit(str, "never")
    pool.shutdown(wait=False, cancel_futures=True)
    assert waiting.cancelled()
    with pytest.raises(RuntimeError):
        pool.submit(str, "after")
    release.set()
    assert running.result(5) == "ran"
    pool.shutdown()  # again: joins
    assert _names("t-down") == set()
