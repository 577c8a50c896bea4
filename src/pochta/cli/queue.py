"""``pochta queue``: the incoming queue's letters (smtp.answer = "queued"): list, retry, drop.

It works beside a running server (see :mod:`pochta.mailbox.queueadmin`): the servers are told
of a change through ``<data_dir>/queue/changed`` and read their slots again within seconds.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Annotated

import typer

from pochta.cli.common import (
    ConfigOpt,
    DataOpt,
    JsonOpt,
    emit,
    existing_data_dir,
    handles_errors,
    out,
    settings,
)
from pochta.errors import InvalidInput
from pochta.mailbox import queueadmin
from pochta.mailbox.queueadmin import Listed

app = typer.Typer(
    help='The incoming queue (smtp.answer = "queued"): list, retry, drop its letters.',
    no_args_is_help=True,
)


def _root(data: Path | None, config: Path | None) -> Path:
    s = settings(data, config)
    existing_data_dir(s, data, config)
    return s.data_dir.resolve() / "queue"


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # a time out of the calendar's range
        return f"{ts:.0f}"


def _line(x: Listed) -> str:
    e = x.entry
    state = "held"
    if not x.held:
        state = "due now" if x.next_try <= time.time() else f"next {_when(x.next_try)}"
    if e is None:
        return f"{x.id}  slot {x.slot}  {x.size:>9,} B  unreadable record"
    rcpts = ", ".join(e.recipients[:3]) + (f" (+{len(e.recipients) - 3})" * (len(e.recipients) > 3))
    return (
        f"{x.id}  slot {x.slot}  {x.size:>9,} B  queued {_when(e.at)}  tries {x.attempts}"
        f"  {state}  <{e.sender}> -> {rcpts}"
    )


@app.command("list")
@handles_errors
def list_(
    held: Annotated[bool, typer.Option("--held", help="only the held letters")] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """The letters in the incoming queue, the oldest first: waiting for a try, or held (the
    delivery refused them as they are: never tried again until `pochta queue retry`)."""
    items = queueadmin.listing(_root(data, config))
    if held:
        items = [x for x in items if x.held]

    def human() -> None:
        for x in items:
            out.print(_line(x))
        kept = sum(x.held for x in items)
        out.print(f"{len(items)} letter(s), {kept} held")

    emit(json_output, [x.as_dict() for x in items], human)


@app.command()
@handles_errors
def retry(
    queue_id: Annotated[str | None, typer.Argument(help="a queue id (see `queue list`)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every letter, held or waiting")] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Try a letter (or --all) again now: a held one is the runner's again; the servers
    take it within seconds (a server that runs none: at its next start)."""
    if (queue_id is None) == (not all_):
        raise InvalidInput("name one letter: `pochta queue retry ID`, or `--all`")
    done = queueadmin.retry(_root(data, config), None if all_ else [str(queue_id)])
    emit(
        json_output,
        {"retried": done},
        lambda: out.print(f"{len(done)} letter(s) to be tried again now"),
    )


@app.command()
@handles_errors
def drop(
    queue_id: Annotated[str, typer.Argument(help="a queue id (see `queue list`)")],
    yes: Annotated[bool, typer.Option("--yes", help="yes, remove it for good")] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Remove a letter from the queue for good, undelivered (no bounce is sent; its sender
    had 250): a held letter, or any letter while no server runs on its slot."""
    if not yes:
        raise InvalidInput(f"dropping {queue_id} loses the letter: say --yes")
    item = queueadmin.drop(_root(data, config), queue_id)
    emit(
        json_output,
        {"dropped": item.as_dict()},
        lambda: out.print(f"dropped {item.id} ({item.size:,} bytes, slot {item.slot})"),
    )
