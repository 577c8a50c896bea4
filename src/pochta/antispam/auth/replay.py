"""Synchronous checks on asynchronous DNS: run the check, ask what it missed, run it again.

pyspf (SPF) and pochta's DMARC are written against a blocking
:class:`~pochta.antispam.auth.resolver.Resolver`. The server must not block on DNS, and must
not hold a thread per letter while a sender's name servers think it over. So a check runs on a
:class:`Replay`: a resolver that answers from the answers gathered so far and, for a question
it has none for, raises :class:`~pochta.antispam.auth.resolver.NeedAnswer`. :func:`replayed`
asks that question asynchronously (no thread waits meanwhile) and runs the check again from
the start, until a run asks nothing new. Both checks are deterministic given their answers,
so the last run's result is what a blocking run would have given with the same answers (the
RFC 7208 suite passes through this path: tests/unit/antispam/test_replay.py).

A run costs CPU (pyspf: 0.1-0.3 ms on real records; every run reads every record gathered,
so a sender's records are bounded, :mod:`~pochta.antispam.auth.spf`), and there is one more
run per question a letter needs after another (the record, then each include). The server
runs them in a thread of its own pool (:func:`in_executor`), never on its event loop: a
sender's records then cost the loop a hand-off per run, whatever they hold. ``follow`` names
the questions a check will
surely ask after an answer (SPF: the addresses of an MX's exchanges), asked together with it,
so a ``mx`` term is one round, not eleven. A check that swallows NeedAnswer (pyspf ignores
errors of an ``exp=`` lookup) still ends with the question noted as missing, so it is asked
and the check run again. At most ``max_rounds`` runs; the last one is final: a question still
missing is ``temperror`` there, as past a letter's question limit.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Executor
from typing import Protocol, TypeVar

from pochta.antispam.auth.resolver import DnsTempError, NeedAnswer, Question, RType, question
from pochta.executors import run_in

T = TypeVar("T")

Answer = list[str] | DnsTempError
Answers = dict[Question, Answer]
Ask = Callable[[str, RType], Awaitable[list[str]]]
Follow = Callable[[Question, list[str]], Iterable[Question]]


class Runner(Protocol):
    """Where a run of a check executes (default: :func:`inline`, on the event loop)."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


MAX_ROUNDS = 200
"""More than any check needs: SPF asks at most 1 + 10 x 11 + 11 questions one after another
(fewer rounds with ``follow``), DMARC two."""


class Replay:
    """A Resolver over ``answers``; a question without one is noted in ``missing`` and raises
    NeedAnswer (``final``: DnsTempError instead, the check's last run)."""

    def __init__(self, answers: Mapping[Question, Answer], *, final: bool = False) -> None:
        self.answers = answers
        self.final = final
        self.missing: list[Question] = []

    def query(self, name: str, rtype: RType) -> list[str]:
        key = question(name, rtype)
        found = self.answers.get(key)
        if found is None:
            if self.final:
                raise DnsTempError(f"{key[0]} {rtype}: not asked (no more questions)")
            if key not in self.missing:
                self.missing.append(key)
            raise NeedAnswer(*key)
        if isinstance(found, DnsTempError):
            raise found
        return list(found)


async def inline(fn: Callable[[], T]) -> T:
    return fn()


def in_executor(executor: Executor) -> Runner:
    """A Runner that runs each run in a thread of ``executor`` (the server's ``checks``
    pool, :mod:`pochta.executors`), the event loop awaiting it."""

    async def run(fn: Callable[[], T]) -> T:
        return await run_in(executor, fn)

    return run


async def replayed(
    check: Callable[[Replay], T],
    ask: Ask,
    *,
    answers: Mapping[Question, Answer] | None = None,
    follow: Follow | None = None,
    run: Runner | None = None,
    max_rounds: int = MAX_ROUNDS,
) -> T:
    """``check(resolver)`` with every question it asks answered by ``ask`` (DnsTempError
    kept as the answer); ``answers``: some known already (asked beforehand, together)."""
    got: Answers = dict(answers or {})
    execute: Runner = run if run is not None else inline
    for _ in range(max_rounds - 1):
        replay = Replay(got)
        try:
            result = await execute(functools.partial(check, replay))
        except NeedAnswer:
            pass  # noted in replay.missing
        else:
            if not replay.missing:
                return result
        await gather(replay.missing, ask, got, follow)
    return await execute(functools.partial(check, Replay(got, final=True)))


async def gather(
    questions: Iterable[Question], ask: Ask, got: Answers, follow: Follow | None = None
) -> None:
    """Ask ``questions`` at once into ``got``, with what ``follow`` adds to each answer."""
    asked: set[Question] = set(got)

    async def one(q: Question) -> None:
        try:
            answer = await ask(*q)
        except DnsTempError as exc:
            got[q] = exc
            return
        got[q] = answer
        if follow is not None:
            await both([f for f in follow(q, answer) if f not in asked])

    async def both(qs: list[Question]) -> None:
        fresh = list(dict.fromkeys(q for q in qs if q not in asked))
        asked.update(fresh)
        await asyncio.gather(*(one(q) for q in fresh))

    await both(list(questions))
