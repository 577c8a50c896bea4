"""Login protection that an attacker cannot turn against the user.

Before the password is looked at, :meth:`LoginGuard.admit` works out who is asking:

- a **known client** of the account: a device that logged into it before (a valid device
  token, ``pochta.guard.devices``), else an address it logged in from, else an address in a
  network it logged in from, within ``login_known_days`` (``pochta.guard.known``). A known
  client is limited only by its own failures on that account (``per_client``): a phone with
  a stale password locks out itself, nobody else, and no attack on the account slows it. A
  network's allowance is shared by its addresses: once spent, they are let in as unknown
  clients (below) rather than refused, so a neighbour's guesses cannot lock the owner out;
- anyone else, an **unknown client**: refused (``RateLimited``, 429 with Retry-After) when
  its address failed too often on any accounts (``per_ip``), failed too often on this
  account (``per_client``), or logged in too often (``per_ip_success``: credential stuffing
  with a leaked list). Otherwise it takes the account's next slot on ``per_account``, a
  schedule (``pochta.guard.schedule``): the first ``free`` checks an hour pass at once, the
  next ones are spaced by a growing delay, so that however many addresses guess, at most
  ``checks`` an hour are checked. A slot within ``max_wait`` is waited for (the caller
  sleeps asynchronously, holding no thread and no connection: ``Admission.wait``); a later
  one is refused with the time until it. The account is never refused to everyone: its own
  devices and addresses pass, and slots keep coming.

After the password the outcome is charged: :meth:`failed` to the client's own limit (and,
for an unknown client, to its address); :meth:`succeeded` remembers the address and network
as known clients of the account and counts a success for an unknown address. A right
password that leaked (reset required) counts as a success of the address and is remembered
nowhere (:meth:`leaked`). Unknown accounts are charged like real ones, so the answers tell
nothing about which e-mails exist. Nothing stored holds an address or an e-mail: keys are
keyed hashes. :meth:`reset` lifts limits (``pochta guard reset``); :meth:`trust` makes an
address a known client of an account (``pochta guard trust``).

The check and the charge are two steps, so concurrent failures from known clients can pass
their limit by the number in flight at once; the schedule cannot be passed that way (the
slot is counted when it is reserved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pochta import metrics
from pochta.errors import RateLimited
from pochta.guard.devices import Devices
from pochta.guard.known import KnownClients, address, network
from pochta.guard.ratelimit import RateLimiter
from pochta.types import Limit, RateDecision, Schedule, Slot

Client = Literal["device", "address", "network"]


@dataclass(frozen=True, slots=True)
class Admission:
    """What the guard decided before the password is looked at: the caller waits ``wait``
    seconds (asynchronously), checks the password and reports the outcome with it."""

    email: str  # as typed (the user lookup's key)
    ip: str
    client: str  # the subject of the client's own limit: the account and the client
    known: Client | None  # None: a client the account does not know
    wait: float = 0.0
    binding: str = field(default="", repr=False)  # the account's password fingerprint
    device: str | None = None  # the device id, when a valid device token came along

    @property
    def account(self) -> str:
        return _account(self.email)


class LoginGuard:
    def __init__(
        self,
        limiter: RateLimiter,
        known: KnownClients,
        *,
        per_ip: Limit,
        per_client: Limit,
        per_account: Schedule,
        per_ip_success: Limit | None = None,
        devices: Devices | None = None,
    ) -> None:
        self.limiter = limiter
        self.known = known
        self.per_ip = per_ip
        self.per_client = per_client
        self.per_account = per_account
        self.per_ip_success = per_ip_success
        self.devices = devices

    def admit(
        self, ip: str, email: str, *, binding: str = "", device: str | None = None
    ) -> Admission:
        """Who is asking, and how long to wait before the password is checked; RateLimited
        when this client may not try now. ``binding``: the account's password fingerprint
        ("" for no account); ``device``: the device token the client sent, if any."""
        account = _account(email)
        device_id = None
        if self.devices is not None:
            device_id = self.devices.verify(device, account, binding)
        kind: Client | None
        if device_id is not None:
            kind, client = "device", f"device:{device_id}"
        else:
            kind = self.known.known(account, binding, ip) if binding else None
            net = network(ip) if kind == "network" else None
            client = f"ip:{address(ip)}" if net is None else f"net:{net}"
        subject = f"{account}\n{client}"
        if kind is not None:
            own = self.limiter.peek((self.per_client, subject))
            if own.allowed or kind != "network":
                self._refuse_unless(own)
                return Admission(email, ip, subject, kind, 0.0, binding, device_id)
            # a network's allowance is shared by its addresses: spent (a neighbour guessing,
            # behind the same carrier's NAT?), it refuses nobody, its addresses go as strangers
            kind, subject = None, f"{account}\nip:{address(ip)}"
        checks = [(self.per_ip, address(ip)), (self.per_client, subject)]
        if self.per_ip_success is not None:
            checks.append((self.per_ip_success, address(ip)))
        self._refuse_unless(self.limiter.peek(*checks))
        slot = self.limiter.reserve(self.per_account, account)
        if not slot.granted:
            self._refuse_unless(RateDecision(False, 0.0, slot.retry_after))
        return Admission(email, ip, subject, None, slot.wait, binding, None)

    @staticmethod
    def _refuse_unless(decision: RateDecision) -> None:
        if not decision.allowed:
            metrics.rate_limited("login")
            raise RateLimited(
                "too many login attempts; try again later", retry_after=decision.retry_after
            )

    def failed(self, admission: Admission) -> None:
        """A wrong password (or an unknown account): one failure for the client on this
        account and, when the account does not know it, for its address."""
        if admission.known is not None:
            self.limiter.hit((self.per_client, admission.client))
        else:
            self.limiter.hit(
                (self.per_ip, address(admission.ip)), (self.per_client, admission.client)
            )

    def succeeded(self, admission: Admission) -> None:
        """A correct password: the address and its network become (stay) known clients of
        the account; a success of an address the account did not know is counted."""
        if admission.binding:
            self.known.remember(admission.account, admission.binding, admission.ip)
        if admission.known is None and self.per_ip_success is not None:
            self.limiter.hit((self.per_ip_success, address(admission.ip)))

    def leaked(self, admission: Admission) -> None:
        """A correct password that leaked (a reset is required): what credential stuffing
        finds. Counted as a success of an unknown address; nothing becomes known."""
        if admission.known is None and self.per_ip_success is not None:
            self.limiter.hit((self.per_ip_success, address(admission.ip)))

    def device_token(self, admission: Admission) -> str | None:
        """A token that makes the client a known device of the account at its next login
        (the same device id when it came with one); None without devices or an account."""
        if self.devices is None or not admission.binding:
            return None
        return self.devices.issue(admission.account, admission.binding, admission.device)

    def trust(self, email: str, binding: str, ip: str) -> None:
        """Make ``ip`` (and its network) a known client of the account, as a login from it
        would (an operator's remedy for a user locked out at a new place during an attack)."""
        self.known.remember(_account(email), binding, ip)

    def reset(self, *, ip: str | None = None, email: str | None = None) -> None:
        """Lift the limits of ``ip`` (its failures and successes), of ``email`` (the
        account's schedule: its checks are no longer spaced out), and with both, the
        failures of the address and of its network on that account."""
        checks: list[tuple[Limit, str]] = []
        if ip is not None:
            checks.append((self.per_ip, address(ip)))
            if self.per_ip_success is not None:
                checks.append((self.per_ip_success, address(ip)))
        if ip is not None and email is not None:
            account = _account(email)
            checks.append((self.per_client, f"{account}\nip:{address(ip)}"))
            if network(ip) is not None:  # a limit is named once per call: its own reset
                self.limiter.reset((self.per_client, f"{account}\nnet:{network(ip)}"))
        if checks:
            self.limiter.reset(*checks)
        if email is not None:
            self.limiter.reset_slots(self.per_account, _account(email))

    def close(self) -> None:
        """Close the backends (a Redis client itself is its owner's to close)."""
        self.limiter.backend.close()
        self.known.backend.close()

    # -- what the admin pages show ---------------------------------------------------------
    def ip_state(self, ip: str) -> RateDecision:
        """The failures limit of an address as it stands (nothing charged)."""
        return self.limiter.peek((self.per_ip, address(ip)))

    def account_state(self, email: str) -> Slot:
        """The account's schedule as it stands (nothing reserved): ``checks`` counted, and
        ``wait`` / ``retry_after`` until a client it does not know would be checked."""
        slot = self.limiter.reserve(self.per_account, _account(email), commit=False)
        if slot.granted:  # what the reservation would have counted, taken back
            return Slot(True, slot.wait, 0.0, max(0.0, slot.checks - 1.0))
        return slot

    def slowed(self, slot: Slot) -> bool:
        """Whether an account in state ``slot`` spaces out its unknown clients' checks."""
        return slot.checks >= self.per_account.free or not slot.granted or slot.wait > 0


def _account(email: str) -> str:
    return email.strip().lower()
