from __future__ import annotations

import re
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


SECTIONS = ["http", "blobs", "smtp", "imap", "mailbox", "guard", "shingles", "antispam", "valkyrie"]


@pytest.mark.parametrize("section", SECTIONS)
def test_an_unknown_key_in_any_section_is_refused_with_its_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, section: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pochta.toml").write_text(f"[{section}]\nprot = 25\n")
    needle = rf"{section}\.prot: unknown setting \(from pochta\.toml\)"
    with pytest.raises(ConfigError, match=needle):
        load_settings()


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("POCHTA_SMTP__PROT", "SMTP__PROT names no setting; did you mean POCHTA_SMTP__PORT?"),
        ("POCHTA_HTTP__NOPE", "POCHTA_HTTP__NOPE names no setting"),
        ("POCHTA_DATADIR", "did you mean POCHTA_DATA_DIR?"),
        ("pochta_guard__login_ip_maxx", "POCHTA_GUARD__LOGIN_IP_MAXX names no setting"),
    ],
)
def test_an_unknown_environment_variable_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "25")
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_settings()


def test_variables_that_are_not_settings_are_let_be(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POCHTA_CORPUS_CACHE", str(tmp_path))
    monkeypatch.setenv("POCHTA_SMTP__PORT", "2626")
    monkeypatch.setenv("POCHTA_VALKYRIE", '{"enabled": false}')
    s = load_settings()
    assert (s.smtp.port, s.valkyrie.enabled) == (2626, False)


def test_a_warm_up_size_that_is_no_number_stops_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``POCHTA_WARM_WORDS`` is read by the letters' fork server, which cannot say what is
    wrong with it: the settings refuse it, before any pool starts."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POCHTA_WARM_WORDS", "20000")
    load_settings()
    monkeypatch.setenv("POCHTA_WARM_WORDS", "lots")
    with pytest.raises(ConfigError, match="POCHTA_WARM_WORDS: 'lots' is not a whole number"):
        load_settings()


def test_an_invalid_value_names_its_real_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no pochta.toml here
    monkeypatch.setenv("POCHTA_SMTP__PORT", "abc")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "smtp.port" in caught.value.message
    assert "(from environment variable POCHTA_SMTP__PORT)" in caught.value.message
    assert "pochta.toml" not in caught.value.message
    monkeypatch.delenv("POCHTA_SMTP__PORT")
    (tmp_path / "other.toml").write_text("[http]\nport = -1\n")
    with pytest.raises(ConfigError, match=r"http\.port: .* \(from other\.toml\)"):
        load_settings(Path("other.toml"))
    with pytest.raises(ConfigError, match=r"data_dir: .* \(from the command line\)"):
        load_settings(data_dir=12)


def test_every_setting_is_in_the_readme() -> None:
    """README's configuration block names every setting under its section (as datasette's
    test_docs does for its settings)."""
    from pochta.config import env_names
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("## Configuration", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    documented: set[str] = set()
    section = ""
    for line in block.splitlines():
        if m := re.match(r"\[(\w+)\]", line):
            section = m.group(1) + "."
        elif m := re.match(r"#? ?(\w+) = ", line):
            documented.add(section + m.group(1))
    names = {".".join(str(p) for p in loc) for loc in env_names().values()}
    leaves = {n for n in names if not any(o.startswith(n + ".") for o in names)}
    assert sorted(leaves - documented) == []


def test_dns_no_longer_has_to_fit_within_the_workers_deadline() -> None:
    """The server asks a letter's DNS beside its worker (issue 27), so dns_lifetime is no
    longer cut out of deadline_seconds: RFC 7208's 20 s can be allowed with the default
    deadline. What bounds it now is the client's wait for its reply (smtp.command_timeout)."""
    load_settings(antispam={"dns": "system", "dns_lifetime": 8.0})  # refused before
    load_settings(antispam={"dns": "system", "dns_lifetime": 20.0})
    with pytest.raises(ConfigError, match="command_timeout"):
        load_settings(antispam={"dns": "system", "dns_lifetime": 295.0})
    with pytest.raises(ConfigError, match="command_timeout"):
        load_settings(antispam={"dns": "system"}, smtp={"command_timeout": 15.0})
    load_settings(antispam={"dns": "off"}, smtp={"command_timeout": 15.0})  # no DNS, no rule


def test_the_reply_rule_counts_the_second_worker_task() -> None:
    """DKIM signatures are verified by a second worker task with its own deadline, after the
    first pass (up to deadline_seconds) and the DNS: the reply may come dns_lifetime + 1 s +
    2 x deadline_seconds after the end of DATA (the review: the rule counted one deadline)."""
    with pytest.raises(ConfigError, match=r"2 x antispam\.deadline_seconds"):
        load_settings(antispam={"dns": "system"}, smtp={"command_timeout": 25.0})  # 7+1+20
    load_settings(antispam={"dns": "system"}, smtp={"command_timeout": 29.0})
    with pytest.raises(ConfigError, match="command_timeout"):
        load_settings(
            antispam={"dns": "system", "deadline_seconds": 5.0, "dns_lifetime": 20.0},
            smtp={"command_timeout": 30.0},
        )
