"""HTTP to one storage node: a pool of keep-alive connections (urllib3), timeouts, and the
one place where a node's failures become pochta's errors.

urllib3 rather than httpx (both maintained, both pool keep-alive connections and take
connect/read timeouts): measured straight against nginx from one thread
(``benchmarks/webdav_put.py``), urllib3 made 1.9x the 64 KB PUTs and 1.6x the 64 KB GETs per
second, and streamed a 10 MB GET 2.3x faster; httpx sent a 10 MB PUT 1.26x faster. A loader
makes mostly small requests (a probe PUT and DELETE, a MOVE, per copy) and reads in 1 MiB
chunks, and the node speaks plain HTTP/1.1, so httpx's extra layers buy nothing here.

Every connection failure (refused, reset, a timeout, a TLS handshake refused) and every 5xx
answer is a ``DiskError``: the loader then places the file on another pair, and a read goes to
the sibling disk.

An ``https://`` node is reached over TLS with one ``ssl.SSLContext`` for every node
(:func:`client_context`, built once at start from ``[blobs] node_ca_file``, ``node_cert_file``,
``node_key_file``): the CA that signs the nodes' certificates, and this machine's client
certificate, which nodes with ``ssl_verify_client on`` require. ``http://`` nodes (embedded
and test setups) are plain HTTP.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, urlsplit

import urllib3
from urllib3.exceptions import HTTPError
from urllib3.util import Timeout

from pochta.errors import ConfigError, DiskError, InvalidInput
from pochta.types import DiskSpec

OK = frozenset({200, 201, 204, 206})


@dataclass(frozen=True, slots=True)
class NodeTimeouts:
    """How long a node may take: to accept a connection, and between two bytes of a request
    or an answer (a stalled node fails instead of hanging a delivery)."""

    connect: float = 2.0
    read: float = 30.0
    pool_size: int = 16  # keep-alive connections kept per node


def client_context(
    ca_file: Path | None = None, cert_file: Path | None = None, key_file: Path | None = None
) -> ssl.SSLContext:
    """The TLS context of requests to ``https://`` nodes: their certificates must chain to
    ``ca_file`` (unset: the system's CAs) and name the node's host; ``cert_file`` and
    ``key_file`` (PEM; both or neither) are shown to nodes that ask for a client certificate.
    The files are read here, once: ConfigError naming the setting when one cannot be used."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"blobs.node_ca_file: cannot use {ca_file}: {_tls_why(exc)}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if (cert_file is None) != (key_file is None):
        raise ConfigError("blobs.node_cert_file and node_key_file are set together (or neither)")
    if cert_file is not None and key_file is not None:
        try:
            ctx.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"blobs.node_cert_file / node_key_file: cannot use {cert_file} with {key_file}:"
                f" {_tls_why(exc)}"
            ) from None
    return ctx


def _tls_why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
    return str(exc)


def parse_node_url(text: str) -> DiskSpec:
    """``http://node:port/root`` as a disk: the node's base URL and the root path on it.
    InvalidInput for anything else (another scheme, no host, no root, a query, ``..``)."""
    try:
        url = urlsplit(text.strip())
        port = url.port
    except ValueError as exc:
        raise InvalidInput(f"{text!r} is not a WebDAV disk URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.hostname:
        raise InvalidInput(f"{text!r} is not a WebDAV disk URL: use http://node:port/root")
    if url.query or url.fragment or url.username or url.password:
        raise InvalidInput(f"{text!r}: a disk URL has no query, fragment or credentials")
    parts = [p for p in url.path.split("/") if p]
    if not parts:
        raise InvalidInput(f"{text!r} names no root: use http://node:port/root")
    if any(p in (".", "..") for p in parts):
        raise InvalidInput(f"{text!r}: a disk's root has no '.' or '..' segments")
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    node = f"{url.scheme}://{host}" + (f":{port}" if port is not None else "")
    return DiskSpec(node, "/".join(parts))


class NodeClient:
    """Requests to one node (``scheme://host:port``), over pooled keep-alive connections
    (``tls``: the context of an ``https://`` node; None: the system's CAs, no client
    certificate). Thread-safe; one per node is shared by every disk on it."""

    def __init__(
        self,
        node: str,
        timeouts: NodeTimeouts | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.node = node
        self.timeouts = timeouts or NodeTimeouts()
        t = self.timeouts
        https = {"ssl_context": tls} if tls is not None and node.startswith("https://") else {}
        self._pool = urllib3.connection_from_url(
            node,
            **https,
            maxsize=t.pool_size,
            block=False,  # a burst opens extra connections rather than waiting for one
            timeout=Timeout(connect=t.connect, read=t.read),
            # no retries: a node that refuses or stalls is another pair's or the sibling's
            # turn at once (a pooled connection the node has closed is noticed before use)
            retries=False,
        )

    def url(self, path: str) -> str:
        """The request path for a path on the node (segments quoted)."""
        return "/" + quote(path.lstrip("/"), safe="/")

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        what: str = "",
    ) -> urllib3.BaseHTTPResponse:
        """One request; with ``stream`` the answer's body is left to read (``release``).
        A body that is an iterable goes chunked. DiskError when the node cannot be reached or
        fails on the way; the status is the caller's to judge."""
        chunked = body is not None and not isinstance(body, bytes)
        try:
            return self._pool.urlopen(
                method,
                self.url(path),
                body=body,
                headers=dict(headers or {}),
                chunked=chunked,
                preload_content=not stream,
                redirect=False,
            )
        except HTTPError as exc:
            raise self.error(what or f"{method} {path}", exc) from exc

    def error(self, what: str, exc: BaseException) -> DiskError:
        reason = getattr(exc, "reason", None) or exc
        return DiskError(f"node {self.node}: {what} failed: {_short(reason)}")

    def close(self) -> None:
        self._pool.close()


def _short(exc: object) -> str:
    text = str(exc)
    # urllib3 repeats the pool and the URL in every message; the node is named already
    if "Caused by " in text:
        text = text.split("Caused by ", 1)[1]
    return text.strip("()") or type(exc).__name__


def status_error(
    node: str, what: str, response: urllib3.BaseHTTPResponse, hint: str = ""
) -> DiskError:
    """A node's answer that is not what the request needed, as a DiskError."""
    status = response.status
    if status == 507:
        reason = "the node's disk is full"
    elif status == 405:
        reason = "method not allowed (is `dav_methods PUT DELETE MOVE` on for this location?)"
    elif status == 413:
        reason = "too large for the node (raise its client_max_body_size; 0 = no limit)"
    elif status == 400 and node.startswith("https://"):
        reason = (
            "HTTP 400 Bad Request (nginx's answer to a request without an accepted client"
            " certificate: set blobs.node_cert_file and node_key_file to a certificate signed"
            " by the CA in the node's ssl_client_certificate)"
        )
    else:
        reason = f"HTTP {status} {response.reason or ''}".strip()
    return DiskError(f"node {node}: {what}: {reason}{hint}")


class NodeClients:
    """One ``NodeClient`` per node, made on first use, all with the same timeouts and TLS
    context; ``close`` closes them all."""

    def __init__(
        self, timeouts: NodeTimeouts | None = None, tls: ssl.SSLContext | None = None
    ) -> None:
        self.timeouts = timeouts or NodeTimeouts()
        self.tls = tls
        self._clients: dict[str, NodeClient] = {}
        self._lock = threading.Lock()

    def get(self, node: str) -> NodeClient:
        with self._lock:
            client = self._clients.get(node)
            if client is None:
                client = self._clients[node] = NodeClient(node, self.timeouts, self.tls)
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> NodeClients:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
