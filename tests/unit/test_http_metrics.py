"""/metrics through FastAPI's TestClient: who may scrape, what the families are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from pochta.config import load_settings
from pochta.server.http import create_app

QUICK: dict[str, Any] = {
    "smtp": {"enabled": False},
    "imap": {"enabled": False},
    "antispam": {"pool_processes": 0},
    "valkyrie": {"enabled": False},
}


def families(text: str) -> set[str]:
    return {f.name for f in text_string_to_metric_families(text)}


def test_without_a_token_only_loopback_clients_are_served(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", **QUICK)
    app = create_app(settings)
    with TestClient(app, client=("127.0.0.1", 5000)) as local:
        r = local.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        names = families(r.text)
        for name in ("pochta_deliveries", "pochta_verdicts", "pochta_scan_seconds",
                     "pochta_letters_stored", "pochta_dedup_saved_bytes",
                     "pochta_blob_operations", "pochta_shingle_buffer_cells",
                     "pochta_shingle_flush_seconds", "pochta_lock_wait_seconds",
                     "pochta_lock_leases_lost", "pochta_rate_limit_refusals",
                     "pochta_login_failures", "pochta_pair_writable", "pochta_pair_flag",
                     "pochta_disk_free_bytes", "pochta_valkyrie_files"):  # fmt: skip
            assert name in names, name
    with TestClient(app, client=("192.0.2.7", 5000)) as remote:
        r = remote.get("/metrics")
        assert r.status_code == 403 and "loopback" in r.json()["message"]
    with TestClient(app, client=("::1", 5000)) as local6:
        assert local6.get("/metrics").status_code == 200


def test_with_a_token_every_client_needs_it(tmp_path: Path) -> None:
    token = "metrics-token-0123456789"
    settings = load_settings(
        data_dir=tmp_path / "data", **QUICK, metrics={"token": token}
    )
    with TestClient(create_app(settings), client=("127.0.0.1", 5000)) as c:
        assert c.get("/metrics").status_code == 401
        assert c.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = c.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and "pochta_deliveries_total" in r.text


def test_metrics_can_be_turned_off(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data", **QUICK, metrics={"enabled": False}
    )
    with TestClient(create_app(settings), client=("127.0.0.1", 5000)) as c:
        assert c.get("/metrics").status_code == 404
