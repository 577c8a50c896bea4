"""``pochta init``: create a data directory (the only command besides ``serve`` that does)."""

from __future__ import annotations

from pochta.app import build, service_token, token_file
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, out, settings
from pochta.errors import ConfigError


@handles_errors
def init(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """Create the data directory with its databases, a pair of two local disks and the
    service token; an existing one is left as it is."""
    s = settings(data, config)
    path = s.data_dir.resolve()
    existed = path.is_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create data directory {path}: {exc.strerror}") from None
    build(s).close()
    service_token(s)
    token = None if s.service_token is not None else str(token_file(s).resolve())

    def human() -> None:
        out.print(f"data directory {path} {'already there' if existed else 'created'}")
        if token:
            out.print(f"service token: in {token}")

    emit(json_output, {"data_dir": str(path), "created": not existed, "token_file": token}, human)
