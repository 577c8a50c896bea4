"""``pochta serve`` as a real process: the blob API over TCP, clean stops, torn uploads."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import TOKEN, Server, free_port, start_server

pytestmark = pytest.mark.integration


def chunks(data: bytes, size: int = 65_536) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def disk_files(data: Path) -> list[Path]:
    return sorted(p for p in (data / "disks").rglob("*") if p.is_file())


def test_streamed_upload_and_download(server: Server) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    key = hashlib.sha256(data).hexdigest()
    with httpx.Client(base_url=server.url, headers=server.auth, timeout=30) as c:
        r = c.put(f"/v1/blobs/{key}", params={"magic": 345}, content=chunks(data))
        assert r.status_code == 201, r.text
        assert r.json()["size"] == len(data)
        with c.stream("GET", f"/v1/blobs/{key}") as resp:
            assert resp.status_code == 200
            got = b"".join(resp.iter_bytes())
        assert got == data
        r = c.get(f"/v1/blobs/{key}", headers={"Range": "bytes=1048576-1048585"})
        assert (r.status_code, r.content) == (206, data[1048576:1048586])
    names = [p.name for p in disk_files(server.data)]
    assert names == [key, key]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stops_cleanly_and_keeps_data(server: Server, tmp_path: Path, sig: int) -> None:
    data = os.urandom(10_000)
    key = hashlib.sha256(data).hexdigest()
    r = httpx.put(
        f"{server.url}/v1/blobs/{key}", params={"magic": 1}, content=data, headers=server.auth
    )
    assert r.status_code == 201
    assert server.stop(sig) == 0
    log = server.log.read_text()
    assert "Application shutdown complete" in log
    assert "Traceback" not in log
    again = start_server(server.data, tmp_path / "again.log")
    try:
        r = httpx.get(f"{again.url}/v1/blobs/{key}", headers=again.auth)
        assert r.content == data
    finally:
        assert again.stop() == 0


def test_client_disconnect_mid_upload_leaves_nothing(server: Server) -> None:
    key = "ab" * 32
    head = (
        f"PUT /v1/blobs/{key}?magic=7 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {8 * 1024 * 1024}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(head + os.urandom(2 * 1024 * 1024))
        time.sleep(0.3)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and disk_files(server.data):
        time.sleep(0.1)
    assert disk_files(server.data) == []
    r = httpx.get(f"{server.url}/v1/blobs/{key}/stat", headers=server.auth)
    assert r.status_code == 404
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_concurrent_uploads_of_one_file_make_one_record(server: Server) -> None:
    data = os.urandom(512 * 1024)
    key = hashlib.sha256(data).hexdigest()

    def upload(magic: int) -> int:
        r = httpx.put(
            f"{server.url}/v1/blobs/{key}",
            params={"magic": magic},
            content=data,
            headers=server.auth,
            timeout=30,
        )
        assert r.status_code == 201, r.text
        return magic

    magics = list(range(1, 17))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(upload, magics))
    record = httpx.get(f"{server.url}/v1/blobs/{key}/stat", headers=server.auth).json()
    assert record["counter"] == len(magics)
    assert record["magic"] == sum(magics) % 2**32
    assert [p.name for p in disk_files(server.data)] == [key, key]
    assert httpx.get(f"{server.url}/v1/blobs/{key}", headers=server.auth).content == data


def test_cli_and_server_share_one_store(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "file.bin"
    path.write_bytes(os.urandom(50_000))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pochta",
            "blob",
            "put",
            str(path),
            "--magic",
            "11",
            "--data",
            str(server.data),
            "--json",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    key = json.loads(out.stdout)["key"]
    r = httpx.post(f"{server.url}/v1/blobs/{key}/inc", json={"magic": 22}, headers=server.auth)
    assert (r.status_code, r.json()["counter"], r.json()["magic"]) == (200, 2, 33)
    bad = subprocess.run(
        [sys.executable, "-m", "pochta", "blob", "stat", "nothex", "--data", str(server.data)],
        capture_output=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert b"malformed key" in bad.stderr
    assert b"Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("which", "setting"),
    [
        ("HTTP", "http.port"),
        ("SMTP", "smtp.port"),
        ("LMTP", "smtp.lmtp_port"),
        ("IMAP", "imap.port"),
    ],
)
def test_a_port_in_use_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, which: str, setting: str
) -> None:
    ports = {"HTTP": free_port(), "SMTP": free_port(), "LMTP": free_port(), "IMAP": free_port()}
    with socket.create_server(("127.0.0.1", 0)) as taken:
        ports[which] = taken.getsockname()[1]
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pochta", "serve"),
                *("--port", str(ports["HTTP"]), "--data", str(tmp_path / "data")),
            ],
            env={
                **os.environ,
                "POCHTA_SMTP__PORT": str(ports["SMTP"]),
                "POCHTA_SMTP__LMTP_PORT": str(ports["LMTP"]),
                "POCHTA_IMAP__PORT": str(ports["IMAP"]),
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 6
    assert done.stderr.splitlines() == [
        f"error: cannot listen for {which} on 127.0.0.1:{ports[which]}: Address already in use"
        f" (set {setting}{' or --port' if which == 'HTTP' else ''})"
    ], done.stderr
