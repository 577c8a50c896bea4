"""pochta.logs: the two formats, ids bound, secrets redacted, aiosmtpd's chatter."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from pochta import logs


@pytest.fixture
def root() -> Iterator[io.StringIO]:
    """``logs.configure`` into a string; the root logger's state is restored afterwards."""
    saved, mail = logging.getLogger(), logging.getLogger("mail.log")
    handlers, level, mail_level = saved.handlers[:], saved.level, mail.level
    stream = io.StringIO()
    yield stream
    saved.handlers[:] = handlers
    saved.setLevel(level)
    mail.setLevel(mail_level)
    logs._secrets.clear()


def test_json_lines_carry_bound_ids_and_exceptions(root: io.StringIO) -> None:
    logs.configure("info", "json", stream=root)
    log = logging.getLogger("pochta.test")
    with logs.bound(queue_id="abc123"):
        log.info("delivered %s: %d bytes", "abc123", 42)
    log.info("after")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second, third = (json.loads(line) for line in root.getvalue().splitlines())
    assert first["event"] == "delivered abc123: 42 bytes"
    assert first["queue_id"] == "abc123" and first["level"] == "info"
    assert first["logger"] == "pochta.test" and first["timestamp"].endswith("Z")
    assert "queue_id" not in second  # leaving the block unbinds
    assert "ValueError: boom" in third["exception"] and third["level"] == "error"


def test_text_lines_are_plain_and_tracebacks_show_no_locals(root: io.StringIO) -> None:
    logs.configure("debug", "text", stream=root)
    password = "a-local-variable-secret"  # noqa: F841 (a local a rich traceback would print)
    try:
        raise RuntimeError("x")
    except RuntimeError:
        logging.getLogger("pochta.test").exception("it failed")
    out = root.getvalue()
    assert "[error" in out and "it failed" in out and "Traceback" in out
    assert "a-local-variable-secret" not in out
    assert "\x1b[" not in out  # no colours when the stream is not a terminal


def test_registered_secrets_are_redacted_and_short_ones_ignored(root: io.StringIO) -> None:
    logs.configure("info", "json", stream=root)
    logs.redact("service-token-1234567890", "short")
    logging.getLogger("x").info("token service-token-1234567890 in a short line")
    (line,) = root.getvalue().splitlines()
    assert json.loads(line)["event"] == "token [redacted] in a short line"


def test_aiosmtpd_chatter_is_debug_and_non_commands_are_hidden(root: io.StringIO) -> None:
    logs.configure("info", "json", stream=root)
    mail = logging.getLogger("mail.log")
    peer = ("127.0.0.1", 1)
    mail.info("%r >> %r", peer, b"MAIL FROM:<a@example.org>")
    mail.warning("%r unrecognised: %s", peer, "AW50ZWDYYXRPB24GCGFZC3DVCMQ=")
    assert [json.loads(x)["level"] for x in root.getvalue().splitlines()] == ["warning"]
    assert "AW50ZWDY" not in root.getvalue()
    assert not mail.isEnabledFor(logging.INFO)  # below debug its INFO records are not even made
    logs.configure("debug", "json", stream=root)
    mail.info("%r >> %r", peer, b"MAIL FROM:<a@example.org>")
    mail.debug("_handle_client readline: %r", b"cGFzc3dvcmQ=\r\n")
    mail.debug("%r << %r", peer, b"250 OK")
    lines = [json.loads(x) for x in root.getvalue().splitlines()[1:]]
    assert [r["level"] for r in lines] == ["debug", "debug", "debug"]
    assert "MAIL FROM:<a@example.org>" in lines[0]["event"]
    assert "cGFzc3dvcmQ" not in lines[1]["event"] and "14 bytes" in lines[1]["event"]
    assert "250 OK" in lines[2]["event"]


def test_a_snapshot_restores_the_format_and_the_secrets(root: io.StringIO) -> None:
    logs.configure("warning", "json", stream=root)
    logs.redact("another-secret-value")
    snap = logs.snapshot()
    assert snap is not None and snap.fmt == "json" and snap.level == logging.WARNING
    assert "another-secret-value" in snap.secrets


CONSOLE = structlog.dev.ConsoleRenderer(
    colors=False, exception_formatter=structlog.dev.plain_traceback, sort_keys=False
)
text = st.text(st.characters(codec="utf-8"), max_size=40)
values = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())


@given(
    st.fixed_dictionaries(  # what the formatter's chain always gives the renderer
        {
            "timestamp": text,
            "level": st.sampled_from(["debug", "info", "warning", "error", "critical"]),
            "event": text,
            "logger": text,
        },
        optional={"logger_name": text},
    ),
    st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), values, max_size=4),
)
def test_the_plain_renderer_writes_the_console_renderers_line(
    columns: dict[str, object], extra: dict[str, object]
) -> None:
    event = {**columns, **{k: v for k, v in extra.items() if k not in logs.PLAIN_COLUMNS}}
    fast = logs.PlainRenderer(CONSOLE)
    assert fast(None, "info", dict(event)) == CONSOLE(None, "info", dict(event))


def test_the_plain_renderer_leaves_tracebacks_to_the_console_renderer(
    root: io.StringIO,
) -> None:
    logs.configure("info", "text", stream=root)
    with logs.bound(queue_id="abc123"):
        logging.getLogger("pochta.test").info("delivered %s", "abc123")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("pochta.test").exception("failed")
    first, *rest = root.getvalue().splitlines()
    assert first.endswith("Z [info     ] delivered abc123               [pochta.test] "
                          f"queue_id=abc123 pid={os.getpid()}")  # fmt: skip
    assert rest[0].split(" ", 1)[1].startswith("[error    ] failed")
    assert "Traceback" in rest[1] and "ValueError: boom" in rest[-1]


def test_request_ids_are_12_hex_digits_and_a_forked_child_draws_its_own() -> None:
    ids = [logs.new_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 12 and int(i, 16) >= 0 for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child's next ids, next to the parent's: not the same sequence
        os.write(write, " ".join(logs.new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 100).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != [logs.new_id() for _ in range(3)]


@pytest.mark.parametrize("fmt", ["text", "json"])
@given(
    message=st.text(max_size=40).map(lambda t: t.replace("%", "%%") + " %s %d"),
    arg=st.text(max_size=20),
    number=st.integers(),
    ids=st.dictionaries(st.sampled_from(["queue_id", "session", "request_id"]), st.text()),
    level=st.sampled_from([logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR]),
    trouble=st.sampled_from(["", "exc_info", "stack_info"]),
)
def test_the_line_formatter_writes_the_processor_formatters_line(
    fmt: logs.Format,
    message: str,
    arg: str,
    number: int,
    ids: dict[str, str],
    level: int,
    trouble: str,
) -> None:
    """The same records through pochta's formatter and structlog's ProcessorFormatter with
    the same chains: the same line (the timestamp aside, which each takes itself)."""
    shared, processors = logs.chains(fmt)
    theirs = structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=processors)
    ours = logs.formatter(fmt)
    logs.redact("a-secret-value-0123")
    try:
        try:
            raise ValueError(f"boom {arg}")
        except ValueError as exc:
            exc_info = (type(exc), exc, exc.__traceback__)
        record = logging.LogRecord(
            "pochta.test",
            level,
            __file__,
            1,
            message + " a-secret-value-0123",
            (arg, number),
            exc_info if trouble == "exc_info" else None,
            sinfo="Stack (most recent call last):\n  here" if trouble == "stack_info" else None,
        )
        with logs.bound(**ids):
            lines = [ours.format(record), theirs.format(record)]
        if fmt == "json":
            mine, structlogs = (json.loads(line) for line in lines)
            assert mine.pop("timestamp").endswith("Z") and structlogs.pop("timestamp").endswith("Z")
            assert mine == structlogs
            assert "a-secret-value-0123" not in lines[0]
        else:
            mine_, structlogs_ = (line.split(" ", 1) for line in lines)
            assert mine_[1] == structlogs_[1]
    finally:
        logs._secrets.clear()


def test_a_logger_for_lines_per_letter_skips_the_caller(root: io.StringIO) -> None:
    logs.configure("info", "text", stream=root)
    quick = logs.logger("pochta.test.quick")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    quick.addHandler(keep)
    try:
        quick.info("delivered %s", "abc123")
        quick.info("with its stack", stack_info=True)
    finally:
        quick.removeHandler(keep)
    assert records[0].lineno == 0 and records[0].funcName == "(unknown function)"
    assert records[1].lineno > 0  # a stack asked for: the caller is found as usual
    first = root.getvalue().splitlines()[0]
    assert first.endswith(f"delivered abc123               [pochta.test.quick] pid={os.getpid()}")


def test_uvicorns_access_line_looks_up_no_caller() -> None:
    """``configure`` makes uvicorn's loggers before uvicorn asks for them (as ``pochta serve``
    does: logs first, then uvicorn's Config), as loggers that look up no caller: the access
    line is written once per request from deep in the ASGI stack."""
    code = """if True:
        import io, logging
        from pochta import logs
        logs.configure("info", "text", stream=io.StringIO())
        import uvicorn
        uvicorn.Config(app=None, log_config=None, log_level="info")
        kept = []
        class Keep(logging.Handler):
            def emit(self, record):
                kept.append(record)
        access = logging.getLogger("uvicorn.access")
        access.addHandler(Keep())
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "GET", "/healthz", "1.1", 200)
        print(kept[0].lineno, kept[0].funcName)
    """
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["0", "(unknown", "function)"]
