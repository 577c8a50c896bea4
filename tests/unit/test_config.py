from __future__ import annotations

from pathlib import Path

import pytest

from pochta.config import load_settings
from pochta.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.data_dir == Path("pochta-data")
    assert s.http.port == 8025
    assert s.http.host == "127.0.0.1"
    assert s.blobs.placement_root == 2.0
    assert s.service_token is None


def test_file_then_environment_then_overrides(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pochta.toml").write_text(
        'data_dir = "from-file"\n[http]\nport = 9000\nhost = "127.0.0.2"\n'
        "[blobs]\nplacement_root = 3\n"
    )
    s = load_settings()
    assert (s.data_dir, s.http.port, s.blobs.placement_root) == (Path("from-file"), 9000, 3.0)
    monkeypatch.setenv("POCHTA_HTTP__PORT", "9100")
    monkeypatch.setenv("POCHTA_DATA_DIR", "from-env")
    s = load_settings()
    assert (s.data_dir, s.http.port, s.http.host) == (Path("from-env"), 9100, "127.0.0.2")
    s = load_settings(data_dir=tmp_path / "explicit")
    assert s.data_dir == tmp_path / "explicit"


def test_config_path_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("[http]\nport = 1234\n")
    monkeypatch.setenv("POCHTA_CONFIG", str(other))
    assert load_settings().http.port == 1234


def test_secret_is_masked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings(service_token="s3cret-token-value-long")
    assert "s3cret" not in repr(s)
    assert "s3cret" not in str(s.model_dump())


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[http]\nport = 99999\n", "http.port"),
        ("[blobs]\nplacement_root = 0\n", "blobs.placement_root"),
        ('[blobs]\nsync = "sometimes"\n', "blobs.sync"),
        ("no_such_setting = 1\n", "no_such_setting"),
        ("this is = not toml [\n", "cannot read"),
    ],
)
def test_bad_settings_are_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, toml: str, needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pochta.toml").write_text(toml)
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load_settings()


def test_missing_named_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")
