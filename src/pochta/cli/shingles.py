"""``pochta shingles``: show a letter's shingles, and their counters."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from pochta.antispam.shingles.extract import extract
from pochta.antispam.shingles.registry import Shingle
from pochta.antispam.shingles.shingler import Shingler, ShingleStats, windows_of
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import ConfigError, InvalidInput
from pochta.mime.letter import parse
from pochta.types import Envelope

app = typer.Typer(help="Shingles of a letter and their counters.", no_args_is_help=True)

FileArg = Annotated[
    Path, typer.Argument(help="the letter (.eml, raw RFC 5322); - reads stdin", show_default=False)
]
IpOpt = Annotated[str | None, typer.Option("--ip", help="the sending client's IP")]
SenderOpt = Annotated[str | None, typer.Option("--sender", help="the envelope sender")]
RcptOpt = Annotated[
    list[str] | None, typer.Option("--rcpt", help="an envelope recipient (repeatable)")
]
WindowOpt = Annotated[
    list[str] | None,
    typer.Option("--window", "-w", help="1h, 24h, 14d, ... (repeatable; default 24h)"),
]

SHOWN_VALUE = 70


def _read(file: Path) -> bytes:
    if str(file) == "-":
        return sys.stdin.buffer.read()
    try:
        return file.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {file}: {exc.strerror}") from None


def _envelope(ip: str | None, sender: str | None, rcpt: list[str] | None) -> Envelope | None:
    if ip is None and sender is None and not rcpt:
        return None
    return Envelope(ip=ip, sender=sender, recipients=tuple(rcpt or ()))


def shingle_dict(s: Shingle) -> dict[str, Any]:
    return {
        "type": int(s.type),
        "name": s.type.label,
        "value": s.value,
        "hash": s.hex,
        "unique": None if s.unique is None else s.unique.hex,
    }


def _short(value: str) -> str:
    return value if len(value) <= SHOWN_VALUE else value[: SHOWN_VALUE - 1] + "…"


@app.command()
@handles_errors
def show(
    file: FileArg,
    ip: IpOpt = None,
    sender: SenderOpt = None,
    rcpt: RcptOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Each shingle of a letter: type number, type name, normalized value, hash."""
    shingles = extract(parse(_read(file)), _envelope(ip, sender, rcpt))

    def human() -> None:
        table = Table(box=None, pad_edge=False)
        for col in ("type", "name", "hash", "value"):
            table.add_column(col)
        for s in shingles:
            table.add_row(str(int(s.type)), s.type.label, s.hex, _short(s.value))
        out.print(table)

    emit(json_output, {"shingles": [shingle_dict(s) for s in shingles]}, human)


@app.command()
@handles_errors
def stats(
    file: FileArg,
    window: WindowOpt = None,
    ip: IpOpt = None,
    sender: SenderOpt = None,
    rcpt: RcptOpt = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """The counters of each shingle of a letter over a window (ham, spam, complaint,
    unspam, read)."""
    names = [w.name for w in windows_of(window or ["24h"])]
    raw = _read(file)
    with opened(data, config) as pochta:
        result = _shingler(pochta).stats(raw, names, _envelope(ip, sender, rcpt))

    def human() -> None:
        for name in names:
            table = Table(title=f"window {name}", box=None, pad_edge=False, title_justify="left")
            for col in ("type", "name", "hash", "value"):
                table.add_column(col)
            kinds = list(result[0].counters[name]) if result else []
            for kind in kinds:
                table.add_column(kind, justify="right")
            for row in result:
                s = row.shingle
                values = [str(row.counters[name][k]) for k in kinds]
                table.add_row(str(int(s.type)), s.type.label, s.hex, _short(s.value), *values)
            out.print(table)

    emit(json_output, {"windows": names, "shingles": [_stats_dict(r) for r in result]}, human)


def _shingler(pochta: object) -> Shingler:
    shingler = getattr(pochta, "shingles", None)
    if not isinstance(shingler, Shingler):
        raise ConfigError("the shingle counters are not configured")
    return shingler


def _stats_dict(r: ShingleStats) -> dict[str, Any]:
    return {**shingle_dict(r.shingle), "counters": r.counters}
