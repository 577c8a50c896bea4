"""What every command shares: --data / --config / --json, opening pochta, output, exit codes."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from pochta import errors
from pochta.app import Pochta, build
from pochta.config import Settings, load_settings, log_renamed, source_of

P = ParamSpec("P")
R = TypeVar("R")

# lines of text are never wrapped (tables still fit the terminal): a path or a setting in a
# message stays one piece to copy and to grep
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DataOpt = Annotated[
    Path | None,
    typer.Option("--data", help="data directory (default: ./pochta-data or settings)"),
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="settings file (default: ./pochta.toml)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]

EXIT_CODES: list[tuple[type[errors.PochtaError], int]] = [
    (errors.InvalidInput, 2),
    (errors.NotFound, 3),
    (errors.IntegrityError, 4),
    (errors.StorageError, 5),
    (errors.ConfigError, 6),
    (errors.AuthError, 7),
    (errors.PochtaError, 1),
]
"""Exit codes: 0 ok, 1 other failure, 2 bad input (also usage errors), 3 not found,
4 integrity (stored bytes differ), 5 storage (disk, pair, database), 6 configuration,
7 authentication."""


def exit_code(exc: errors.PochtaError) -> int:
    return next(code for cls, code in EXIT_CODES if isinstance(exc, cls))


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn pochta's errors into one line on stderr (JSON with --json) and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except errors.PochtaError as exc:
            if kwargs.get("json_output"):
                print(json.dumps({"error": exc.code, "message": exc.message}), file=sys.stderr)
            else:
                err.print(f"[bold red]error:[/] {exc.message}", soft_wrap=True)
            raise typer.Exit(exit_code(exc)) from None

    return wrapper


def settings(
    data: Path | None, config: Path | None, *, announce: bool = True, **overrides: Any
) -> Settings:
    """The settings of a command. ``announce``: log at once the deprecated names it was given
    (``serve`` logs them itself, once its log is set up)."""
    s = load_settings(config, data_dir=data, **overrides)
    if announce:
        log_renamed()
    return s


def existing_data_dir(s: Settings, data: Path | None, config: Path | None) -> None:
    """Only ``pochta init`` and ``pochta serve`` create a data directory; every other command
    refuses a missing one, saying where it looked and why there."""
    if s.data_dir.is_dir():
        return
    where = "--data" if data is not None else source_of(("data_dir",), config)
    raise errors.ConfigError(
        f"no data directory at {s.data_dir.resolve()} (data_dir from {where}); "
        "create one with `pochta init` or `pochta serve`, or point --data at one"
    )


@contextmanager
def opened(data: Path | None, config: Path | None) -> Iterator[Pochta]:
    """pochta's services for one command, closed after it; the data directory must exist. A
    command works in the foreground: no background thread is started (``Pochta.start`` is
    for ``pochta serve``), so buffered shingle counts are written at the close."""
    s = settings(data, config)
    existing_data_dir(s, data, config)
    pochta = build(s)
    try:
        yield pochta
    finally:
        pochta.close()


def emit(json_output: bool, payload: dict[str, Any] | list[Any], human: Callable[[], None]) -> None:
    if json_output:
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        human()
