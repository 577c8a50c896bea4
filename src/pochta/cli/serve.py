"""``pochta serve``: the HTTP API and SMTP/LMTP until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pochta import logs, metrics
from pochta.app import connection_gate, server_tls, service_token, token_file
from pochta.cli.common import ConfigOpt, DataOpt, handles_errors, settings
from pochta.config import HttpSettings, Settings, log_renamed
from pochta.cpupool import cores
from pochta.errors import ConfigError
from pochta.netaddr import parse_networks
from pochta.tls import ServerTLS

# the server's modules (uvicorn, FastAPI, the web pages, SMTP, IMAP: ~0.6 s of CPU to import)
# are imported by `serve` itself, not by every other command that imports this module
if TYPE_CHECKING:
    from pochta.server.connections import Doorman

log = logging.getLogger("pochta.serve")


def _server_class() -> type[Any]:
    """uvicorn's Server, which re-raises SIGTERM/SIGINT after its graceful shutdown, so the
    process would die by the signal; pochta's finishes the shutdown and exits 0 instead."""
    import uvicorn

    class _Server(uvicorn.Server):
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

    return _Server


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
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            min=1,
            max=64,
            show_default="1",
            help="server processes behind the same ports (one per core delivers on every core)",
        ),
    ] = None,
    workers: Annotated[  # the old name of --processes (issue 31), deprecated
        int | None, typer.Option("--workers", min=1, max=64, hidden=True)
    ] = None,
    listen_fds: Annotated[str | None, typer.Option("--listen-fds", hidden=True)] = None,
) -> None:
    """Run the HTTP API and the SMTP/LMTP listeners until SIGTERM or Ctrl-C; stops cleanly."""
    s = settings(data, config, announce=False)  # once the log is set up, below
    http = s.http.model_copy(
        update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    )
    s = s.model_copy(update={"http": http})
    try:
        s.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create data directory {s.data_dir}: {exc.strerror}") from None
    service_token(s)
    level = s.log.level or s.log_level
    if listen_fds is not None:  # one process of `serve --processes N`: its sockets are handed over
        from pochta.server.supervisor import inherited

        # the metrics directory is the supervisor's (inherited in the environment)
        logs.configure(level, s.log.format)
        logs.redact(service_token(s))
        handed = inherited(listen_fds)
        _run(s, handed.pop("http"), handed, server_tls(s), level)
        return
    if processes is None:
        processes = 1 if workers is None else workers  # --processes wins, as for settings
    if processes > 1:
        raise typer.Exit(_supervise(s, config, processes, level, old_option=workers is not None))
    check_smtp_ports(s)
    check_imap_ports(s)
    metrics.use_directory(s.data_dir)  # before any metric exists and any process starts
    tls = server_tls(s)
    https = tls is not None and s.tls.https
    sock = listen(http.host, http.port, "HTTP", "http.port or --port")
    logs.configure(level, s.log.format)
    logs.redact(service_token(s))
    # in the log's format (a JSON line for shippers, like every other line)
    _deprecated(old_option=workers is not None)
    if s.service_token is None:
        log.info("service token: in %s", token_file(s))
    scheme = "https" if https else "http"
    log.info("pochta: %s://%s:%d  data: %s", scheme, http.host, http.port, s.data_dir.resolve())
    if s.smtp.enabled:
        lmtp = f", LMTP {s.smtp.host}:{s.smtp.lmtp_port}" if s.smtp.lmtp_port else ""
        starttls = " (STARTTLS)" if tls is not None and s.tls.smtp else ""
        log.info("SMTP %s:%d%s%s", s.smtp.host, s.smtp.port, starttls, lmtp)
    if s.imap.enabled:
        secure = ""
        if tls is not None:
            secure = " (STARTTLS" + (f", IMAPS {s.imap.tls_port}" if s.imap.tls_port else "") + ")"
        log.info("IMAP %s:%d%s", s.imap.host, s.imap.port, secure)
    _run(s, sock, None, tls, level)


def http_protocol(doorman: Doorman, http: HttpSettings) -> type[asyncio.Protocol]:
    """The HTTP protocol class of ``http.parser``, governed by ``doorman``."""
    from pochta.server.connections import governed_h11, governed_httptools

    proxies = parse_networks(http.trusted_proxies)
    if http.parser == "h11":  # h11 bounds the head itself (h11_max_incomplete_event_size)
        return governed_h11(doorman, proxies, header_timeout=http.header_timeout)
    return governed_httptools(
        doorman, proxies, header_timeout=http.header_timeout, max_header_size=http.max_header_size
    )


def _run(
    s: Settings,
    sock: socket.socket,
    sockets: dict[str, socket.socket] | None,
    tls: ServerTLS | None,
    level: str,
) -> None:
    """uvicorn on ``sock`` until SIGTERM; the SMTP/LMTP listeners on ``sockets`` if given.
    Every listener asks one doorman (the connection limits) for each connection."""
    import uvicorn

    from pochta.server.connections import Doorman
    from pochta.server.http import create_app

    http = s.http
    https = tls is not None and s.tls.https
    doorman = Doorman(connection_gate(s))
    uv_config = uvicorn.Config(
        create_app(s, sockets, tls=tls, doorman=doorman),
        host=http.host,
        port=http.port,
        log_level=level,
        log_config=None,  # uvicorn's lines go through pochta's handler (pochta.logs)
        # HTTPS with pochta's certificate, reloaded on SIGHUP like SMTP's (no restart)
        ssl_context_factory=(lambda _config, _default: tls.context) if https and tls else None,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # pochta's subclass of uvicorn's httptools (or h11) protocol asks the doorman for each
        # connection and bounds the request line and headers
        http=http_protocol(doorman, http),
        # X-Forwarded-For / -Proto believed from these only (the client's address, https)
        proxy_headers=bool(http.trusted_proxies),
        forwarded_allow_ips=http.trusted_proxies or None,
        h11_max_incomplete_event_size=s.http.max_header_size,
    )
    try:
        with sock:
            _server_class()(uv_config).run(sockets=[sock])
    finally:
        doorman.close()


def _deprecated(*, old_option: bool) -> None:
    """Log the old names this command was given (settings and ``--workers``), once."""
    log_renamed()
    if old_option:
        log.warning("option --workers is deprecated: it is --processes now")


def _supervise(
    s: Settings, config: Path | None, processes: int, level: str, *, old_option: bool
) -> int:
    """``serve --processes N``: bind every listener N times, start N server processes,
    supervise them (see ``pochta.server.supervisor``). The exit code."""
    from pochta.server.supervisor import Address, Supervisor, bind_all, fds_arg

    http = s.http
    addresses = [Address("http", http.host, http.port, "http.port or --port")]
    if s.smtp.enabled:
        addresses.append(Address("smtp", s.smtp.host, s.smtp.port, "smtp.port"))
        if s.smtp.lmtp_port:
            addresses.append(Address("lmtp", s.smtp.host, s.smtp.lmtp_port, "smtp.lmtp_port"))
    if s.imap.enabled:
        addresses.append(Address("imap", s.imap.host, s.imap.port, "imap.port"))
        if s.imap.tls_port and s.tls.enabled:
            addresses.append(Address("imaps", s.imap.host, s.imap.tls_port, "imap.tls_port"))
    sets = bind_all(addresses, processes)
    server_tls(s)  # a certificate that cannot be used stops the parent, not N processes
    metrics.use_directory(s.data_dir)  # the processes inherit it: one scrape adds them all up
    logs.configure(level, s.log.format)
    logs.redact(service_token(s))
    _deprecated(old_option=old_option)
    if s.service_token is None:
        log.info("service token: in %s", token_file(s))
    ports = ", ".join(f"{a.name.upper()} {a.host}:{a.port}" for a in addresses)
    log.info("pochta: %d processes on %s  data: %s", processes, ports, s.data_dir.resolve())
    if s.antispam.pool_processes is None:  # the cores are shared: each server gets its part
        os.environ["POCHTA_ANTISPAM__POOL_PROCESSES"] = str(max(1, cores() // processes))
    base = [sys.executable, "-m", "pochta", "serve", "--data", str(s.data_dir)]
    base += ["--host", http.host, "--port", str(http.port)]
    if config is not None:
        base += ["--config", str(config)]
    return Supervisor(
        sets,
        lambda sockets: [*base, "--listen-fds", fds_arg(sockets)],
        on_exit=metrics.process_exited,
    ).run()
