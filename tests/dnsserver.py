"""A real DNS server for tests: Debian's ``nsd`` (authoritative only: it never asks anyone
else) serving test zones on a free loopback UDP/TCP port, in a temporary directory.

    with NsdServer.start(tmp_path, {"example.com": ZONE_TEXT}) as server:
        server.address          # "127.0.0.1:<port>", for antispam.dns_server

Names outside the zones get REFUSED. Nothing here listens on or contacts anything but
127.0.0.1.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import dns.exception
import dns.message
import dns.query
import dns.rcode

from tests.servers import HOST, LoopbackServer, on_free_port

NSD = shutil.which("nsd") or ("/usr/sbin/nsd" if Path("/usr/sbin/nsd").exists() else None)

_CONF = """\
server:
    ip-address: {host}@{port}
    port: {port}
    do-ip6: no
    server-count: 1
    tcp-count: 16
    username: ""
    chroot: ""
    zonesdir: "{dir}"
    zonelistfile: "{dir}/zone.list"
    xfrdfile: "{dir}/xfrd.state"
    xfrdir: "{dir}"
    pidfile: "{dir}/nsd.pid"
    logfile: "{dir}/nsd.log"
    database: ""
    verbosity: 1
    hide-version: yes
    reuseport: no
remote-control:
    control-enable: no
"""

_SOA = (
    "$TTL 300\n"
    "@ IN SOA ns.{zone}. hostmaster.{zone}. 1 3600 600 86400 300\n"
    "@ IN NS ns.{zone}.\n"
    "ns IN A 127.0.0.1\n"
)


def txt_rdata(value: str) -> str:
    """A TXT value as zone-file text: split into quoted strings of at most 255 bytes."""
    raw = value.encode()
    chunks = [raw[i : i + 255] for i in range(0, len(raw), 255)] or [b""]
    quoted = []
    for c in chunks:
        text = c.decode("ascii").replace("\\", "\\\\").replace('"', '\\"')
        quoted.append(f'"{text}"')
    return " ".join(quoted)


@dataclass
class NsdServer(LoopbackServer):
    what: ClassVar[str] = "nsd"
    port: int
    dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls, dir: Path, zones: Mapping[str, str], timeout: float = 20.0) -> NsdServer:
        """``zones``: zone name -> records (zone-file lines after the SOA, names relative
        to the zone or absolute with a final dot)."""
        if NSD is None:
            raise RuntimeError("nsd is not installed (apt-get install nsd)")
        dir.mkdir(parents=True, exist_ok=True)

        def make(port: int) -> NsdServer:
            server = cls(port, dir)
            conf = _CONF.format(host=HOST, port=port, dir=dir)
            for zone, body in zones.items():
                (dir / f"{zone}.zone").write_text(_SOA.format(zone=zone) + body)
                conf += f'zone:\n    name: "{zone}"\n    zonefile: "{zone}.zone"\n'
            (dir / "nsd.conf").write_text(conf)
            first = next(iter(zones))
            assert NSD is not None
            server._launch(
                [NSD, "-d", "-c", str(dir / "nsd.conf")], lambda: server._answers(first), timeout
            )
            return server

        return on_free_port(make)

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log(self) -> Path:
        return self.dir / "nsd.log"

    def _answers(self, zone: str) -> bool:
        query = dns.message.make_query(zone, "SOA")
        try:
            reply = dns.query.udp(query, HOST, timeout=0.3, port=self.port)
        except (dns.exception.Timeout, OSError):
            return False
        return reply.rcode() == dns.rcode.NOERROR and bool(reply.answer)


def silent_udp_port() -> tuple[socket.socket, int]:
    """A bound loopback UDP socket that never answers: questions sent there time out."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((HOST, 0))
    return sock, sock.getsockname()[1]
