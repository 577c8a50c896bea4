"""The DATA phase as byte logic (pochta.server.smtpdata), against simple reference models,
over random streams cut into random chunks (hypothesis)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pochta.budget import Budget
from pochta.server.smtpdata import COMMAND_LIMIT, CommandWatch, DataReader, Spool


def reference(stream: bytes) -> tuple[bytes, bytes]:
    """(content, rest): RFC 5321 read line by line; only CRLF.CRLF ends the letter."""
    v = b"\r\n" + stream
    end = v.find(b"\r\n.\r\n")
    assert end >= 0
    lines = v[: end + 2].split(b"\r\n")
    content = b"\r\n".join(line[1:] if line.startswith(b".") else line for line in lines)
    return content[2:], v[end + 5 :]


class Sink:
    def __init__(self) -> None:
        self.out = bytearray()

    def write(self, data: bytes | memoryview) -> None:
        self.out += data

    def discard(self) -> None:
        self.out = bytearray(b"<discarded>")


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces, prev = [], 0
    for p in points:
        pieces.append(stream[prev:p])
        prev = p
    return [*pieces, stream[prev:]]


def read(
    chunks: list[bytes], size_limit: int = 1 << 30, line_limit: int = 1 << 30
) -> tuple[DataReader, bytes, bytes]:
    sink = Sink()
    reader = DataReader(sink, size_limit=size_limit, line_limit=line_limit)  # type: ignore[arg-type]
    for i, chunk in enumerate(chunks):
        rest = reader.feed(chunk)
        if rest is not None:
            return reader, bytes(sink.out), rest + b"".join(chunks[i + 1 :])
    raise AssertionError("the letter did not end")


PIECES = st.sampled_from([b"\r", b"\n", b".", b"a", b"\r\n", b"\r\n.", b"..", b"\x00", b" "])
BODIES = st.lists(PIECES, max_size=40).map(b"".join)
AFTER = st.sampled_from([b"", b"QUIT\r\n", b"MAIL FROM:<a@b>\r\n", b"\r\n.\r\n"])


@settings(max_examples=400, deadline=None)
@given(body=BODIES, after=AFTER, cuts=st.lists(st.integers(0, 60), max_size=6))
def test_reader_matches_the_line_by_line_reference(
    body: bytes, after: bytes, cuts: list[int]
) -> None:
    stream = body + (b".\r\n" if body.endswith(b"\r\n") else b"\r\n.\r\n") + after
    reader, content, rest = read(chunked(stream, cuts))
    assert (content, rest) == reference(stream)
    assert reader.size == len(content) and reader.state == "ok"


@pytest.mark.parametrize(
    "fake_end", [b"\n.\n", b"\r.\r", b"\n.\r\n", b"\r\n.\n", b"\r.\n", b"\r.\r\n", b"\n.\r"]
)
def test_no_smuggling_variant_ends_the_letter(fake_end: bytes) -> None:
    smuggled = b"MAIL FROM:<x@y>\r\nRCPT TO:<z@y>\r\nDATA\r\nevil\r\n"
    stream = b"Subject: a\r\n\r\nhi" + fake_end + smuggled + b".\r\nQUIT\r\n"
    for size in (1, 2, 3, 7, len(stream)):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        _, content, rest = read(chunks)
        assert smuggled in content and rest == b"QUIT\r\n"


def test_size_limit_drops_the_spool_at_once_and_reads_to_the_end() -> None:
    sink = Sink()
    reader = DataReader(sink, size_limit=100, line_limit=1 << 20)  # type: ignore[arg-type]
    assert reader.feed(b"x" * 98 + b"\r\n") is None
    assert reader.state == "ok"
    assert reader.feed(b"ab") is None
    assert reader.state == "too_big" and bytes(sink.out) == b"<discarded>"
    assert reader.feed(b"y" * 10_000) is None
    assert reader.feed(b"\r\n.\r\nNOOP\r\n") == b"NOOP\r\n"
    assert reader.state == "too_big" and reader.size == 100 + 2 + 10_002


def test_line_limit_counts_between_lfs() -> None:
    ok = b"a" * 90 + b"\n" + b"b" * 90 + b"\r\n"  # bare LF ends a line for the limit
    reader, content, _ = read([ok + b".\r\n"], line_limit=100)
    assert reader.state == "ok" and content == ok
    reader, _, rest = read([b"c" * 60, b"c" * 60 + b"\r\n.\r\nQUIT\r\n"], line_limit=100)
    assert reader.state == "too_long" and rest == b"QUIT\r\n"


def test_line_ending_of_the_letter() -> None:
    assert read([b"a\r\nb\n\r\n.\r\n"])[0].eol == b"\r\n"
    assert read([b"a\nb\r\n\r\n.\r\n"])[0].eol == b"\n"
    assert read([b"a\r", b"\nb\r\n\r\n.\r\n"])[0].eol == b"\r\n"


def test_spool_moves_to_a_private_file_past_the_threshold(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", threshold=10)
    spool.write(b"12345")
    assert not (tmp_path / "spool").exists()
    spool.write(b"6789012345")
    (path,) = (tmp_path / "spool").iterdir()
    assert path.stat().st_mode & 0o777 == 0o600
    spool.write(b"!")
    assert spool.finish() == path and path.read_bytes() == b"123456789012345!"
    spool.discard()
    assert not path.exists()
    small = Spool(tmp_path / "spool", threshold=10)
    small.write(b"abc")
    assert small.finish() == b"abc"


def test_spool_keeps_in_memory_only_what_the_budget_gives(tmp_path: Path) -> None:
    """Memory is taken from the server's budget; when it has none left the letter goes to
    its file from the first byte, and what was taken is given back when it moves or ends."""
    budget = Budget(8)
    first = Spool(tmp_path / "spool", threshold=100, budget=budget)
    first.write(b"12345")
    assert budget.used == 5 and not (tmp_path / "spool").exists()
    second = Spool(tmp_path / "spool", threshold=100, budget=budget)
    second.write(b"abcd")  # 4 more would pass the budget: a file at once
    assert isinstance(second.finish(), Path) and budget.used == 5
    first.write(b"678")
    assert budget.used == 8
    first.write(b"9")  # the budget is spent: the letter moves to its file, memory given back
    path = first.finish()
    assert isinstance(path, Path) and path.read_bytes() == b"123456789"
    assert budget.used == 0
    third = Spool(tmp_path / "spool", threshold=100, budget=budget)
    third.write(b"xyz")
    assert third.finish() == b"xyz" and budget.used == 3
    third.discard()
    first.discard()
    second.discard()
    assert budget.used == 0 and list((tmp_path / "spool").iterdir()) == []


def test_a_letter_in_memory_is_handed_over_not_copied(tmp_path: Path) -> None:
    """What the budget counts is what is held: ``finish`` hands over the spool's own bytes
    (no second copy of a letter already counted), and the share counts them until
    ``discard``."""
    budget = Budget(8 << 20)
    spool = Spool(tmp_path / "spool", threshold=8 << 20, budget=budget)
    piece = bytes(range(256)) * 256
    tracemalloc.start()  # before the letter comes: its memory is traced as it grows
    try:
        for _ in range(64):
            spool.write(memoryview(piece))
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        letter = spool.finish()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert letter == piece * 64 and budget.used == len(letter) == 4 << 20
    assert held >= 4 << 20 and peak < held + (1 << 20), (held, peak)  # a copy: held + 4 MB
    assert spool.held is not None and spool.held.take(10) and budget.used == (4 << 20) + 10
    spool.discard()
    assert budget.used == 0


def aiosmtpd_dispatches_data(line: bytes, reader_limit: int) -> bool:
    """How aiosmtpd's command loop treats one line ending in LF: is it run as DATA?"""
    if len(line) > reader_limit:
        return False
    stripped = line.rstrip(b"\r\n")
    if not stripped or len(stripped) > COMMAND_LIMIT:
        return False
    return stripped.partition(b" ")[0].upper() == b"DATA"


LINE_PIECES = st.sampled_from([b"DATA", b"data", b"Data", b" ", b"\r", b"x", b"MAIL", b"\t"])


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(st.lists(LINE_PIECES, max_size=6).map(b"".join), min_size=1, max_size=6),
    pad=st.integers(0, 600),
    cuts=st.lists(st.integers(0, 700), max_size=4),
)
def test_command_watch_agrees_with_aiosmtpd(lines: list[bytes], pad: int, cuts: list[int]) -> None:
    lines = [*lines[:-1], lines[-1] + b" " * pad]
    stream = b"".join(line + b"\n" for line in lines)
    expected, offset = None, 0
    for line in lines:
        offset += len(line) + 1
        if aiosmtpd_dispatches_data(line + b"\n", 1001):
            expected = offset
            break
    watch, seen, found = CommandWatch(1001), 0, None
    for chunk in chunked(stream, cuts):
        at = watch.find_data(chunk)
        if at is not None:
            found = seen + at
            break
        seen += len(chunk)
    assert found == expected


def test_only_old_spool_files_are_cleared(tmp_path: Path) -> None:
    """A letter another process on the same data directory is receiving stays; one left
    behind by a stopped process (untouched for long) goes."""
    import os
    import time

    from pochta.server.smtp import clear_spool

    fresh, stale = tmp_path / "a.letter", tmp_path / "b.letter"
    fresh.write_bytes(b"x")
    stale.write_bytes(b"y")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    clear_spool(tmp_path, older_than=600)
    assert fresh.exists() and not stale.exists()


def test_the_spool_keeps_what_a_slow_imap_append_still_needs(tmp_path: Path) -> None:
    """A restarting process clears the spool of files untouched for longer than any other
    process may still need them: an IMAP APPEND's letter may take ``imap.idle_timeout``
    (1,800 s) to come and then wait its turn, longer than SMTP's 2 x command_timeout."""
    import os
    import time

    from pochta.config import ImapSettings, SmtpSettings
    from pochta.server.smtp import clear_spool, spool_age

    slow, parts, stale = tmp_path / "a.letter", tmp_path / "b.parts", tmp_path / "c.letter"
    slow.write_bytes(b"x")
    parts.mkdir()
    (parts / "1.part").write_bytes(b"p")
    stale.write_bytes(b"y")
    now = time.time()
    for path, untouched in ((slow, 1_500), (parts, 1_900), (stale, 10_000)):
        os.utime(path, (now - untouched, now - untouched))
    age = spool_age(SmtpSettings(), ImapSettings())
    assert age >= ImapSettings().idle_timeout + ImapSettings().append_wait_seconds
    clear_spool(tmp_path, older_than=age)
    assert slow.exists() and parts.exists() and not stale.exists()
    old = now - age - 1
    os.utime(parts, (old, old))
    clear_spool(tmp_path, older_than=age)
    assert not parts.exists()  # an APPEND's parts a stopped process left
    assert spool_age(SmtpSettings()) == 2 * SmtpSettings().command_timeout + 600
