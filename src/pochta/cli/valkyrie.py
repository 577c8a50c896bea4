"""``pochta valkyrie``: run the scrubber; show what it has done."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn
from rich.table import Table

from pochta.app import Pochta
from pochta.blobs import valkyrie as vk
from pochta.blobs.nodes.host import served_disk
from pochta.blobs.nodes.local import LocalDisk
from pochta.blobs.nodes.report import Reporter
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import InvalidInput
from pochta.types import Pair

app = typer.Typer(help="Valkyrie: the per-disk scrubber.", no_args_is_help=True)

COLUMNS = ["checked", "repaired", "quarantined", "purged", "orphans", "strays", "errors"]


def _table(rows: list[dict[str, Any]]) -> None:
    table = Table("disk", *COLUMNS, "MB read")
    for r in rows:
        table.add_row(str(r["disk"]), *(f"{r[c]:,}" for c in COLUMNS), f"{r['bytes'] / 1e6:,.1f}")
    out.print(table)


@app.command()
@handles_errors
def run(
    disk: Annotated[
        str | None,
        typer.Option(
            "--disk",
            help="one disk: its index (0-based), its root or URL, or on a storage host the"
            " directory behind its WebDAV disk",
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="one pass over each disk, then exit")
    ] = False,
    budget: Annotated[
        float | None, typer.Option("--budget", help="MB/s of reads per disk; 0: unthrottled")
    ] = None,
    slave_delay: Annotated[
        float | None,
        typer.Option("--slave-delay", help="seconds the non-master disk waits after a delete"),
    ] = None,
    orphan_min_age: Annotated[
        float | None,
        typer.Option("--orphan-min-age", help="seconds before an unrecorded file is an orphan"),
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Scrub disks: a pass resumes where the last one stopped. Without --once, runs passes
    forever (every pass_interval_seconds)."""
    with opened(data, config) as pochta, contextlib.ExitStack() as stack:
        valkyrie = pochta.valkyrie
        overrides: dict[str, float | None] = {}
        if budget is not None:
            overrides["budget_mb_per_s"] = budget if budget > 0 else None
        if slave_delay is not None:
            overrides["slave_delay_seconds"] = slave_delay
        if orphan_min_age is not None:
            overrides["orphan_min_age_seconds"] = orphan_min_age
        cfg = dataclasses.replace(valkyrie.config, **overrides)  # type: ignore[arg-type]
        valkyrie.config = cfg
        targets = [_target(pochta, disk, stack)] if disk is not None else valkyrie.disks()
        reports: list[vk.PassReport] = []
        while True:
            reports = []
            for pair, index in targets:
                reports.append(_one(valkyrie, pair, index, json_output))
            if once:
                break
            time.sleep(cfg.pass_interval_seconds)
    rows = [r.as_dict() for r in reports]
    errors = sum(r.counts.errors for r in reports)

    def human() -> None:
        _table(rows)
        for r in reports:
            if r.busy:
                out.print(f"{r.disk}: another Valkyrie is running on it; skipped")
            for problem in r.problems:
                out.print(f"[red]{r.disk}[/]: {problem}", soft_wrap=True)

    emit(json_output, {"disks": rows, "errors": errors}, human)
    if errors:
        raise typer.Exit(1)


def _target(pochta: Pochta, disk: str, stack: contextlib.ExitStack) -> tuple[Pair, int]:
    """A disk by index, root or URL; or, on a storage host, the directory behind a WebDAV
    disk: then it is read here, not over HTTP, and its free-space report is kept up to date
    (a thread writes it every few seconds while this command runs)."""
    try:
        return pochta.valkyrie.find_disk(disk)
    except InvalidInput:
        directory = Path(disk).expanduser()
        if not directory.is_dir():
            raise
    directory = directory.resolve()
    specs = [d for p in pochta.blobs.pairs() for d in p.disks]
    try:
        spec = served_disk(directory, specs, pochta.blobs.disk)
    except OSError as exc:
        raise InvalidInput(f"cannot write into {directory}: {exc.strerror or exc}") from None
    if spec is None:
        raise InvalidInput(
            f"no disk of a pair is {directory}: neither a local disk nor the directory behind"
            " a WebDAV disk whose node answers (`pochta pairs add http://node:port/root` first)"
        )
    pochta.blobs.mount(spec, LocalDisk(directory, spec=spec))
    reporter = Reporter(directory)
    reporter.start()
    stack.callback(reporter.stop)
    return pochta.valkyrie.find_disk(str(spec))


def _one(valkyrie: vk.Valkyrie, pair: Any, index: int, json_output: bool) -> vk.PassReport:
    if json_output or not sys.stderr.isatty():
        return valkyrie.run_disk(pair, index)
    with Progress(
        *Progress.get_default_columns()[:-2],
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(f"scrubbing {pair.disks[index]}", total=None)
        return valkyrie.run_disk(pair, index, progress=lambda n: bar.advance(task, n))


@app.command()
@handles_errors
def stats(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """What Valkyrie has done so far, in total and per disk."""
    with opened(data, config) as pochta:
        s = pochta.valkyrie.state.summary()
    emit(json_output, s, lambda: _table(s["disks"]))
