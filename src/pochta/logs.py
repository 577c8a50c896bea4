"""One log format for every line a pochta process writes: pochta's own loggers, uvicorn's and
aiosmtpd's, the worker processes' too.

``configure(level, fmt)`` puts one handler on the root logger whose formatter is structlog's
``ProcessorFormatter``: every stdlib record (pochta logs with the stdlib ``logging``; so do
uvicorn and aiosmtpd) goes through the same processors and comes out as

- ``text``: a human line, ``2025-01-31T10:00:00.123Z [info ] delivered 3f2a...  [pochta.smtp]
  queue_id=3f2a...`` (no colours unless the stream is a terminal);
- ``json``: one JSON object per line (``timestamp``, ``level``, ``logger``, ``event``, the ids
  bound, ``exception`` as text), for log shippers.

**Ids.** ``bound(queue_id=..., session=...)`` binds ids in a context variable for the code it
wraps; every line logged inside carries them, in threads started with ``asyncio.to_thread``
(which copies the context) and in the worker processes: :mod:`pochta.cpupool` sends the ids
bound when a task is submitted along with it, and the worker binds them while it runs the task
(``context()`` / ``bound(**ids)``). A worker process logs in the format of the process that
started its pool (``snapshot()`` travels with the process, ``restore`` applies it).

**Quiet by default.** aiosmtpd logs every command of every session at INFO, envelope addresses
included (~15 lines per letter); its INFO lines are demoted to DEBUG here, so they show only
with ``level = "debug"`` (above it, its logger's own level is WARNING: the records are not
even made). Its warnings (a client's bad commands) stay warnings, but a line a client sent
that is no SMTP command is logged as its length only (it may be a password).

**Secrets.** No code logs a password, a token or a secret. As a second line of defence,
``redact(value, ...)`` registers secret values (the service token, the guard key secret) that
are replaced by ``[redacted]`` wherever they would appear in a line; aiosmtpd masks the AUTH
command's argument itself, and tracebacks are rendered plain (structlog's default, rich, would
print the local variables of every frame).

Why structlog: it renders stdlib records (``ProcessorFormatter``) both for people
(``ConsoleRenderer``) and for shippers (``JSONRenderer``), and carries ids in context variables
(``structlog.contextvars``), so that one maintained, dependency-free package replaces a JSON
formatter (python-json-logger), a context filter and a text formatter of our own. The text
line without colours is ConsoleRenderer's, written by :class:`PlainRenderer` in a few string
operations (ConsoleRenderer's columns cost about half of a line; a test holds the two
equal). structlog's ``ProcessorFormatter`` is run by :class:`LineFormatter`, its chain
unchanged, without the copy it makes of every record; the per-letter lines come from loggers
that look up no caller (``logger``), and records look up no thread or process name (no
format shows them). Cost per line (``benchmarks/log_format.py``): see BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO, cast

import structlog
from structlog.contextvars import bind_contextvars, get_contextvars, reset_contextvars
from structlog.typing import EventDict, Processor, WrappedLogger

Format = Literal["text", "json"]
REDACTED = "[redacted]"

_secrets: set[str] = set()


@dataclass(frozen=True)
class Snapshot:
    """What a child process needs to log as this one does (picklable)."""

    level: int
    fmt: Format
    secrets: frozenset[str]


_current: Snapshot | None = None


def _redact(logger: WrappedLogger, name: str, event: EventDict) -> EventDict:
    """Replace every registered secret value in the line's strings by ``[redacted]``."""
    if not _secrets:
        return event
    # one search of all the strings together first: most lines hold no secret (a secret that
    # only seems to span two strings costs the search field by field below, nothing else)
    strings = "\0".join([v for v in event.values() if isinstance(v, str)])
    if not any(s in strings for s in _secrets):
        return event
    for key, value in event.items():
        if isinstance(value, str) and any(s in value for s in _secrets):
            for s in _secrets:
                value = value.replace(s, REDACTED)
            event[key] = value
    return event


def _event_text(logger: WrappedLogger, name: str, event: EventDict) -> EventDict:
    """The event as text (a stdlib record's message may be any object)."""
    if not isinstance(event.get("event"), str):
        event["event"] = str(event.get("event"))
    return event


SMTP_VERBS = frozenset(
    b"HELO EHLO LHLO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY EXPN HELP STARTTLS AUTH".split()
)


def _command_line(line: object) -> object:
    """A line a client sent, as aiosmtpd logs it: kept when it is an SMTP command (aiosmtpd
    masks AUTH's argument itself), else only its length: a client that goes on after its AUTH
    was refused sends its password as the next line."""
    if not isinstance(line, bytes | bytearray):
        return line
    verb = bytes(line).split(None, 1)[0].upper() if line.strip() else b""
    return line if verb in SMTP_VERBS else f"<{len(line)} bytes that are no command>"


FROM_CLIENT = (">>", "readline")  # in aiosmtpd's formats of a line a client sent


class _Aiosmtpd(logging.Filter):
    """aiosmtpd's lines: its per-command INFO chatter becomes DEBUG (and shows only at that
    level); a line a client sent that is no SMTP command is never shown (see above)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and args:
            if "unrecognised" in str(record.msg) and len(args) == 2:
                record.args = (args[0], f"<a command of {len(str(args[1]))} characters>")
            elif isinstance(args[-1], bytes | bytearray) and any(
                mark in str(record.msg) for mark in FROM_CLIENT
            ):
                record.args = (*args[:-1], _command_line(args[-1]))
        if record.levelno == logging.INFO:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


_DEMOTE = _Aiosmtpd()
CHATTY = ("mail.log",)
"""Loggers whose INFO lines are per-command chatter (aiosmtpd's)."""
ROUTED = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "mail.log")
"""Loggers that other libraries may give handlers of their own: theirs are removed, and their
records go to the root logger's handler like pochta's."""


def _add_pid(_logger: object, _method: str, event: EventDict) -> EventDict:
    """The process's id on every line: ``serve --processes`` runs several servers on one log."""
    event["pid"] = os.getpid()
    return event


LEVEL_WIDTH = len("exception")  # ConsoleRenderer pads levels to its longest level name
EVENT_WIDTH = 30  # and the event to its default pad_event_to
_SLOW_KEYS = ("stack", "exception", "exc_info")
PLAIN_COLUMNS = ("timestamp", "level", "event", "logger", "logger_name")
"""Keys ConsoleRenderer puts first, in this order, without their names."""
_QUOTED = frozenset(" \t=\r\n\"'")


class PlainRenderer:
    """The text line of ``structlog.dev.ConsoleRenderer(colors=False, sort_keys=False)``,
    character for character, in a few string operations: ConsoleRenderer builds every column
    in a StringIO of its own, about half of the cost of a line (``benchmarks/log_format.py``),
    and pochta writes one per letter at info. A line with a traceback or a stack goes to the
    ConsoleRenderer (``slow``) itself."""

    def __init__(self, slow: structlog.dev.ConsoleRenderer) -> None:
        self.slow = slow

    def __call__(self, logger: WrappedLogger, name: str, event: EventDict) -> str:
        if any(key in event for key in _SLOW_KEYS):
            return self.slow(logger, name, event)
        parts = []
        if (ts := event.pop("timestamp", None)) is not None:
            parts.append(str(ts))
        if (level := event.pop("level", None)) is not None:
            parts.append(f"[{level:<{LEVEL_WIDTH}}]")
        if (text := event.pop("event", None)) is not None:
            parts.append(f"{text!s:<{EVENT_WIDTH}}")
        for key in PLAIN_COLUMNS[3:]:
            if (value := event.pop(key, None)) is not None:
                parts.append(f"[{value}]")
        parts += [f"{key}={_repr(value)}" for key, value in event.items()]
        return " ".join(part for part in parts if part).rstrip(" ")


def _repr(value: object) -> str:
    """ConsoleRenderer's value: a string as it is unless it has a space, a quote or an ``=``."""
    if isinstance(value, str) and _QUOTED.isdisjoint(value):
        return value
    return repr(value)


class LineFormatter(logging.Formatter):
    """What ``structlog.stdlib.ProcessorFormatter(foreign_pre_chain=..., processors=...)``
    writes for a stdlib record, line for line (a test holds the two equal), without its copy
    of every record: ProcessorFormatter makes a second ``LogRecord`` of each one so that other
    handlers may see the original untouched, about a quarter of a line's cost, and pochta's
    one handler is the only one. ``chain``: the pre-chain and the processors in turn, the
    last one the renderer."""

    def __init__(self, chain: Sequence[Processor]) -> None:
        super().__init__()
        self.chain = tuple(chain)

    def format(self, record: logging.LogRecord) -> str:
        event: Any = {"event": record.getMessage(), "_record": record, "_from_structlog": False}
        if record.exc_info:
            event["exc_info"] = record.exc_info
        if record.stack_info:
            event["stack_info"] = record.stack_info
        method = record.levelname.lower()
        for processor in self.chain:
            event = processor(None, method, event)
        return cast(str, event)


def chains(fmt: Format, *, colors: bool = False) -> tuple[list[Processor], list[Processor]]:
    """structlog's pre-chain for stdlib records and its processors for ``fmt``."""
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_pid,
    ]
    renderer: Processor
    tail: list[Processor]
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False, default=str)
        tail = [structlog.processors.format_exc_info]
    else:
        console = structlog.dev.ConsoleRenderer(
            colors=colors, exception_formatter=structlog.dev.plain_traceback, sort_keys=False
        )
        renderer = console if colors else PlainRenderer(console)
        tail = []
    return shared, [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        _event_text,
        *tail,
        _redact,
        renderer,
    ]


def formatter(fmt: Format, *, colors: bool = False) -> logging.Formatter:
    """The formatter of every line: ``fmt`` is ``text`` (people) or ``json`` (shippers)."""
    shared, processors = chains(fmt, colors=colors)
    return LineFormatter([*shared, *processors])


class _Uncalled(logging.Logger):
    """A logger whose records carry no caller unless a stack is asked for (see ``logger``)."""

    def findCaller(
        self, stack_info: bool = False, stacklevel: int = 1
    ) -> tuple[str, int, str, str | None]:
        if stack_info:
            return super().findCaller(stack_info, stacklevel)
        return "(unknown file)", 0, "(unknown function)", None  # the stdlib's own "unknown"


def logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` for code that logs a line per letter or request: its
    records carry no caller (file, line, function), which no pochta format shows and which
    the stdlib finds by walking the stack for every record (unless the logger already
    exists: then it is returned as it is)."""
    previous = logging.getLoggerClass()
    logging.setLoggerClass(_Uncalled)
    try:
        return logging.getLogger(name)
    finally:
        logging.setLoggerClass(previous)


def configure(
    level: str | int = "info", fmt: Format = "text", *, stream: TextIO | None = None
) -> None:
    """Every record of this process, from any logger, at ``level`` and above, to ``stream``
    (default stderr) in ``fmt``. Replaces what was configured before (also uvicorn's own
    handlers: start uvicorn with ``log_config=None``)."""
    global _current
    out = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter(fmt, colors=fmt == "text" and _isatty(out)))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = level if isinstance(level, int) else logging.getLevelName(level.upper())
    root.setLevel(numeric)
    # no format shows a record's thread, process or process name: not looked up for each
    # record (the logging HOWTO's "Optimization"; the pid comes from _add_pid)
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    for name in ROUTED:
        # made here, before the library asks for them, as loggers that look up no caller:
        # uvicorn's access line is written once per request: the stdlib's lookup of its
        # caller (which no format shows) costs ~2 us a line
        lib = logger(name)
        for old in lib.handlers[:]:
            lib.removeHandler(old)
        lib.propagate = True
    for name in CHATTY:
        chatty = logging.getLogger(name)
        if _DEMOTE not in chatty.filters:
            chatty.addFilter(_DEMOTE)
        # its INFO lines would be demoted and dropped below debug: not made at all then (the
        # records cost ~60 us per letter), its warnings kept
        chatty.setLevel(
            logging.DEBUG if numeric <= logging.DEBUG else max(numeric, logging.WARNING)
        )
    _current = Snapshot(numeric, fmt, frozenset(_secrets))


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def redact(*values: str) -> None:
    """Never show these values in a line (replaced by ``[redacted]``); short ones (under 8
    characters) are ignored, as they would blank out ordinary words."""
    global _current
    _secrets.update(v for v in values if len(v) >= 8)
    if _current is not None:
        _current = Snapshot(_current.level, _current.fmt, frozenset(_secrets))


def snapshot() -> Snapshot | None:
    """This process's configuration, for a child process to ``restore`` (None: not
    configured by ``configure``)."""
    return _current


def restore(snap: Snapshot | None) -> None:
    """In a child process: log as the parent did (nothing when it was not configured)."""
    if snap is None:
        return
    _secrets.update(snap.secrets)
    configure(snap.level, snap.fmt)


# -- ids that tie the lines of one letter or request together --------------------------------
def context() -> dict[str, Any]:
    """The ids bound now (to send with a task to another process)."""
    return get_contextvars()


@contextlib.contextmanager
def bound(**ids: Any) -> Iterator[None]:
    """Lines logged inside carry ``ids`` (nested bindings add up; leaving restores)."""
    if not ids:
        yield
        return
    tokens = bind_contextvars(**ids)
    try:
        yield
    finally:
        reset_contextvars(**tokens)


def bind(**ids: Any) -> None:
    """Bind ``ids`` for the rest of the current context (a task, a callback's own copy)."""
    bind_contextvars(**ids)


def new_id() -> str:
    """A short random id (12 hex digits), e.g. for an HTTP request. It ties lines together and
    guards nothing, so it comes from ``random`` (reseeded in a forked child), not from the
    kernel: ``secrets`` asks the kernel for every id (a system call per request)."""
    return f"{random.getrandbits(48):012x}"
