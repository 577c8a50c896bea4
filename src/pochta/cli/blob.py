"""``pochta blob``: put, get, stat, dec, restore."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from pochta.blobs.evacuate import Restored, restore
from pochta.blobs.keys import parse_key, parse_magic, random_magic
from pochta.blobs.store import Stored
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import DiskError, InvalidInput
from pochta.types import FileRecord, Space

app = typer.Typer(
    help="The deduplicating blob store: put, get, stat, dec, restore.", no_args_is_help=True
)

PROGRESS_ABOVE = 32 << 20


def _show_record(r: FileRecord) -> None:
    flags = ",".join(r.as_fields()["flags"]) or "-"
    out.print(f"key      {r.key}")
    out.print(f"space    {'live (space0)' if r.space is Space.LIVE else 'deleted (space1)'}")
    out.print(f"counter  {r.counter}")
    out.print(f"magic    {r.magic}")
    out.print(f"flags    {flags}")
    out.print(f"pair     {r.pair_id}")
    if r.moved_at is not None:
        out.print(f"moved_at {r.moved_at:.3f}")


def _magic(value: str | None) -> int:
    return random_magic() if value is None else parse_magic(value)


@app.command()
@handles_errors
def put(
    file: Annotated[Path, typer.Argument(help="file to store", show_default=False)],
    magic: Annotated[
        str | None, typer.Option(help="the reference's magic (default: random)")
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Store FILE: inc when its content is already stored, upload when not."""
    m = _magic(magic)
    if not file.is_file():
        raise InvalidInput(f"{file} is not a readable file")
    with opened(data, config) as pochta:
        size = file.stat().st_size
        if json_output or size < PROGRESS_ABOVE or not sys.stderr.isatty():
            stored = pochta.blobs.put(file, m)
        else:
            with Progress(
                *Progress.get_default_columns()[:-1],
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                transient=True,
            ) as bar:
                task = bar.add_task(f"storing {file.name}", total=size * 2)
                stored = pochta.blobs.put(file, m, progress=lambda n: bar.advance(task, n))
    emit(json_output, _stored_dict(stored), lambda: _show_stored(stored))


def _stored_dict(s: Stored) -> dict[str, Any]:
    return {
        **s.record.as_fields(),
        "magic": s.magic,
        "record_magic": s.record.magic,
        "size": s.size,
        "crc32": f"{s.crc32:08x}",
        "uploaded": s.uploaded,
    }


def _show_stored(s: Stored) -> None:
    action = "uploaded" if s.uploaded else "already stored, counted"
    out.print(f"{action}: {s.record.key}")
    out.print(f"magic    {s.magic}   (keep it: `pochta blob dec` needs it)")
    out.print(f"counter  {s.record.counter}")
    out.print(f"size     {s.size} bytes, crc32 {s.crc32:08x}, pair {s.record.pair_id}")


@app.command()
@handles_errors
def get(
    key: Annotated[str, typer.Argument(help="SHA-256 key", show_default=False)],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="write here (default: stdout)")
    ] = None,
    size: Annotated[int | None, typer.Option(help="refuse a copy of another size")] = None,
    crc32: Annotated[
        str | None, typer.Option(help="refuse a copy with another CRC-32 (hex)")
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Write the content of KEY to stdout or to a file."""
    key = parse_key(key)
    expect_crc = None
    if crc32 is not None:
        try:
            expect_crc = int(crc32, 16)
        except ValueError:
            raise InvalidInput(f"--crc32 {crc32!r} is not hexadecimal") from None
    with opened(data, config) as pochta:
        blob = pochta.blobs.open(key, expect_size=size, expect_crc32=expect_crc)
        written = 0
        if output is None:
            if json_output:
                blob.reader.close()
                raise InvalidInput("--json needs -o FILE (the content cannot share stdout)")
            sink = sys.stdout.buffer
            for chunk in blob:
                sink.write(chunk)
                written += len(chunk)
            sink.flush()
            return
        tmp = output.with_name(f".{output.name}.part")
        try:
            with tmp.open("wb") as f:
                for chunk in blob:
                    f.write(chunk)
                    written += len(chunk)
            os.replace(tmp, output)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise DiskError(f"cannot write {output}: {exc.strerror}") from exc
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    emit(
        json_output,
        {"key": key, "bytes": written, "output": str(output), "disk": str(blob.disk)},
        lambda: out.print(f"wrote {written} bytes to {output} (from {blob.disk})"),
    )


@app.command()
@handles_errors
def stat(
    key: Annotated[str, typer.Argument(help="SHA-256 key", show_default=False)],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Show the FileDB record of KEY: counter, magic, flags, pair, space."""
    with opened(data, config) as pochta:
        record = pochta.blobs.stat(key)
    emit(json_output, record.as_fields(), lambda: _show_record(record))


@app.command()
@handles_errors
def dec(
    key: Annotated[str, typer.Argument(help="SHA-256 key", show_default=False)],
    magic: Annotated[str, typer.Option(help="the magic the reference was stored with")],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Drop one reference to KEY (counter - 1, magic - M)."""
    m = parse_magic(magic)
    with opened(data, config) as pochta:
        record = pochta.blobs.dec(key, m)
    emit(json_output, record.as_fields(), lambda: _show_record(record))


@app.command("restore")
@handles_errors
def restore_(
    key: Annotated[str, typer.Argument(help="SHA-256 key", show_default=False)],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Bring a quarantined file back (a letter still needs it): rename the newest
    <key>.deleted.<ts> back on each disk and make the record live again, DO_NOT_DELETE."""
    with opened(data, config) as pochta:
        done = restore(pochta.blobs, parse_key(key))
    emit(
        json_output,
        {
            **done.record.as_fields(),
            "renamed": done.renamed,
            "present": done.present,
            "missing": done.missing,
        },
        lambda: _show_restored(done),
    )


def _show_restored(r: Restored) -> None:
    if r.renamed:
        out.print(f"restored from quarantine on {', '.join(r.renamed)}")
    else:
        out.print("nothing was quarantined: the file is in place")
    out.print(f"present on {', '.join(r.present)}")
    if r.missing:
        out.print(
            f"[yellow]missing on {', '.join(r.missing)}[/]: Valkyrie copies it there "
            "on its next pass"
        )
    _show_record(r.record)
