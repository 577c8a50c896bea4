"""``pochta serve``: the HTTP API and SMTP/LMTP until SIGTERM or Ctrl-C."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Annotated

import typer
import uvicorn

from pochta.app import service_token, token_file
from pochta.cli.common import ConfigOpt, DataOpt, err, handles_errors, settings
from pochta.config import Settings
from pochta.errors import ConfigError
from pochta.server.http import create_app


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


def check_imap_ports(s: Settings) -> None:
    """The same for the IMAP port."""
    if s.imap.enabled and s.imap.port:
        listen(s.imap.host, s.imap.port, "IMAP", "imap.port").close()


@handles_errors
def serve(
    host: Annotated[str | None, typer.Option(help="HTTP address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default 8025)")] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
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
    check_smtp_ports(s)
    check_imap_ports(s)
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
    if s.imap.enabled:
        err.print(f"        IMAP {s.imap.host}:{s.imap.port}")
    uv_config = uvicorn.Config(
        create_app(s),
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
