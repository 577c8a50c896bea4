"""``pochta import``, ``pochta fsck``, ``pochta stats``."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

from pochta.cli.backup import read_manifest
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.cli.message import find_user
from pochta.mailbox.importer import ImportReport, import_letters, sources, total_bytes


def _bar(json_output: bool) -> Progress | None:
    if json_output or not sys.stderr.isatty():
        return None
    return Progress(
        *Progress.get_default_columns()[:-1],
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        transient=True,
    )


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


@handles_errors
def import_(
    paths: Annotated[
        list[Path],
        typer.Argument(help="mbox files, Maildir folders, directories of letter files"),
    ],
    user: Annotated[str, typer.Option("--user", help="whose mailbox receives the letters")],
    folder: Annotated[str, typer.Option(help="the folder they go to")] = "Inbox",
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Import letters byte for byte into a user's folder; attachments are deduplicated."""
    with opened(data, config) as pochta:
        owner = find_user(pochta.mailbox, user)
        bar = _bar(json_output)
        if bar is None:
            report = import_letters(pochta.mailbox, owner, sources(paths), folder=folder)
        else:
            with bar:
                task = bar.add_task("importing", total=total_bytes(paths))
                report = import_letters(
                    pochta.mailbox,
                    owner,
                    sources(paths),
                    folder=folder,
                    progress=lambda n: bar.advance(task, n),
                )
    payload: dict[str, Any] = {
        "letters": report.letters,
        "failed": report.failed,
        "bytes_received": report.bytes_received,
        "bytes_stored": report.bytes_stored,
        "attachments_stored": report.attachments_uploaded,
        "attachments_deduplicated": report.deduplicated,
        "savings_percent": round(report.savings * 100, 2),
    }
    emit(json_output, payload, lambda: _show_import(report))
    if report.failed:
        raise typer.Exit(1)


def _show_import(r: ImportReport) -> None:
    out.print(f"letters       {r.letters:,}")
    out.print(f"received      {_mb(r.bytes_received)}")
    out.print(f"stored        {_mb(r.bytes_stored)} (each stored byte is kept on two disks)")
    out.print(f"attachments   {r.attachments_uploaded:,} stored, {r.deduplicated:,} deduplicated")
    out.print(f"savings       {r.savings * 100:.1f} %")
    for line in r.failed:
        out.print(f"[red]failed[/]  {line}", markup=True)


@handles_errors
def fsck(
    disks: Annotated[
        bool,
        typer.Option(
            "--disks",
            help="also walk every disk: files with no FileDB record (after a restore: letters"
            " after the restore point) are reported and fail the check",
        ),
    ] = False,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest",
            help="a backup directory (or its disks.jsonl): say of each missing or unindexed"
            " file whether the backup saw it; implies --disks",
        ),
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Check that every attachment of every letter is readable on both disks of its pair with
    the right SHA-256, size and CRC-32, and that every counter equals its references. Exits 1
    on any loss or damage; leaks (files kept longer than needed) are listed but do not fail.
    With --disks, files on the disks that FileDB has no record of are listed and fail too."""
    seen = None if manifest is None else read_manifest(manifest)
    with opened(data, config) as pochta:
        bar = _bar(json_output)
        if bar is None:
            report = pochta.mailbox.fsck(disks=disks, manifest=seen)
        else:
            with bar:
                task = bar.add_task("checking", total=None)
                report = pochta.mailbox.fsck(
                    progress=lambda n: bar.advance(task, n), disks=disks, manifest=seen
                )
    payload = {**asdict(report), "ok": report.ok}

    def human() -> None:
        out.print(f"letters {report.letters:,}, references {report.refs:,}, blobs {report.blobs:,}")
        if disks or manifest is not None:
            out.print(f"files on the disks {report.files_on_disks:,}")
        names = ["lost", "damaged", "undercounted", "unreadable", "miscounted", "leaks"]
        for name in names + (["unindexed"] if disks or manifest is not None else []):
            items: list[str] = getattr(report, name)
            out.print(f"{name:<13} {len(items)}")
            for item in items[:20]:
                out.print(f"  {item}", markup=False)
            if len(items) > 20:
                out.print(f"  ... and {len(items) - 20} more (--json lists all)")
        out.print("[green]ok[/]" if report.ok else "[bold red]PROBLEMS FOUND[/]")

    emit(json_output, payload, human)
    if not report.ok:
        raise typer.Exit(1)


@handles_errors
def stats(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """Logical bytes (letters as delivered) vs physical bytes (skeletons + stored files on
    both disks), the dedup ratio, letters, attachments."""
    with opened(data, config) as pochta:
        s = pochta.mailbox.stats()
        s["valkyrie"] = pochta.valkyrie.state.summary()
    emit(json_output, s, lambda: _show_stats(s))


def _show_stats(s: dict[str, Any]) -> None:
    out.print(f"users              {s['users']:,}")
    out.print(f"letters            {s['letters']:,}")
    out.print(f"attachment refs    {s['attachment_refs']:,}")
    out.print(f"stored files       {s['blobs']:,}")
    out.print(f"logical bytes      {_mb(s['logical_bytes'])}")
    out.print(f"physical bytes     {_mb(s['physical_bytes'])} (skeletons + files x2 disks)")
    out.print(f"dedup ratio        {s['dedup_ratio']:.2f}")
    out.print(f"pending deletions  {s['pending_deletions']:,}")
