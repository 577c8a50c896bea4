"""Storage nodes: where a disk's bytes live. ``local`` is a directory on this machine;
``https://node:port`` (``http://`` for embedded and test setups) is a WebDAV node (nginx with
the dav module)."""

from __future__ import annotations

import ssl
from pathlib import Path

from pochta.blobs.nodes.client import NodeClients, NodeTimeouts
from pochta.blobs.nodes.local import LocalDisk
from pochta.blobs.nodes.webdav import FREE_MAX_AGE, WebDAVDisk
from pochta.errors import ConfigError
from pochta.types import Disk, DiskSpec


class DiskFactory:
    """Opens the Disk of a spec (the only place that maps node kinds); the WebDAV disks of
    one node share its pool of connections, ``https://`` nodes are reached with ``tls``
    (:func:`pochta.blobs.nodes.client.client_context`). ``close`` closes the pools."""

    def __init__(
        self,
        timeouts: NodeTimeouts | None = None,
        *,
        free_max_age: float = FREE_MAX_AGE,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.clients = NodeClients(timeouts, tls)
        self.free_max_age = free_max_age

    def __call__(self, spec: DiskSpec) -> Disk:
        if spec.node == "local":
            return LocalDisk(Path(spec.root), spec=spec)
        if spec.node.startswith(("http://", "https://")):
            client = self.clients.get(spec.node)
            return WebDAVDisk(spec, client, free_max_age=self.free_max_age)
        raise ConfigError(f"unsupported storage node {spec.node!r} for disk {spec}")

    def close(self) -> None:
        self.clients.close()
