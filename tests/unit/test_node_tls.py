"""The TLS settings of pochta's requests to https:// storage nodes (``[blobs] node_ca_file``,
``node_cert_file``, ``node_key_file``): read once, and any file that cannot be used is a
ConfigError naming the setting, before anything is opened."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from tests.tlsfiles import TestCA, TLSFiles

from pochta.app import build
from pochta.blobs.nodes.client import client_context
from pochta.config import load_settings
from pochta.errors import ConfigError


@pytest.fixture
def files(tmp_path: Path) -> TLSFiles:
    return TestCA.create(tmp_path / "ca").issue(tmp_path / "me", ["loader.test"])


def test_a_context_with_the_ca_and_the_client_certificate(files: TLSFiles) -> None:
    ctx = client_context(files.ca, files.cert, files.key)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert ctx.cert_store_stats()["x509_ca"] == 1  # the installation's CA, not the system's
    system = client_context()
    assert system.verify_mode == ssl.CERT_REQUIRED


def test_files_that_cannot_be_used_name_the_setting(files: TLSFiles, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    other = TestCA.create(tmp_path / "other").issue(tmp_path / "other-me", ["x.test"])
    cases = [
        (dict(ca_file=tmp_path / "none.pem"), "blobs.node_ca_file.*none.pem"),
        (dict(ca_file=garbage), "blobs.node_ca_file"),
        (dict(cert_file=files.cert, key_file=tmp_path / "none.pem"), "node_key_file.*none.pem"),
        (dict(cert_file=garbage, key_file=files.key), "blobs.node_cert_file"),
        (dict(cert_file=files.cert, key_file=other.key), "blobs.node_cert_file"),  # not its key
        (dict(cert_file=files.cert), "set together"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError, match=message):
            client_context(**kwargs)


def test_settings_take_both_or_neither_and_build_checks_the_files(
    files: TLSFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="node_cert_file and node_key_file"):
        load_settings(blobs={"node_cert_file": files.cert})
    settings = load_settings(
        data_dir=tmp_path / "data",
        blobs={"node_ca_file": tmp_path / "gone.pem", "default_pair": False},
    )
    with pytest.raises(ConfigError, match=r"blobs\.node_ca_file.*gone\.pem"):
        build(settings)
    assert not (tmp_path / "data" / "filedb.sqlite3").exists()  # stopped before any open
