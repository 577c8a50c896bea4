"""CPU time of one call, stopped when it runs over a budget (shared by tests/unit/antispam/
test_linear.py and benchmarks/crafted_cpu.py). Unix, main thread only: it uses SIGPROF."""

from __future__ import annotations

import gc
import math
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

REPEAT = 0.01  # s: a stop is raised again this often until it gets through


class OverBudget(BaseException):
    """Raised inside the measured call when its CPU budget is spent. A BaseException, so that
    the ``except Exception`` of code that must never fail does not swallow it."""


_armed = False


def _stop(signum: int, frame: FrameType | None) -> None:
    if _armed:
        raise OverBudget


def _caused_by_stop(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, OverBudget):
            return True
        exc = exc.__context__
    return False


def cpu(fn: Callable[[], object], budget: float) -> float:
    """CPU seconds (user + system, this process) that ``fn()`` took; ``math.inf`` when it was
    stopped after ``budget`` seconds. Python's regex engine checks for signals as it runs, so a
    backtracking pattern is stopped too. A stop that lands in a finalizer (where exceptions are
    not raised but reported) is repeated every REPEAT seconds; such reports, and those of the
    generators the stopped call leaves behind, are dropped."""
    global _armed
    previous, hook = signal.signal(signal.SIGPROF, _stop), sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        if not _caused_by_stop(unraisable.exc_value):
            hook(unraisable)

    sys.unraisablehook = quiet
    stopped = False
    start = time.process_time()
    try:
        _armed = True
        if not math.isinf(budget):
            signal.setitimer(signal.ITIMER_PROF, budget, REPEAT)
        try:
            fn()
        finally:
            _armed = False
            signal.setitimer(signal.ITIMER_PROF, 0)
    except OverBudget:
        stopped = True
    finally:
        signal.signal(signal.SIGPROF, previous)
    elapsed = time.process_time() - start
    if stopped:
        gc.collect()  # the stopped call's frames and generators, finalized under ``quiet``
    sys.unraisablehook = hook
    return math.inf if stopped else elapsed
