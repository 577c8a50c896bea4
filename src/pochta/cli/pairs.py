"""``pochta pairs``: list, add, set-flags, evacuate, retire."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from pochta.blobs.evacuate import EvacuationReport, evacuate, retire
from pochta.blobs.nodes.client import parse_node_url
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import InvalidInput
from pochta.types import DiskSpec, Pair, PairFlag

app = typer.Typer(help="Pairs of disks that hold the blobs.", no_args_is_help=True)

FLAG_NAMES = {"readonly": PairFlag.READONLY, "service": PairFlag.SERVICE, "locked": PairFlag.LOCKED}


def flag_names(flags: PairFlag) -> list[str]:
    return [name for name, flag in FLAG_NAMES.items() if flags & flag]


def pair_dict(p: Pair) -> dict[str, Any]:
    return {
        "id": p.id,
        "disks": [
            {"node": d.node, "root": d.root, "free": f}
            for d, f in zip(p.disks, p.free, strict=True)
        ],
        "flags": flag_names(p.flags),
        "writable": p.flags.writable,
    }


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def _table(pairs: list[Pair]) -> None:
    table = Table("pair", "disk A", "free A", "disk B", "free B", "flags")
    for p in pairs:
        table.add_row(
            str(p.id),
            str(p.disks[0]),
            _gib(p.free[0]),
            str(p.disks[1]),
            _gib(p.free[1]),
            ",".join(flag_names(p.flags)) or "-",
        )
    out.print(table)


def _disk(text: str) -> DiskSpec:
    if "://" in text:  # a node's URL (http, https); any other scheme is refused
        return parse_node_url(text)
    path = Path(text).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise InvalidInput(f"{text} is not a directory")
    return DiskSpec("local", str(path))


@app.command("list")
@handles_errors
def list_(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """Every pair with its disks, free space (measured now) and flags."""
    with opened(data, config) as pochta:
        pairs = pochta.blobs.refresh_free(force=True)
    emit(json_output, [pair_dict(p) for p in pairs], lambda: _table(pairs))


_DISK_HELP = "a directory, or a WebDAV node's http://node:port/root"


@app.command()
@handles_errors
def add(
    dir_a: Annotated[str, typer.Argument(help=f"first disk: {_DISK_HELP}", show_default=False)],
    dir_b: Annotated[str, typer.Argument(help=f"second disk: {_DISK_HELP}", show_default=False)],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Add a pair of two disks (local directories or WebDAV nodes: http://node:port/root);
    both must take a probe write."""
    with opened(data, config) as pochta:
        pair = pochta.blobs.add_pair(_disk(dir_a), _disk(dir_b))
    emit(json_output, pair_dict(pair), lambda: out.print(f"added pair {pair.id}"))


@app.command("set-flags")
@handles_errors
def set_flags(
    pair_id: Annotated[int, typer.Argument(metavar="PAIR", help="pair id", show_default=False)],
    flags: Annotated[
        list[str], typer.Argument(help="readonly, service, locked, or none", show_default=False)
    ],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Replace a pair's flags: readonly / service / locked stop new files; none clears."""
    value = PairFlag.NONE
    for name in flags:
        if name.lower() == "none":
            continue
        if name.lower() not in FLAG_NAMES:
            raise InvalidInput(f"unknown flag {name!r}: use readonly, service, locked or none")
        value |= FLAG_NAMES[name.lower()]
    with opened(data, config) as pochta:
        pair = pochta.blobs.set_flags(pair_id, value)
    emit(
        json_output,
        pair_dict(pair),
        lambda: out.print(f"pair {pair.id}: {','.join(flag_names(pair.flags)) or 'no flags'}"),
    )


PairArg = Annotated[int, typer.Argument(metavar="PAIR", help="pair id", show_default=False)]


@app.command("evacuate")
@handles_errors
def evacuate_(
    pair_id: PairArg,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Copy every file of a pair (from a disk whose copy hashes right) to other writable pairs
    and repoint the records; the pair goes into SERVICE first. Run again to resume."""
    with opened(data, config) as pochta:
        if json_output or not sys.stderr.isatty():
            report = evacuate(pochta.blobs, pair_id, locks=pochta.locks)
        else:
            with Progress(
                *Progress.get_default_columns()[:-2],
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                transient=True,
            ) as bar:
                task = bar.add_task(f"evacuating pair {pair_id}", total=None)

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = evacuate(pochta.blobs, pair_id, locks=pochta.locks, progress=progress)
    emit(json_output, report.as_dict(), lambda: _show_evacuation(report))
    if report.errors or report.left:
        raise typer.Exit(1)


def _show_evacuation(r: EvacuationReport) -> None:
    out.print(
        f"pair {r.pair}: {r.moved:,} of {r.total:,} file(s) moved ({r.bytes / 1e6:,.1f} MB), "
        f"{r.skipped:,} deleted or moved meanwhile, {r.errors:,} error(s), {r.left:,} left"
    )
    for problem in r.problems:
        out.print(f"[red]{problem}[/]", soft_wrap=True)
    if not r.left:
        out.print(f"pair {r.pair} is empty: `pochta pairs retire {r.pair}` removes it")


@app.command("retire")
@handles_errors
def retire_(
    pair_id: PairArg,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Remove a pair that holds no live file (evacuate it first)."""
    with opened(data, config) as pochta:
        pair = retire(pochta.blobs, pair_id)
    emit(json_output, pair_dict(pair), lambda: out.print(f"pair {pair.id} retired"))
