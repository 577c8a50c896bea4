"""``pochta leaks audit``: which lines of a leaked ``email:password`` dump open an account."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import InvalidInput
from pochta.guard.leaks import LeakReport, audit, audit_record, dump_lines

app = typer.Typer(
    help="Leaked credentials: audit a dump against the accounts.", no_args_is_help=True
)


@app.command("audit")
@handles_errors
def audit_(
    file: Annotated[
        Path, typer.Argument(help="the dump: one email:password per line ('-' = stdin)")
    ],
    workers: Annotated[
        int, typer.Option(min=0, help="processes verifying passwords (0: all cores)")
    ] = 0,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check every line against the account's argon2 hash; accounts whose password works must
    reset it (their sessions end, and login answers 403 until a new password is set)."""
    workers = workers or os.cpu_count() or 1
    if str(file) != "-" and not file.is_file():
        raise InvalidInput(f"{file} is not a readable file")
    with opened(data, config) as pochta:
        accounts = pochta.mailbox.credentials()
        if str(file) == "-":
            report = audit(dump_lines(sys.stdin.buffer), accounts, workers)
        else:
            with file.open("rb") as stream:
                show = not json_output and sys.stderr.isatty()
                if not show:
                    report = audit(dump_lines(stream), accounts, workers)
                else:
                    with Progress(
                        *Progress.get_default_columns()[:-1],
                        BarColumn(),
                        DownloadColumn(),
                        TransferSpeedColumn(),
                        transient=True,
                    ) as bar:
                        task = bar.add_task("auditing", total=file.stat().st_size)

                        def progress(_: LeakReport) -> None:
                            bar.update(task, completed=stream.tell())

                        report = audit(dump_lines(stream), accounts, workers, progress)
        pochta.history.record_audit(audit_record(report))  # for the admin pages
    emit(json_output, report.to_dict(), lambda: _show(report))


def _show(r: LeakReport) -> None:
    out.print(f"lines             {r.lines:,}")
    out.print(f"malformed         {r.malformed:,}")
    out.print(f"unknown accounts  {r.unknown:,} ({r.share(r.unknown):.3f} %)")
    out.print(f"wrong passwords   {r.wrong:,} ({r.share(r.wrong):.3f} %)")
    out.print(f"valid             {r.valid:,} ({r.share(r.valid):.3f} %)")
    out.print(f"reset required    {r.reset:,} account(s)")
    if r.seconds:
        out.print(f"time              {r.seconds:.1f} s ({r.lines / r.seconds:,.0f} lines/s)")
