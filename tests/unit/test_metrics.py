"""pochta.metrics: multiprocess mode is chosen before prometheus-client is imported; old
directories of servers that are gone are removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pochta import metrics


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_command_line_does_not_import_prometheus_client() -> None:
    """``pochta serve`` can still choose multiprocess mode after importing pochta."""
    done = run("import sys, pochta.cli\nassert 'prometheus_client' not in sys.modules")
    assert done.returncode == 0, done.stderr


def test_use_directory_keeps_live_servers_and_clears_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "metrics"
    gone = root / "999999999"
    alive = root / str(os.getppid())  # a process that certainly runs: our parent
    for d in (gone, alive, root / "junk"):
        d.mkdir(parents=True)
        (d / "counter_1.db").write_bytes(b"x")
    code = (
        "import os, sys\nfrom pathlib import Path\nfrom pochta import metrics\n"
        f"p = metrics.use_directory(Path({str(tmp_path)!r}))\n"
        "metrics.delivery('smtp', '250 ok')\n"
        "print(p, sorted(os.listdir(p)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != metrics.ENV}
    done = run(code, env)
    assert done.returncode == 0, done.stderr
    assert not gone.exists() and not (root / "junk").exists() and alive.exists()
    path, files = done.stdout.split(" ", 1)
    assert Path(path).parent == root.resolve()
    assert "counter_" in files  # the child wrote its values there


def test_use_directory_refuses_after_prometheus_client_was_imported(tmp_path: Path) -> None:
    code = (
        "import prometheus_client\nfrom pathlib import Path\nfrom pochta import metrics\n"
        f"metrics.use_directory(Path({str(tmp_path)!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != metrics.ENV}
    done = run(code, env)
    assert done.returncode != 0 and "imported before" in done.stderr


@pytest.mark.parametrize(
    ("reply", "result"),
    [("250 2.0.0 OK", "delivered"), ("451 4.3.0 later", "deferred"), ("552 5.3.4 big", "refused")],
)
def test_delivery_results(reply: str, result: str) -> None:
    from prometheus_client import REGISTRY

    labels = {"protocol": "smtp", "result": result, "code": reply[:3]}
    before = REGISTRY.get_sample_value("pochta_deliveries_total", labels) or 0.0
    metrics.delivery("smtp", reply)
    assert REGISTRY.get_sample_value("pochta_deliveries_total", labels) == before + 1
