"""The blob store on WebDAV storage nodes: real nginx processes (one per node), pairs of disks
on two nodes each, the loader's PUT + MOVE, reads with the sibling as fallback; a node that
is stopped or stalls is a DiskError, so placement picks another pair and a read goes to the
other copy; ``pochta pairs add http://...``; Valkyrie on the storage host against the
directory behind its nginx, repairing the sibling's copy over WebDAV.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import ssl
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import urllib3
from typer.testing import CliRunner

from pochta.blobs.filedb.memory import MemoryFileDB
from pochta.blobs.keys import blob_path, key_of, master_index
from pochta.blobs.nodes import DiskFactory
from pochta.blobs.nodes.client import NodeTimeouts, client_context, parse_node_url
from pochta.blobs.nodes.report import REPORT_NAME, write_report
from pochta.blobs.pairs.memory import MemoryPairDB
from pochta.blobs.store import BlobStore
from pochta.cli import app as pochta_app
from pochta.errors import DiskError, InvalidInput, NoWritablePair
from pochta.types import DiskSpec, Pair
from tests.nginx import NginxNode
from tests.tlsfiles import TestCA, TLSFiles

pytestmark = pytest.mark.integration

runner = CliRunner()


@dataclass
class Rig:
    nodes: list[NginxNode]
    store: BlobStore
    pairs: list[Pair]

    def directory(self, spec: DiskSpec) -> Path:
        node = next(n for n in self.nodes if n.url == spec.node)
        return node.served / spec.root


def _report(node: NginxNode, name: str) -> None:
    write_report(node.served / name)


@pytest.fixture
def rig(nginx_factory: Callable[..., NginxNode]) -> Iterator[Rig]:
    """Four nodes A B C D; pair 1 = (A/d, B/d), pair 2 = (C/d, D/d); short timeouts."""
    nodes = [nginx_factory() for _ in range(4)]
    specs = [node.disk("d") for node in nodes]
    for node in nodes:
        _report(node, "d")
    factory = DiskFactory(NodeTimeouts(connect=1.0, read=1.0))
    store = BlobStore(
        MemoryFileDB(), MemoryPairDB(), disk_factory=factory, free_refresh_seconds=0,
        rng=random.Random(7),
    )  # fmt: skip
    pairs = [store.add_pair(specs[0], specs[1]), store.add_pair(specs[2], specs[3])]
    try:
        yield Rig(nodes, store, pairs)
    finally:
        store.close()


def test_upload_writes_both_copies_and_reads_them_back(rig: Rig) -> None:
    for size in (0, 65_536, 3_000_000):  # empty, one PUT, streamed in chunks
        data = os.urandom(size)
        chunks = [data[i : i + 700_000] for i in range(0, len(data), 700_000)] or [b""]
        stored = rig.store.upload(None, 12345, chunks)
        key = stored.record.key
        assert key == key_of(data) and stored.uploaded and stored.size == size
        pair = rig.store.pairdb.get(stored.record.pair_id)
        for spec in pair.disks:  # the files, as the storage hosts see them
            assert (rig.directory(spec) / blob_path(key)).read_bytes() == data
            assert list((rig.directory(spec) / "tmp").iterdir()) == []  # no temporary left
        assert rig.store.read(key, size, zlib.crc32(data)) == data
        opened = rig.store.open(key, start=size // 3, end=size // 2)
        assert opened.size == size
        assert b"".join(opened) == data[size // 3 : size // 2]
        assert rig.store.check_copies(key, size, zlib.crc32(data)) == []
    assert [p.free[0] > 0 for p in rig.store.refresh_free(force=True)] == [True, True]


def test_a_stopped_node_sends_uploads_to_another_pair_and_reads_to_the_sibling(
    rig: Rig,
) -> None:
    before = [rig.store.upload(None, 1, [os.urandom(50_000)]) for _ in range(12)]
    on_pair1 = [s for s in before if s.record.pair_id == rig.pairs[0].id]
    assert on_pair1, "placement put nothing on pair 1 (seeded: it does)"
    rig.nodes[0].stop()  # A: the first disk of pair 1
    for _ in range(10):
        stored = rig.store.upload(None, 2, [os.urandom(80_000)])
        assert stored.record.pair_id == rig.pairs[1].id
    assert not list((rig.nodes[1].served / "d" / "tmp").iterdir())  # nothing half-written
    for s in on_pair1:  # master or not, every file of pair 1 is read from B
        key = s.record.key
        opened = rig.store.open(key)
        assert opened.disk == rig.pairs[0].disks[1]
        assert len(b"".join(opened)) == s.size
        assert rig.store.read(key, s.size, s.crc32)
    masters = {master_index(s.record.key) for s in on_pair1}
    assert masters  # some were A's to serve first
    problems = rig.store.check_copies(on_pair1[0].record.key)
    assert len(problems) == 1 and "refused" in problems[0].lower(), problems
    rig.nodes[0].start_again()
    stored = rig.store.upload(None, 3, [os.urandom(10_000)])
    assert stored.uploaded


def test_a_node_that_stalls_times_out_and_is_passed_over(rig: Rig) -> None:
    data = os.urandom(30_000)
    stored = rig.store.upload(None, 1, [data])
    pair = rig.store.pairdb.get(stored.record.pair_id)
    master = master_index(stored.record.key)
    stalled = next(n for n in rig.nodes if n.url == pair.disks[master].node)
    stalled.pause()  # the kernel accepts connections; nobody answers
    try:
        assert rig.store.read(stored.record.key, len(data), zlib.crc32(data)) == data
        for _ in range(3):
            other = rig.store.upload(None, 2, [os.urandom(20_000)])
            assert other.record.pair_id != pair.id
    finally:
        stalled.resume()


def test_every_node_down_is_no_writable_pair(rig: Rig) -> None:
    for node in rig.nodes[::2]:
        node.stop()
    with pytest.raises(NoWritablePair):
        rig.store.upload(None, 1, [b"nowhere to go"])
    for node in rig.nodes[1::2]:
        assert not list((node.served / "d" / "tmp").iterdir())


def test_free_space_comes_from_the_hosts_report(rig: Rig) -> None:
    disk = rig.store.disk(rig.pairs[0].disks[0])
    assert disk.free_bytes() > 0
    (rig.nodes[0].served / "d" / REPORT_NAME).unlink()
    with pytest.raises(DiskError, match="no free-space report"):
        disk.free_bytes()
    write_report(rig.nodes[0].served / "d")
    old = rig.nodes[0].served / "d" / REPORT_NAME
    os.utime(old, (1_600_000_000, 1_600_000_000))
    with pytest.raises(DiskError, match="old"):
        disk.free_bytes()
    # a pair whose free space is unknown takes no new files
    fresh = rig.store.refresh_free(force=True)
    assert fresh[0].free[0] == 0
    for _ in range(5):
        assert rig.store.upload(None, 1, [os.urandom(1000)]).record.pair_id == rig.pairs[1].id


def test_a_new_loader_waits_for_its_first_measure_of_free_space(
    nginx_factory: Callable[..., NginxNode],
) -> None:
    """A pair added before its hosts reported free space is recorded with none (0, 0). A
    loader's first uploads, arriving together while it measures, wait for that measurement
    instead of taking the recorded zeros: they answered "no pair can take the file" (a 451
    to the first letters after a loader started, on several machines)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    a, b = nginx_factory(), nginx_factory()
    specs = [a.disk("d"), b.disk("d")]
    pairdb = MemoryPairDB()  # shared, as PostgreSQL is between machines
    factory = DiskFactory(NodeTimeouts(connect=1.0, read=10.0))
    admin = BlobStore(MemoryFileDB(), pairdb, disk_factory=factory)
    assert admin.add_pair(*specs).free == (0, 0)  # no report yet
    for node in (a, b):
        _report(node, "d")
    loader = BlobStore(MemoryFileDB(), pairdb, disk_factory=factory, free_refresh_seconds=60)
    a.pause()  # the first measurement takes a while: the others arrive meanwhile
    resume = threading.Timer(0.5, a.resume)
    resume.start()
    try:
        with ThreadPoolExecutor(4) as pool:
            stored = list(pool.map(lambda i: loader.upload(None, 1, [os.urandom(2000)]), range(4)))
    finally:
        resume.join()
        a.resume()
        admin.close()
        loader.close()
    assert all(s.uploaded for s in stored)
    assert min(pairdb.list()[0].free) > 0  # measured, and recorded for the other loaders


def test_node_urls() -> None:
    assert parse_node_url("http://node7:8080/disk1") == DiskSpec("http://node7:8080", "disk1")
    assert parse_node_url("http://node7/a/b/") == DiskSpec("http://node7", "a/b")
    assert parse_node_url("https://[::1]:81/x") == DiskSpec("https://[::1]:81", "x")
    assert str(parse_node_url("http://n:1/d")) == "http://n:1/d"
    for bad in (
        "ftp://node/x", "http://node:8080", "http://node:8080/", "http:///x",
        "http://node/x?y=1", "http://u:p@node/x", "http://node/../x", "http://node:99999/x",
    ):  # fmt: skip
        with pytest.raises(InvalidInput):
            parse_node_url(bad)


# -- the command line: pairs add, valkyrie on the storage host ----------------------------------
def cli(data: Path, *args: str, expect: int = 0) -> str:
    result = runner.invoke(pochta_app, [*args, "--data", str(data)])
    assert "Traceback" not in result.output, result.output
    assert result.exit_code == expect, (args, result.exit_code, result.output)
    return result.stdout


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    cli(data, "init")
    return data


def test_pairs_add_takes_node_urls(data: Path, nginx_factory: Callable[..., NginxNode]) -> None:
    a, b = nginx_factory(), nginx_factory()
    a.disk("disk1"), b.disk("disk1")
    added = json.loads(cli(data, "pairs", "add", f"{a.url}/disk1", f"{b.url}/disk1/", "--json"))
    assert [d["node"] for d in added["disks"]] == [a.url, b.url]
    assert [d["root"] for d in added["disks"]] == ["disk1", "disk1"]
    listed = json.loads(cli(data, "pairs", "list", "--json"))
    assert [str(d["node"]) + "/" + d["root"] for d in listed[-1]["disks"]] == [
        f"{a.url}/disk1",
        f"{b.url}/disk1",
    ]
    out = runner.invoke(
        pochta_app, ["pairs", "add", "ftp://x/y", str(data / "z"), "--data", str(data)]
    )
    assert out.exit_code == 2 and "WebDAV disk URL" in out.output
    a.stop()  # a node that does not answer cannot join a pair
    out = runner.invoke(
        pochta_app, ["pairs", "add", f"{a.url}/disk2", f"{b.url}/disk2", "--data", str(data)]
    )
    assert out.exit_code == 5 and "refused" in out.output.lower(), out.output


def test_valkyrie_on_the_storage_host_repairs_the_sibling_over_webdav(
    data: Path, nginx_factory: Callable[..., NginxNode], tmp_path: Path
) -> None:
    a, b = nginx_factory(), nginx_factory()
    a.disk("disk1"), b.disk("disk1")
    pair = json.loads(cli(data, "pairs", "add", f"{a.url}/disk1", f"{b.url}/disk1", "--json"))
    cli(data, "pairs", "set-flags", "1", "readonly")  # the default local pair takes nothing
    write_report(a.served / "disk1")
    write_report(b.served / "disk1")
    content = tmp_path / "file.bin"
    content.write_bytes(os.urandom(200_000))
    put = json.loads(cli(data, "blob", "put", str(content), "--json"))
    assert put["pair"] == pair["id"]
    key = put["key"]
    lost = b.served / "disk1" / blob_path(key)
    lost.unlink()  # node B lost its copy
    (b.served / "disk1" / REPORT_NAME).unlink()
    # on host A: the directory behind http://A/disk1, scrubbed locally
    report = json.loads(
        cli(data, "valkyrie", "run", "--disk", str(a.served / "disk1"), "--once", "--json")
    )
    [disk] = report["disks"]
    assert disk["disk"] == f"{a.url}/disk1"
    assert (disk["verified"], disk["repaired"], disk["errors"]) == (1, 1, 0)
    assert lost.read_bytes() == content.read_bytes()  # recreated on B over WebDAV
    assert (a.served / "disk1" / REPORT_NAME).is_file()  # A's host reported its free space
    assert not list((a.served / "disk1" / "tmp").iterdir())  # the marker file is gone
    # a directory that no registered disk serves is refused before anything runs
    stray = tmp_path / "elsewhere"
    stray.mkdir()
    out = runner.invoke(
        pochta_app, ["valkyrie", "run", "--disk", str(stray), "--once", "--data", str(data)]
    )
    assert out.exit_code == 2 and "no disk of a pair" in out.output, out.output
    with contextlib.suppress(FileNotFoundError):
        assert not list((stray / "tmp").iterdir())


# -- HTTPS nodes that take requests only from holders of a certificate of the installation's CA --
@dataclass
class TlsRig:
    ca: TestCA
    loader: TLSFiles  # the loader's certificate, key and the CA it trusts
    nodes: list[NginxNode]
    store: BlobStore
    pair: Pair


@pytest.fixture
def tls_rig(nginx_factory: Callable[..., NginxNode], tmp_path: Path) -> Iterator[TlsRig]:
    """Two nodes over HTTPS with ``ssl_verify_client on`` (the README's node), and a loader
    with its client certificate, all signed by one CA."""
    ca = TestCA.create(tmp_path / "ca")
    nodes = [
        nginx_factory(tls=ca.issue(tmp_path / f"node{i}-tls", ["127.0.0.1"])) for i in range(2)
    ]
    loader = ca.issue(tmp_path / "loader-tls", ["loader.test"])
    for node in nodes:
        assert node.url.startswith("https://")
        node.disk("d")
        _report(node, "d")
    factory = DiskFactory(
        NodeTimeouts(connect=1.0, read=5.0), tls=client_context(loader.ca, loader.cert, loader.key)
    )
    store = BlobStore(MemoryFileDB(), MemoryPairDB(), disk_factory=factory, free_refresh_seconds=0)
    pair = store.add_pair(nodes[0].disk("d"), nodes[1].disk("d"))
    try:
        yield TlsRig(ca, loader, nodes, store, pair)
    finally:
        store.close()


def _raw(
    node: NginxNode,
    method: str,
    path: str,
    *,
    files: TLSFiles | None = None,
    ca: Path,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> int:
    """One request as a stranger makes it: trusting the node's CA (so that the refusal is
    the node's, not this client's), with ``files``' client certificate or none."""
    ctx = ssl.create_default_context(cafile=ca)
    if files is not None:
        ctx.load_cert_chain(files.cert, files.key)
    with urllib3.HTTPSConnectionPool("127.0.0.1", node.port, ssl_context=ctx, retries=False) as p:
        return p.request(method, path, body=body, headers=headers).status


def test_https_nodes_serve_pochta_and_refuse_strangers(tls_rig: TlsRig, tmp_path: Path) -> None:
    rig = tls_rig
    data = os.urandom(300_000)
    stored = rig.store.upload(None, 7, [data[:150_000], data[150_000:]])
    key = stored.record.key
    copies = [node.served / "d" / blob_path(key) for node in rig.nodes]
    assert [c.read_bytes() for c in copies] == [data, data]
    for node in rig.nodes:  # the probe's PUT and DELETE, the copy's PUT and MOVE: all done
        assert list((node.served / "d" / "tmp").iterdir()) == []
    assert rig.store.read(key, len(data), zlib.crc32(data)) == data
    assert [p.free[0] > 0 for p in rig.store.refresh_free(force=True)] == [True]

    node, copy = rig.nodes[0], copies[0]
    name = f"/d/{blob_path(key)}"
    other_ca = TestCA.create(tmp_path / "other-ca", "not the installation's CA")
    stranger = other_ca.issue(tmp_path / "stranger-tls", ["stranger.test"])
    for files in (None, stranger):  # no certificate, and one the node's CA did not sign
        assert (
            _raw(node, "PUT", "/d/tmp/x.part", body=b"evil", files=files, ca=rig.loader.ca) == 400
        )
        assert _raw(node, "PUT", name, body=b"evil", files=files, ca=rig.loader.ca) == 400
        assert _raw(node, "DELETE", name, files=files, ca=rig.loader.ca) == 400
        moved = {"Destination": "/d/tmp/stolen", "Overwrite": "T"}
        assert _raw(node, "MOVE", name, files=files, ca=rig.loader.ca, headers=moved) == 400
        assert _raw(node, "GET", name, files=files, ca=rig.loader.ca) == 400
    assert copy.read_bytes() == data  # untouched
    assert not (node.served / "d" / "tmp" / "x.part").exists()
    assert not (node.served / "d" / "tmp" / "stolen").exists()
    # plain HTTP to the node's port gets nothing either
    with urllib3.HTTPConnectionPool("127.0.0.1", node.port, retries=False) as plain:
        assert plain.request("DELETE", name).status == 400
    assert copy.read_bytes() == data
    # the holder of a certificate of the installation's CA is served
    assert _raw(node, "GET", name, files=rig.loader, ca=rig.loader.ca) == 200


def test_a_loader_without_its_certificate_or_with_the_wrong_ca_is_told_why(
    tls_rig: TlsRig, tmp_path: Path
) -> None:
    spec = tls_rig.nodes[0].disk("d")
    no_cert = DiskFactory(NodeTimeouts(1.0, 5.0), tls=client_context(tls_rig.loader.ca))
    with contextlib.closing(no_cert), pytest.raises(DiskError, match="node_cert_file"):
        no_cert(spec).probe()
    other = TestCA.create(tmp_path / "other-ca", "another CA")
    elsewhere = other.issue(tmp_path / "elsewhere", ["loader.test"])
    wrong_ca = DiskFactory(
        NodeTimeouts(1.0, 5.0),
        tls=client_context(elsewhere.ca, tls_rig.loader.cert, tls_rig.loader.key),
    )
    with contextlib.closing(wrong_ca), pytest.raises(DiskError, match="certificate verify failed"):
        wrong_ca(spec).probe()
    assert not list((tls_rig.nodes[0].served / "d" / "tmp").iterdir())  # nothing written


def test_pairs_add_over_https_with_the_blobs_settings(
    data: Path,
    nginx_factory: Callable[..., NginxNode],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ca = TestCA.create(tmp_path / "ca")
    a, b = (nginx_factory(tls=ca.issue(tmp_path / f"n{i}", ["127.0.0.1"])) for i in range(2))
    mine = ca.issue(tmp_path / "admin", ["admin.test"])
    a.disk("disk1"), b.disk("disk1")
    urls = [f"{a.url}/disk1", f"{b.url}/disk1"]
    out = runner.invoke(pochta_app, ["pairs", "add", *urls, "--data", str(data)])
    assert out.exit_code == 5 and "certificate verify failed" in out.output, out.output
    monkeypatch.setenv("POCHTA_BLOBS__NODE_CA_FILE", str(mine.ca))
    monkeypatch.setenv("POCHTA_BLOBS__NODE_CERT_FILE", str(mine.cert))
    monkeypatch.setenv("POCHTA_BLOBS__NODE_KEY_FILE", str(mine.key))
    added = json.loads(cli(data, "pairs", "add", *urls, "--json"))
    assert [d["node"] for d in added["disks"]] == [a.url, b.url]
    # a key file that is not there stops pochta at start, naming the setting
    monkeypatch.setenv("POCHTA_BLOBS__NODE_KEY_FILE", str(tmp_path / "missing.pem"))
    out = runner.invoke(pochta_app, ["pairs", "list", "--data", str(data)])
    assert out.exit_code == 6 and "blobs.node_cert_file" in out.output, out.output
    assert "missing.pem" in out.output


def test_an_upload_is_three_requests_to_each_node_and_no_probe_file_is_left(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe is the upload's own temporary file: one PUT to each node (the content's PUT
    replaces it), then the content's PUT and the MOVE; no DELETE of a probe file."""
    from pochta.blobs.nodes.client import NodeClient

    sent: list[tuple[str, str, str]] = []
    real = NodeClient.request

    def request(self: NodeClient, method: str, path: str, **kwargs: object) -> object:
        sent.append((self.node, method, path))
        return real(self, method, path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(NodeClient, "request", request)
    for size in (0, 13, 65_536):  # the probe's bytes are replaced, whatever the size
        data = os.urandom(size)
        sent.clear()
        stored = rig.store.upload(None, 1, [data])
        pair = rig.store.pairdb.get(stored.record.pair_id)
        for spec in pair.disks:
            mine = [(m, p) for node, m, p in sent if node == spec.node and "/tmp/" in p]
            assert [m for m, _ in mine] == ["PUT", "PUT", "MOVE"], sent
            assert len({p for _, p in mine}) == 1  # one temporary name: probe, content, MOVE
            assert (rig.directory(spec) / blob_path(stored.record.key)).read_bytes() == data
            assert list((rig.directory(spec) / "tmp").iterdir()) == []
