"""Logins that stop attackers, not offices (issue 21), and that an attacker cannot turn against
the user (issue 27): real Users (argon2id, SQLite index, the embedded guard stores) built from
settings, and the LoginGuard itself on in-memory stores with an injected clock."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pochta.app import Pochta, build
from pochta.cli import app as cli
from pochta.config import load_settings
from pochta.errors import ConfigError, InvalidCredentials, RateLimited
from pochta.guard.devices import Devices
from pochta.guard.known import KnownClients, address, network
from pochta.guard.known.memory import MemoryKnownClients
from pochta.guard.logins import Admission, LoginGuard
from pochta.guard.passwords import hash_password
from pochta.guard.ratelimit import RateLimiter
from pochta.guard.ratelimit.memory import MemoryRateLimitBackend
from pochta.types import Limit, Schedule

PASSWORD = "correct horse battery"
OFFICE_IP = "203.0.113.7"
SECRET = b"unit-test-secret-0123456789abcdef"
ALICE = "alice@example.org"

# small limits so that the tests stay short; the proportions are the defaults'
GUARD = {
    "login_ip_max": 5,
    "login_client_max": 3,
    "login_account_free": 3,
    "login_account_checks": 20,  # spacing 3600 / (20 - 2 * 3 - 5) = 400 s
    "login_max_wait": 0.5,
    "login_ip_success_max": 100,
}


@functools.cache
def password_hash() -> str:
    return hash_password(PASSWORD)  # once: argon2 is slow on purpose


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    p = build(load_settings(data_dir=tmp_path / "data", guard=GUARD))
    try:
        for email in [*(f"user{i}@example.org" for i in range(8)), ALICE]:
            p.mailbox.index.add_user(email, password_hash())
        yield p
    finally:
        p.close()


def attack(p: Pochta, email: str, addresses: list[str]) -> list[str]:
    """One wrong password for ``email`` from each address: what each got."""
    got = []
    for ip in addresses:
        try:
            p.mailbox.login(email, "guess", ip)
        except InvalidCredentials:
            got.append("checked")
        except RateLimited:
            got.append("refused")
    return got


BOTNET = [f"198.18.{i}.1" for i in range(12)]


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- through Users (argon2, SQLite) ---------------------------------------------------------
def test_an_office_behind_one_nat_is_never_locked_out(pochta: Pochta) -> None:
    """Issue 21: successful logins counted toward the per-IP limit, so a few good logins and
    some typos from one address locked everyone behind it out."""
    for round_ in range(5):  # 40 good logins from one IP: 8 times the failure limit
        for i in range(8):
            pochta.mailbox.login(f"user{i}@example.org", PASSWORD, OFFICE_IP)
        if round_ < 4:  # and a typo now and then
            with pytest.raises(InvalidCredentials):
                pochta.mailbox.login(f"user{round_}@example.org", "typo", OFFICE_IP)
    pochta.mailbox.login("user7@example.org", PASSWORD, OFFICE_IP)


def test_wrong_passwords_from_one_ip_are_stopped(pochta: Pochta) -> None:
    for i in range(5):  # spraying: one guess at each of several accounts
        with pytest.raises(InvalidCredentials):
            pochta.mailbox.login(f"user{i}@example.org", "123456", "198.51.100.1")
    with pytest.raises(RateLimited) as limited:
        pochta.mailbox.login("user5@example.org", PASSWORD, "198.51.100.1")
    assert limited.value.retry_after > 0
    pochta.mailbox.login("user5@example.org", PASSWORD, OFFICE_IP)  # other IPs go on


def test_an_attack_on_an_account_slows_strangers_but_never_locks_out_its_owner(
    pochta: Pochta,
) -> None:
    """Issue 27's finding: guesses from many addresses used to refuse the account to
    everyone (429), its owner too."""
    box = pochta.mailbox
    box.login(ALICE, PASSWORD, "192.0.2.10")  # her usual address...
    device = box.enter(box.admit(ALICE, "192.0.2.10"), PASSWORD).device  # ...and browser
    got = attack(pochta, ALICE, BOTNET)
    # her own first login was one of the 3 free checks of a client the account did not know;
    # then the next is checked at once, and the one after it 25 s later, 50 s...
    assert got == ["checked"] * 3 + ["refused"] * 9
    box.login(ALICE, PASSWORD, "192.0.2.10")  # on main: RateLimited
    box.login(ALICE, PASSWORD, "192.0.2.200")  # a new address in her network
    assert box.admit(ALICE, "203.0.113.99", device).known == "device"
    box.enter(box.admit(ALICE, "203.0.113.99", device), PASSWORD)  # her browser, anywhere
    with pytest.raises(RateLimited) as stranger:  # a network she never used waits its turn
        box.login(ALICE, PASSWORD, "198.51.100.50")
    assert 0 < stranger.value.retry_after <= 400
    box.login("user1@example.org", PASSWORD, "198.51.100.50")  # other accounts go on


def test_a_device_with_a_stale_password_locks_out_only_itself(pochta: Pochta) -> None:
    box = pochta.mailbox
    phone = box.enter(box.admit(ALICE, "192.0.2.10"), PASSWORD).device
    for _ in range(3):  # the phone keeps an old password
        with pytest.raises(InvalidCredentials):
            box.enter(box.admit(ALICE, "198.51.100.77", phone), "old password")
    with pytest.raises(RateLimited):
        box.admit(ALICE, "198.51.100.77", phone)
    box.login(ALICE, PASSWORD, "192.0.2.10")  # her laptop at home
    box.login(ALICE, PASSWORD, "198.51.100.77")  # even another device at the phone's address


def test_unknown_accounts_are_charged_like_real_ones(pochta: Pochta) -> None:
    ghost = attack(pochta, "ghost@example.org", BOTNET[:6])
    assert ghost == attack(pochta, "user3@example.org", [f"198.19.{i}.1" for i in range(6)])
    with pytest.raises(RateLimited):
        pochta.mailbox.login("Ghost@Example.org ", "x", "192.0.2.50")  # the same account


def test_successes_of_unknown_addresses_are_limited(tmp_path: Path) -> None:
    """Credential stuffing: one address logs into account after account with valid
    passwords; logging in again where it logged in before is not stuffing."""
    p = build(load_settings(data_dir=tmp_path / "data", guard={"login_ip_success_max": 3}))
    try:
        for i in range(4):
            p.mailbox.index.add_user(f"u{i}@example.org", password_hash())
        for i in range(3):
            p.mailbox.login(f"u{i}@example.org", PASSWORD, "198.51.100.9")
        with pytest.raises(RateLimited):
            p.mailbox.login("u3@example.org", PASSWORD, "198.51.100.9")
        p.mailbox.login("u0@example.org", PASSWORD, "198.51.100.9")  # it knows this address
    finally:
        p.close()


def test_a_new_password_forgets_devices_and_addresses(pochta: Pochta) -> None:
    """Whoever logged in with a stolen password is a stranger once it is changed."""
    box = pochta.mailbox
    device = box.enter(box.admit(ALICE, "192.0.2.10"), PASSWORD).device
    assert box.admit(ALICE, "192.0.2.10").known == "address"
    assert box.admit(ALICE, "192.0.2.11").known == "network"
    assert box.admit(ALICE, "203.0.113.1", device).known == "device"
    box.set_password(ALICE, "a brand new password")
    assert box.admit(ALICE, "203.0.113.1", device).known is None
    assert box.admit(ALICE, "192.0.2.10").known is None
    assert box.admit("user1@example.org", "203.0.113.1", device).known is None  # not bob's


def test_guard_reset_and_trust(pochta: Pochta, tmp_path: Path) -> None:
    attack(pochta, ALICE, BOTNET)
    with pytest.raises(RateLimited):
        pochta.mailbox.login(ALICE, PASSWORD, "203.0.113.5")
    for i in range(5):  # the IP's failures, on several accounts
        attack(pochta, f"user{i}@example.org", ["198.51.100.1"])
    with pytest.raises(RateLimited):
        pochta.mailbox.login("user6@example.org", PASSWORD, "198.51.100.1")
    runner = CliRunner()
    data = str(tmp_path / "data")
    nobody = ["guard", "trust", "--email", "x@y.org", "--ip", "::1", "--data", data]
    done = runner.invoke(cli, nobody)
    assert done.exit_code == 2 and "no user x@y.org" in done.stderr
    done = runner.invoke(
        cli, ["guard", "trust", "--email", ALICE, "--ip", "203.0.113.5", "--data", data]
    )
    assert done.exit_code == 0, done.output
    pochta.mailbox.login(ALICE, PASSWORD, "203.0.113.5")  # trusted, though never seen
    with pytest.raises(RateLimited):
        pochta.mailbox.login(ALICE, PASSWORD, "198.51.100.200")
    done = runner.invoke(cli, ["guard", "reset", "--account", ALICE.upper(), "--data", data])
    assert done.exit_code == 0, done.output
    assert f"lifted for account {ALICE.upper()}" in done.stdout
    pochta.mailbox.login(ALICE, PASSWORD, "198.51.100.200")  # the schedule starts over
    done = runner.invoke(cli, ["guard", "reset", "--ip", "198.51.100.1", "--data", data, "--json"])
    assert done.exit_code == 0 and '"reset": true' in done.stdout
    pochta.mailbox.login("user6@example.org", PASSWORD, "198.51.100.1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reset"], "--ip ADDRESS and/or --account EMAIL"),
        (["reset", "--ip", "300.1.1.1"], "not an IP address"),
        (["reset", "--account", "nobody"], "not an e-mail address"),
        (["trust", "--account", "a@example.org", "--ip", "x"], "not an IP address"),
    ],
)
def test_guard_commands_refuse_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    done = CliRunner().invoke(cli, ["guard", *args, "--data", str(tmp_path / "d")])
    assert done.exit_code == 2
    assert message in done.stderr and "Traceback" not in done.output


def test_the_old_account_limit_is_refused_with_its_new_names(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"login_account_free and guard\.login_account_checks"):
        load_settings(data_dir=tmp_path, guard={"login_account_max": 10})
    with pytest.raises(ConfigError, match=r"must exceed 2 \* login_account_free"):
        load_settings(data_dir=tmp_path, guard={"login_account_free": 50})


# -- the guard alone, on an injected clock ---------------------------------------------------
def make_guard(clock: FakeClock) -> LoginGuard:
    return LoginGuard(
        RateLimiter(MemoryRateLimitBackend(clock), SECRET, tag="login"),
        KnownClients(MemoryKnownClients(clock), SECRET, remember_for=30 * 86400.0),
        per_ip=Limit("login-ip", 50, 3600.0),
        per_client=Limit("login-client", 10, 3600.0),
        per_account=Schedule("login-account", free=10, checks=100, period=3600.0, max_wait=5.0),
        per_ip_success=Limit("login-ip-ok", 1000, 3600.0),
        devices=Devices(SECRET, 30 * 86400.0, clock=clock),
    )


BINDING = "0123456789abcdef0123456789abcdef"


def test_an_hour_of_guesses_from_1000_addresses_gets_at_most_100_checked() -> None:
    clock = FakeClock()
    guard = make_guard(clock)
    owner = guard.admit("192.0.2.10", ALICE, binding=BINDING)
    guard.succeeded(owner)
    device = guard.device_token(owner)
    checked = refused = 0
    owner_waits = []
    mine = [("192.0.2.10", None), ("192.0.2.99", None), ("10.9.9.9", device)]
    for i in range(10_000):  # one guess every 0.36 s, from 1,000 addresses in turn
        clock.advance(0.36)
        if i % 500 == 0:  # the owner, every 3 minutes: her address, network and device
            for where, token in mine:
                owner = guard.admit(where, ALICE, binding=BINDING, device=token)
                assert owner.known is not None
                owner_waits.append(owner.wait)
                guard.succeeded(owner)
        ip = f"10.{i % 1000 // 250}.{i % 250}.1"
        try:
            a = guard.admit(ip, ALICE, binding=BINDING)
        except RateLimited:
            refused += 1
            continue
        checked += 1
        guard.failed(a)
    assert checked <= 100 and checked + refused == 10_000
    assert len(owner_waits) == 60 and set(owner_waits) == {0.0}


def test_known_clients_are_charged_their_own_failures() -> None:
    clock = FakeClock()
    guard = make_guard(clock)
    guard.succeeded(guard.admit("192.0.2.10", ALICE, binding=BINDING))
    for _ in range(10):  # a stranger inside her network
        guard.failed(guard.admit("192.0.2.66", ALICE, binding=BINDING))
    # the network used its tries: its other addresses are strangers now, never refused for
    # a neighbour's guesses (a carrier's NAT shares a /24 with strangers)
    neighbour = guard.admit("192.0.2.67", ALICE, binding=BINDING)
    assert neighbour.known is None and neighbour.client.endswith("ip:192.0.2.67")
    assert guard.admit("192.0.2.10", ALICE, binding=BINDING).known == "address"
    assert guard.admit("198.51.100.1", ALICE, binding=BINDING).wait == 0.0  # not the schedule
    clock.advance(360)  # one try back every 6 minutes
    assert guard.admit("192.0.2.67", ALICE, binding=BINDING).known == "network"
    for _ in range(3):
        guard.failed(guard.admit("192.0.2.66", ALICE, binding=BINDING))
    assert guard.admit("192.0.2.68", ALICE, binding=BINDING).known is None
    guard.reset(ip="192.0.2.68", email=ALICE)  # the operator lifts the network's failures
    assert guard.admit("192.0.2.68", ALICE, binding=BINDING).known == "network"


def test_networks_are_slash_24_and_slash_64() -> None:
    assert network("192.0.2.77") == "192.0.2.0/24"
    assert network("::ffff:192.0.2.77") == "192.0.2.0/24" and address("::ffff:192.0.2.7") == (
        "192.0.2.7"
    )
    assert network("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"
    assert network("testclient") is None and address("testclient") == "testclient"
    clock = FakeClock()
    guard = make_guard(clock)
    guard.succeeded(guard.admit("2001:db8:1:2::10", ALICE, binding=BINDING))
    assert guard.admit("2001:db8:1:2:ffff::1", ALICE, binding=BINDING).known == "network"
    assert guard.admit("2001:db8:1:3::10", ALICE, binding=BINDING).known is None
    clock.advance(31 * 86400)  # remembered for 30 days after the last success
    assert guard.admit("2001:db8:1:2::10", ALICE, binding=BINDING).known is None


def test_a_device_token_is_bound_to_its_account_its_password_and_its_time() -> None:
    clock = FakeClock()
    devices = Devices(SECRET, 86400.0, clock=clock)
    token = devices.issue(ALICE, BINDING)
    device = devices.verify(token, ALICE, BINDING)
    assert device is not None
    assert devices.verify(devices.issue(ALICE, BINDING, device), ALICE, BINDING) == device
    assert devices.verify(token, "bob@example.org", BINDING) is None
    assert devices.verify(token, ALICE, "f" * 32) is None
    other = Devices(b"another-secret-0123456789abcdef", 86400.0)
    assert other.verify(token, ALICE, BINDING) is None
    forged = token.rsplit(".", 1)[0] + ".AAAAAAAAAAAAAAAAAAAAAA"
    assert devices.verify(forged, ALICE, BINDING) is None
    clock.advance(86401)
    assert devices.verify(token, ALICE, BINDING) is None


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_any_device_token_a_client_sends_is_a_device_or_none(token: str) -> None:
    guard = make_guard(FakeClock())
    admission = guard.admit("203.0.113.9", ALICE, binding=BINDING, device=token)
    assert isinstance(admission, Admission) and admission.known is None
