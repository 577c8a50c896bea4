"""``pochta serve``: the HTTP API and SMTP/LMTP until SIGTERM or Ctrl-C."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from pochta.app import service_token, token_file
from pochta.cli.common import ConfigOpt, DataOpt, err, handles_errors, settings
from pochta.config import Settings
from pochta.errors import ConfigError
from pochta.server.http import create_app
from pochta.server.supervisor import Address, Supervisor, bind_all, fds_arg, inherited
from pochta.workers import cores


class _Server(uvicorn.Server):
    """uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown, so the process would die
    by the signal; pochta finishes the shutdown and exits 0 instead."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        sigs = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in sigs}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def listen(host: str, port: int, what: str, setting: str) -> socket.socket:
    """A listening socket on host:port (as uvicorn and asyncio make theirs: SO_REUSEADDR), or
    a ConfigError in one line when the address is taken or cannot be had."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        gai = isinstance(exc, socket.gaierror)
        reason = os.strerror(exc.errno) if exc.errno and not gai else str(exc)
        message = f"cannot listen for {what} on {host}:{port}: {reason} (set {setting})"
        raise ConfigError(message) from None


def check_smtp_ports(s: Settings) -> None:
    """Refuse to start when the SMTP or LMTP port is taken, before anything starts (the
    listeners themselves open later, inside the application's startup)."""
    if not s.smtp.enabled:
        return
    ports = [(s.smtp.port, "SMTP", "smtp.port")]
    if s.smtp.lmtp_port:
        ports.append((s.smtp.lmtp_port, "LMTP", "smtp.lmtp_port"))
    for port, what, setting in ports:
        if port:
            listen(s.smtp.host, port, what, setting).close()


@handles_errors
def serve(
    host: Annotated[str | None, typer.Option(help="HTTP address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default 8025)")] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="server processes behind the same ports (one per core delivers on every core)",
        ),
    ] = 1,
    listen_fds: Annotated[str | None, typer.Option("--listen-fds", hidden=True)] = None,
) -> None:
    """Run the HTTP API and the SMTP/LMTP listeners until SIGTERM or Ctrl-C; stops cleanly."""
    s = settings(data, config)
    http = s.http.model_copy(
        update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    )
    s = s.model_copy(update={"http": http})
    try:
        s.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create data directory {s.data_dir}: {exc.strerror}") from None
    service_token(s)
    if listen_fds is not None:  # one worker of `serve --workers N`: its sockets are handed over
        handed = inherited(listen_fds)
        logging.basicConfig(level=s.log_level.upper(), format=WORKER_LOG_FORMAT)
        _run(s, handed.pop("http"), handed)
        return
    if workers > 1:
        raise typer.Exit(_supervise(s, config, workers))
    check_smtp_ports(s)
    sock = listen(http.host, http.port, "HTTP", "http.port or --port")
    logging.basicConfig(
        level=s.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    if s.service_token is None:
        err.print(f"service token: in {token_file(s)}")
    err.print(f"pochta: http://{http.host}:{http.port}  data: {s.data_dir.resolve()}")
    if s.smtp.enabled:
        lmtp = f", LMTP {s.smtp.host}:{s.smtp.lmtp_port}" if s.smtp.lmtp_port else ""
        err.print(f"        SMTP {s.smtp.host}:{s.smtp.port}{lmtp}")
    _run(s, sock)


def _run(s: Settings, sock: socket.socket, sockets: dict[str, socket.socket] | None = None) -> None:
    """uvicorn on ``sock`` until SIGTERM; the SMTP/LMTP listeners on ``sockets`` if given."""
    http = s.http
    uv_config = uvicorn.Config(
        create_app(s, sockets),
        host=http.host,
        port=http.port,
        log_level=s.log_level,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # h11 bounds the request line and headers (httptools has no such limit)
        http="h11",
        h11_max_incomplete_event_size=s.http.max_header_size,
    )
    with sock:
        _Server(uv_config).run(sockets=[sock])


WORKER_LOG_FORMAT = "%(asctime)s [%(process)d] %(levelname)s %(name)s %(message)s"


def _supervise(s: Settings, config: Path | None, workers: int) -> int:
    """``serve --workers N``: bind every listener N times, start N workers, supervise them
    (see ``pochta.server.supervisor``). The exit code."""
    http = s.http
    addresses = [Address("http", http.host, http.port, "http.port or --port")]
    if s.smtp.enabled:
        addresses.append(Address("smtp", s.smtp.host, s.smtp.port, "smtp.port"))
        if s.smtp.lmtp_port:
            addresses.append(Address("lmtp", s.smtp.host, s.smtp.lmtp_port, "smtp.lmtp_port"))
    sets = bind_all(addresses, workers)
    logging.basicConfig(level=s.log_level.upper(), format=WORKER_LOG_FORMAT)
    if s.service_token is None:
        err.print(f"service token: in {token_file(s)}")
    ports = ", ".join(f"{a.name.upper()} {a.host}:{a.port}" for a in addresses)
    err.print(f"pochta: {workers} workers on {ports}  data: {s.data_dir.resolve()}")
    if s.antispam.workers is None:  # the cores are shared: each server gets its part
        os.environ["POCHTA_ANTISPAM__WORKERS"] = str(max(1, cores() // workers))
    base = [sys.executable, "-m", "pochta", "serve", "--data", str(s.data_dir)]
    base += ["--host", http.host, "--port", str(http.port)]
    if config is not None:
        base += ["--config", str(config)]
    return Supervisor(sets, lambda sockets: [*base, "--listen-fds", fds_arg(sockets)]).run()
