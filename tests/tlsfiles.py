"""Certificates for tests, as an operator makes them with ``pochta tls ca`` and ``pochta tls
cert`` (the same functions, in this process): one CA per test installation, and per machine a
directory ``ca.pem``, ``cert.pem``, ``key.pem`` (what README's recipe puts in
``/etc/pochta/tls``).

    ca = TestCA.create(tmp / "ca")
    files = ca.issue(tmp / "node1-tls", ["127.0.0.1"])   # files.cert, files.key, files.ca
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pochta.tls import new_ca, signed


@dataclass(frozen=True)
class TLSFiles:
    """One machine's files: its certificate and key, and the CA that it trusts."""

    ca: Path
    cert: Path
    key: Path


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)


@dataclass(frozen=True)
class TestCA:
    """A CA's certificate and key on disk (``ca.pem``, ``ca-key.pem``)."""

    __test__ = False  # not a pytest class

    cert: Path
    key: Path

    @classmethod
    def create(cls, directory: Path, name: str = "pochta test CA") -> TestCA:
        cert, key = new_ca(name, days=30)
        ca = cls(directory / "ca.pem", directory / "ca-key.pem")
        _write(ca.key, key, 0o600)
        _write(ca.cert, cert)
        return ca

    def issue(self, directory: Path, hosts: list[str]) -> TLSFiles:
        """``directory``/cert.pem + key.pem for ``hosts``, signed by this CA, and ca.pem."""
        cert, key = signed(hosts, self.cert.read_bytes(), self.key.read_bytes(), days=30)
        files = TLSFiles(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
        _write(files.key, key, 0o600)
        _write(files.cert, cert)
        _write(files.ca, self.cert.read_bytes())
        return files
