"""README's "Several machines" recipe cannot rot: its TOML files are valid pochta settings
that put every store on PostgreSQL and the locks on the Redis Cluster, over TLS checked
against the installation's CA everywhere, and its addresses, ports, pairs and certificate
directory are the ones tests/integration/test_several_machines.py builds (which runs those
very blocks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.machines import (
    ADDRESSES,
    BOTH_DBS,
    DB,
    DB2_OCTET,
    DISKS,
    NODE1,
    NODE2,
    NODE_PORT,
    PG_PORT,
    REDIS_PORT,
    SUBNET,
    TLS_DIR,
    recipe,
    recipe_pairs,
)

from pochta.blobs.nodes.client import parse_node_url
from pochta.config import Settings, load_settings


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Settings]:
    monkeypatch.chdir(tmp_path)  # no pochta.toml of the working directory
    out = {}
    for kind, block in recipe().items():
        path = tmp_path / f"{kind}.toml"
        path.write_text(block)
        out[kind] = load_settings(path)
    return out


def address(name: str) -> str:
    return f"{SUBNET}.{ADDRESSES[name]}"


def test_both_files_are_valid_and_share_the_stores(settings: dict[str, Settings]) -> None:
    assert set(settings) == {"loader", "storage"}
    redis_nodes = [f"{address(n)}:{REDIS_PORT}" for n in (DB, NODE1, NODE2)]
    for s in settings.values():
        assert (s.mailbox.backend, s.blobs.backend, s.valkyrie.backend) == ("postgres",) * 3
        assert s.blobs.default_pair is False
        assert s.guard.backend == "redis"
        assert s.redis.mode == "cluster" and list(s.redis.nodes) == redis_nodes
        assert s.postgres.dsn is not None
        dsn = s.postgres.dsn.get_secret_value()
        # both PostgreSQL hosts (Patroni's primary and standby), the one taking writes
        assert f"@{address(DB)}:{PG_PORT},{SUBNET}.{DB2_OCTET}:{PG_PORT}/pochta?" in dsn
        assert f"@{BOTH_DBS}/pochta?" in dsn  # what the one-server test narrows to db
        assert dsn.endswith("&target_session_attrs=read-write")
        assert f"sslmode=verify-full&sslrootcert={TLS_DIR}/ca.pem" in dsn
        assert s.redis.tls and s.redis.tls_ca_file == Path(TLS_DIR) / "ca.pem"
        assert (s.blobs.node_ca_file, s.blobs.node_cert_file, s.blobs.node_key_file) == (
            Path(TLS_DIR) / "ca.pem",
            Path(TLS_DIR) / "cert.pem",
            Path(TLS_DIR) / "key.pem",
        )
    loader = settings["loader"]
    assert loader.shingles.backend == "redis"
    assert loader.http.host == loader.smtp.host == loader.imap.host == "0.0.0.0"
    assert settings["storage"].postgres.dsn == loader.postgres.dsn
    # every listener a stranger reaches speaks TLS, and IMAP takes no password without it
    tls = loader.tls
    assert (tls.cert_file, tls.key_file) == (Path(TLS_DIR) / "cert.pem", Path(TLS_DIR) / "key.pem")
    assert tls.https and tls.smtp and tls.require_starttls
    assert (loader.imap.port, loader.imap.tls_port) == (143, 993)


def test_the_certificate_directory_is_the_only_path_the_test_replaces() -> None:
    """tests/machines.py fills in each host's certificate directory for TLS_DIR: a path of
    another directory in the blocks would be used as it is, on the machine running the test."""
    for block in recipe().values():
        paths = re.findall(r'"(/[^"]*?)"', block) + re.findall(r"sslrootcert=(/\S+?)\"", block)
        assert paths
        for path in paths:
            assert path == "/var/lib/pochta" or path.startswith(TLS_DIR + "/"), path


def test_pairs_join_a_disk_of_each_node() -> None:
    pairs = recipe_pairs()
    assert pairs
    nodes = {f"https://{address(n)}:{NODE_PORT}" for n in (NODE1, NODE2)}
    for a, b in pairs:
        disk_a, disk_b = parse_node_url(a), parse_node_url(b)
        assert {disk_a.node, disk_b.node} == nodes
        assert disk_a.root in DISKS and disk_b.root in DISKS
    assert {parse_node_url(a).root for a, _ in pairs} == set(DISKS)


def test_a_setting_the_recipe_misspells_would_be_caught(tmp_path: Path) -> None:
    """The check above has teeth: load_settings refuses a key no section has."""
    from pochta.errors import ConfigError

    path = tmp_path / "bad.toml"
    path.write_text(recipe()["loader"].replace("[blobs]\n", "[blobs]\ndefault_pairs = false\n"))
    with pytest.raises(ConfigError, match="default_pairs"):
        load_settings(path)
