"""Names changed by issue 31 ("worker" named four things): the CPU pool's size is
``antispam.pool_processes`` (was ``antispam.workers``) and the server processes are
``serve --processes`` (was ``--workers``). The old names still work, the new ones win, and
each old name is logged as deprecated once a process."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pochta import config
from pochta.cli import app
from pochta.cli import serve as serve_cli
from pochta.config import load_settings, log_renamed, source_of
from pochta.errors import ConfigError

DEPRECATED = "setting antispam.workers is deprecated: it is antispam.pool_processes now"


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As in a new process: no old name read or logged yet, no pochta.toml, no variable."""
    monkeypatch.setattr(config, "_renamed_read", {})
    monkeypatch.setattr(config, "_renamed_logged", set())
    monkeypatch.delenv("POCHTA_ANTISPAM__WORKERS", raising=False)
    monkeypatch.delenv("POCHTA_ANTISPAM__POOL_PROCESSES", raising=False)
    monkeypatch.chdir(tmp_path)


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pochta.config"]


def test_the_new_name_sets_the_pool_size_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert load_settings().antispam.pool_processes is None  # one per core
    assert load_settings(antispam={"pool_processes": 0}).antispam.pool_processes == 0
    with caplog.at_level(logging.WARNING):
        log_renamed()
    assert logged(caplog) == []


def test_the_old_name_works_from_overrides_file_and_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert load_settings(antispam={"workers": 0}).antispam.pool_processes == 0
    (tmp_path / "pochta.toml").write_text("[antispam]\nworkers = 3\n")
    assert load_settings().antispam.pool_processes == 3
    monkeypatch.setenv("POCHTA_ANTISPAM__WORKERS", "2")  # not refused as an unknown variable
    assert load_settings().antispam.pool_processes == 2


def test_the_new_name_wins_over_the_old(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POCHTA_ANTISPAM__WORKERS", "2")
    assert load_settings(antispam={"pool_processes": 1}).antispam.pool_processes == 1
    (tmp_path / "pochta.toml").write_text("[antispam]\npool_processes = 4\n")
    assert load_settings().antispam.pool_processes == 4


def test_the_old_name_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    load_settings(antispam={"workers": 1})
    with caplog.at_level(logging.WARNING):
        log_renamed()
        load_settings(antispam={"workers": 1})
        log_renamed()
    [message] = logged(caplog)
    assert message.startswith(DEPRECATED)


def test_a_bad_value_under_the_old_name_says_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POCHTA_ANTISPAM__WORKERS", "-1")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "antispam.pool_processes" in str(caught.value)
    assert "environment variable POCHTA_ANTISPAM__WORKERS" in str(caught.value)
    assert (
        source_of(("antispam", "pool_processes")) == "environment variable POCHTA_ANTISPAM__WORKERS"
    )


def test_a_command_logs_the_old_name(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every command but serve logs at once, as it reads the settings (serve logs once its
    own log is set up); here before it refuses a data directory that is not there."""
    monkeypatch.setenv("POCHTA_ANTISPAM__WORKERS", "0")
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(app, ["user", "list", "--data", str(tmp_path / "none")])
    assert result.exit_code != 0 and "no data directory" in result.output, result.output
    [message] = logged(caplog)
    assert message.startswith(DEPRECATED)


def test_serve_has_processes_and_a_hidden_workers_option() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["serve", "--help"], terminal_width=200)
    assert shown.exit_code == 0
    assert "--processes" in shown.stdout and "--workers" not in shown.stdout
    for option in ("--processes", "--workers"):  # both exist, with the same bounds
        result = runner.invoke(app, ["serve", option, "0"])
        assert result.exit_code == 2 and option in result.stderr, result.output


def test_serve_logs_the_old_option(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pochta.serve"):
        serve_cli._deprecated(old_option=False)
        assert caplog.records == []
        serve_cli._deprecated(old_option=True)
    [record] = caplog.records
    assert record.getMessage() == "option --workers is deprecated: it is --processes now"
