"""The one feedback rule (pochta.mailbox.feedback): the pure decision, and every path by which
a user says "spam" / "not spam" (HTTP API, webmail, IMAP MOVE, COPY + EXPUNGE, STORE of
$Junk / $NotJunk) driven on a real app (TestClient) and a real IMAP server (a socket), with the
same effects on the four stores: shingle counters, installation words, the user's words and
the admin history's tallies."""

from __future__ import annotations

import imaplib
import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from tests.mailtools import letter
from tests.unit.test_imap_server import LIMITS, start

from pochta.antispam import tokens as tokens_mod
from pochta.antispam.words import FEEDBACK_WEIGHT, INSTALLATION, Words
from pochta.app import Pochta
from pochta.config import load_settings
from pochta.mailbox.feedback import SPAM, State, decide, placed_flags, said_spam, says_spam
from pochta.mime.letter import parse
from pochta.server.http import create_app
from pochta.types import LetterFlag

PASSWORD = "a long enough password"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
W = FEEDBACK_WEIGHT

# -- the pure rule -------------------------------------------------------------------------

FOLDERS = st.sampled_from(["Inbox", SPAM, "Archive"])
KEYWORDS = st.sampled_from(
    [LetterFlag.NONE, LetterFlag.JUNK, LetterFlag.NOT_JUNK, LetterFlag.JUNK | LetterFlag.NOT_JUNK]
)
STATES = st.builds(State, FOLDERS, KEYWORDS)


def test_the_owners_word_is_the_keyword_else_the_folder() -> None:
    assert says_spam(State(SPAM, LetterFlag.NONE))
    assert not says_spam(State("Inbox", LetterFlag.NONE))
    assert says_spam(State("Inbox", LetterFlag.JUNK))  # Thunderbird's "junk", not moved
    assert not says_spam(State(SPAM, LetterFlag.NOT_JUNK))
    both = LetterFlag.JUNK | LetterFlag.NOT_JUNK
    assert says_spam(State(SPAM, both)) and not says_spam(State("Archive", both))
    assert said_spam("phishing", LetterFlag.NONE) and said_spam(None, LetterFlag.SAID_SPAM)
    assert not said_spam("ham", LetterFlag.NONE) and not said_spam(None, LetterFlag.NONE)


@given(state=STATES, hidden=st.booleans())
def test_a_placed_letters_baseline_is_its_owners_word(state: State, hidden: bool) -> None:
    """APPEND / import: no verdict, so the baseline is the owner's word as placed (a client
    cannot set SAID_SPAM itself)."""
    given_flags = state.flags | (LetterFlag.SAID_SPAM if hidden else LetterFlag.NONE)
    kept = placed_flags(state.folder, given_flags)
    assert said_spam(None, kept) == says_spam(state)
    assert kept & ~LetterFlag.SAID_SPAM == state.flags


@given(path=st.lists(STATES, min_size=1, max_size=30), verdict_spam=st.booleans())
def test_any_path_teaches_the_words_at_most_once_and_counts_once_per_direction(
    path: list[State], verdict_spam: bool
) -> None:
    """Words: the sum of what each change teaches is what the last state says against the
    verdict (one letter's weight at most, whatever came between). Shingles and history: a
    direction's flag is asked for at every change of word, and it is set once (the index's
    test-and-set): at most one complaint and one unspam."""
    taught = 0  # + spam letters, - ham letters (a letter's words as FEEDBACK_WEIGHT)
    counted = LetterFlag.NONE
    complaints = unspams = 0
    for before, after in itertools.pairwise(path):
        d = decide(before, after)
        assert (d.word is None) == (says_spam(before) == says_spam(after))
        if d.word is None:
            continue
        said = verdict_spam
        if d.word == "spam":  # as Scanner.feedback teaches
            taught += -W if said else W
        else:
            taught += -W if not said else W
        if d.counted not in counted:
            counted |= d.counted
            complaints += d.word == "spam"
            unspams += d.word == "not_spam"
    first, last = says_spam(path[0]), says_spam(path[-1])
    expected = (W if last and not verdict_spam else 0) - (W if first and not verdict_spam else 0)
    expected += (W if not last and verdict_spam else 0) - (W if not first and verdict_spam else 0)
    assert taught == expected
    assert complaints <= 1 and unspams <= 1


def test_seen_the_first_time_is_a_read() -> None:
    unseen, seen = State("Inbox", LetterFlag.NONE), State("Inbox", LetterFlag.SEEN)
    assert decide(unseen, seen).read and not decide(seen, seen).read
    assert decide(seen, State(SPAM, LetterFlag.SEEN)).word == "spam"


# -- every path, on a real app and a real IMAP server -------------------------------------

PATHS = ("api", "webmail", "imap_move", "imap_copy_expunge", "imap_store_keyword")


@dataclass
class World:
    client: TestClient
    pochta: Pochta
    imap_port: int

    @property
    def words(self) -> Words:
        words = self.pochta.scanner.words
        assert words is not None
        return words


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("feedback") / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        valkyrie={"enabled": False},
        antispam={"pool_processes": 0},
    )
    with TestClient(create_app(settings), base_url="https://testserver") as client:
        pochta: Pochta = client.app.state.pochta  # type: ignore[attr-defined]
        for path in PATHS:
            pochta.mailbox.add_user(f"{path}@example.org", PASSWORD)
        for running in start(pochta, LIMITS):
            yield World(client, pochta, running.port)


def newsletter(path: str) -> bytes:
    """Each path's own letter (the shingle counters of one are not another's)."""
    return letter(
        sender=f"Digest <{path}@news.example>",
        to=f"{path}@example.org",
        subject=f"Weekly digest: zanzibarquokka offers for {path}",
        text="Our zanzibarquokka weekly digest with personalsecret491827 deals inside.",
    )


def fresh(w: World, name: str) -> tuple[str, int]:
    """A user of one test only (tests run in any order on the module's world)."""
    email = f"{name}@example.org"
    box = w.pochta.mailbox
    u = box.user(email) or box.add_user(email, PASSWORD)
    return email, u.id


def _imap(w: World, user: str) -> imaplib.IMAP4:
    c = imaplib.IMAP4("127.0.0.1", w.imap_port)
    c.login(user, PASSWORD)
    return c


def _uid(c: imaplib.IMAP4, folder: str) -> bytes:
    c.select(folder)
    typ, data = c.uid("SEARCH", "ALL")
    assert typ == "OK" and data[0], data
    return data[0].split()[-1]


def _api(w: World, user: str) -> dict[str, str]:
    r = w.client.post("/v1/session", json={"email": user, "password": PASSWORD})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def _webmail(w: World, user: str, letter_id: int, action: str) -> None:
    c = w.client
    c.cookies.clear()
    token = CSRF.search(c.get("/webmail/login").text)
    assert token is not None
    r = c.post(
        "/webmail/login",
        data={"email": user, "password": PASSWORD, "csrf": token.group(1)},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    page = c.get(f"/webmail/letters/{letter_id}")
    token = CSRF.search(page.text)
    assert token is not None
    r = c.post(
        f"/webmail/letters/{letter_id}/{action}",
        data={"csrf": token.group(1)},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    c.cookies.clear()


def say(w: World, path: str, user: str, spam: bool) -> None:
    """The user says "spam" (``spam``) or "not spam" of their one letter, by ``path``."""
    box = w.pochta.mailbox
    uid = box.user(user)
    assert uid is not None
    here, there = ("Inbox", SPAM) if spam else (SPAM, "Inbox")
    if path == "api":
        (stored,) = box.letters(uid.id, here)
        auth = _api(w, user)
        r = w.client.patch(f"/v1/messages/{stored.id}", json={"folder": there}, headers=auth)
        assert r.status_code == 200, r.text
    elif path == "webmail":
        (stored,) = box.letters(uid.id, here)
        _webmail(w, user, stored.id, "spam" if spam else "not-spam")
    elif path == "imap_move":
        c = _imap(w, user)
        assert c.uid("MOVE", _uid(c, here), there)[0] == "OK"
        c.logout()
    elif path == "imap_copy_expunge":  # a client without MOVE
        c = _imap(w, user)
        uid_ = _uid(c, here)
        assert c.uid("COPY", uid_, there)[0] == "OK"
        assert c.uid("STORE", uid_, "+FLAGS.SILENT", r"(\Deleted)")[0] == "OK"
        assert c.expunge()[0] == "OK"
        c.logout()
    else:  # Thunderbird's junk / not junk: the keywords, then it moves the letter itself
        c = _imap(w, user)
        uid_ = _uid(c, here)
        add, drop = ("$Junk", "$NotJunk") if spam else ("$NotJunk", "$Junk")
        assert c.uid("STORE", uid_, "+FLAGS", f"({add})")[0] == "OK"
        assert c.uid("STORE", uid_, "-FLAGS", f"({drop})")[0] == "OK"
        assert c.uid("MOVE", uid_, there)[0] == "OK"  # teaches nothing more
        c.logout()


@dataclass(frozen=True)
class Effects:
    complaints: int  # over the letter's shingles, 24 h
    unspams: int
    installation: tuple[int, int]  # (spam, ham) letters of the installation's words
    user: tuple[int, int]  # the user's own
    user_word: tuple[int, int]  # one of the letter's words in the user's table
    history_complaints: int
    history_unspams: int


def effects(w: World, path: str) -> Effects:
    p = w.pochta
    user = f"{path}@example.org"
    parsed = parse(newsletter(path))
    stats = p.shingles.stats(parsed, ["24h"])
    complaints = sum(int(s.counters["24h"].get("complaint", 0)) for s in stats)
    unspams = sum(int(s.counters["24h"].get("unspam", 0)) for s in stats)
    words = w.words
    hashes = words.hashes(tokens_mod.tokenize(parsed))
    u = p.mailbox.user(user)
    assert u is not None
    _, installation = words.learned(INSTALLATION, hashes)
    mine, user_totals = words.learned(u.id, hashes)
    word = words.hashes(["zanzibarquokka"])[0]
    p.history.flush()
    hour = int(time.time() // 3600) - 1
    store = p.history.store
    return Effects(
        complaints,
        unspams,
        installation,
        user_totals,
        mine.get(word, (0, 0)),
        sum(t.n for t in store.tallies("complaint", hour)),
        sum(t.n for t in store.tallies("unspam", hour)),
    )


def delta(a: Effects, b: Effects) -> dict[str, object]:
    return {
        "complaints": b.complaints - a.complaints,
        "unspams": b.unspams - a.unspams,
        "installation": (
            b.installation[0] - a.installation[0],
            b.installation[1] - a.installation[1],
        ),
        "history_complaints": b.history_complaints - a.history_complaints,
        "history_unspams": b.history_unspams - a.history_unspams,
    }


def test_every_path_teaches_the_same_once(world: World) -> None:
    w = world
    said: dict[str, list[dict[str, object]]] = {}
    for path in PATHS:
        user = f"{path}@example.org"
        u = w.pochta.mailbox.user(user)
        assert u is not None
        w.pochta.mailbox.deliver(newsletter(path), [u])  # into the Inbox, no verdict: ham
        steps = []
        for spam in (True, False, True, False):  # to and fro twice
            before = effects(w, path)
            say(w, path, user, spam)
            after = effects(w, path)
            steps.append(delta(before, after))
            # the user's own words say the user's last word, every path alike
            assert after.user == ((W, 0) if spam else (0, 0)), (path, spam)
            assert after.user_word == ((W, 0) if spam else (0, 0)), (path, spam)
        said[path] = steps
    first = said["api"]
    n_shingles = len(w.pochta.shingles.shingles(parse(newsletter("api"))))
    assert first[0] == {
        "complaints": n_shingles,
        "unspams": 0,
        "installation": (W, 0),
        "history_complaints": n_shingles,
        "history_unspams": 0,
    }
    assert first[1] == {
        "complaints": 0,
        "unspams": n_shingles,
        "installation": (-W, 0),
        "history_complaints": 0,
        "history_unspams": n_shingles,
    }
    # once per letter and direction: the second round trip moves only the words
    assert first[2]["complaints"] == first[2]["history_complaints"] == 0
    assert first[3]["unspams"] == first[3]["history_unspams"] == 0
    assert first[2]["installation"] == (W, 0) and first[3]["installation"] == (-W, 0)
    for path, steps in said.items():
        assert steps == first, path


def test_a_copy_alone_teaches_nothing_and_keywords_are_shown(world: World) -> None:
    """COPY into Spam without EXPUNGE: the user keeps the letter where it was (a copy is
    not a word on it). $Junk / $NotJunk are kept and shown; pochta's own flags never are,
    and a client cannot set them."""
    w = world
    user, uid_ = fresh(w, "copy_alone")
    u = w.pochta.mailbox.user(user)
    assert u is not None and u.id == uid_
    w.pochta.mailbox.deliver(letter(subject="kept twice", text="nothing to say"), [u])
    before = w.words.stats(u.id)
    c = _imap(w, user)
    uid = _uid(c, "Inbox")
    assert c.uid("COPY", uid, SPAM)[0] == "OK"
    assert w.words.stats(u.id) == before
    typ, data = c.uid("STORE", uid, "FLAGS", "($Junk)")
    assert typ == "OK" and b"$Junk" in data[0]
    flags = c.uid("FETCH", uid, "(FLAGS)")[1][0]
    assert b"$Junk" in flags and b"Complained" not in flags
    typ, data = c.select("Inbox")
    assert typ == "OK"
    assert b"$NotJunk" in c.response("PERMANENTFLAGS")[1][0]
    c.logout()
    assert w.words.stats(u.id).learned_spam == before.learned_spam + W


def test_one_users_word_is_not_another_users(world: World) -> None:
    w = world
    a, b = w.pochta.mailbox.user("api@example.org"), w.pochta.mailbox.user("webmail@example.org")
    assert a is not None and b is not None
    hashes = w.words.hashes(["s:secretword-of-api"])
    w.words.learn(hashes, "spam", W, owner=a.id)
    assert w.words.learned(a.id, hashes)[0] and not w.words.learned(b.id, hashes)[0]


def test_not_junk_on_a_letter_in_spam_is_a_not_spam(world: World) -> None:
    """The keyword turns the folder's word over: $NotJunk on a letter in Spam is "not spam"
    (an unspam counted once), whichever way the client then moves it."""
    w = world
    user, _ = fresh(w, "not_junk")
    u = w.pochta.mailbox.user(user)
    assert u is not None
    raw = letter(sender="Club <club@rowing.example>", subject="regatta", text="see you")
    w.pochta.mailbox.deliver(raw, [u], folder=SPAM)
    stats = w.pochta.shingles.stats(parse(raw), ["24h"])
    before = sum(int(s.counters["24h"].get("unspam", 0)) for s in stats)
    c = _imap(w, user)
    uid = _uid(c, SPAM)
    assert c.uid("STORE", uid, "+FLAGS", "($NotJunk)")[0] == "OK"
    assert c.uid("MOVE", uid, "INBOX")[0] == "OK"  # Thunderbird moves it itself: no more
    c.logout()
    stats = w.pochta.shingles.stats(parse(raw), ["24h"])
    after = sum(int(s.counters["24h"].get("unspam", 0)) for s in stats)
    assert after - before == len(stats)


def test_a_session_remembers_a_bounded_number_of_copies(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COPY's originals awaiting EXPUNGE are kept up to COPIES_KEPT a session (a client
    copying a million letters does not grow the server): past it the oldest are forgotten,
    and their EXPUNGE is a plain deletion."""
    from pochta.server import imapstate as imap_mod

    monkeypatch.setattr(imap_mod, "COPIES_KEPT", 2)
    w = world
    user, _ = fresh(w, "bounded")
    u = w.pochta.mailbox.user(user)
    assert u is not None
    for n in range(3):
        w.pochta.mailbox.deliver(letter(subject=f"bounded {n}", text=f"kept {n}"), [u])
    before = w.words.stats(u.id).learned_spam
    c = _imap(w, user)
    c.select("Inbox")
    typ, data = c.uid("SEARCH", "SUBJECT", "bounded")
    uids = data[0].split()
    assert typ == "OK" and len(uids) == 3
    for uid in uids:
        assert c.uid("COPY", uid, SPAM)[0] == "OK"
    for uid in uids:
        assert c.uid("STORE", uid, "+FLAGS.SILENT", r"(\Deleted)")[0] == "OK"
    assert c.expunge()[0] == "OK"
    c.logout()
    assert w.words.stats(u.id).learned_spam == before + 2 * W


def test_a_letter_appended_into_spam_taken_out_is_a_not_spam(world: World) -> None:
    """APPEND into Spam: no verdict, the owner's placement is the baseline, so taking it out
    teaches "not spam" (ham), not the undoing of a "spam" nobody said."""
    w = world
    user, user_id = fresh(w, "appended")
    c = _imap(w, user)
    raw = letter(subject="appended", text="zanzibarquokka appended letter")
    assert c.append(SPAM, "", imaplib.Time2Internaldate(time.time()), raw)[0] == "OK"
    uid = _uid(c, SPAM)
    flags = c.uid("FETCH", uid, "(FLAGS)")[1][0]
    assert b"SAID" not in flags  # pochta's own flag is never shown
    assert c.uid("MOVE", uid, "INBOX")[0] == "OK"
    c.logout()
    st = w.words.stats(user_id)
    assert (st.learned_spam, st.learned_ham) == (0, W)


def test_a_letter_imported_into_spam_taken_out_is_a_not_spam(world: World) -> None:
    from pochta.mailbox.importer import Source, import_letters

    w = world
    user, user_id = fresh(w, "imported")
    u = w.pochta.mailbox.user(user)
    assert u is not None
    raw = letter(subject="imported", text="zanzibarquokka imported letter")
    report = import_letters(w.pochta.mailbox, u, iter([Source("one.eml", raw)]), folder=SPAM)
    assert report.letters == 1
    (stored,) = w.pochta.mailbox.letters(user_id, SPAM)
    w.pochta.mailbox.update(user_id, stored.id, folder="Inbox")
    st = w.words.stats(user_id)
    assert (st.learned_spam, st.learned_ham) == (0, W)


@pytest.mark.parametrize(
    ("folder", "keyword", "taught"),
    [("INBOX", "$Junk", (0, W)), (SPAM, "$NotJunk", (W, 0))],
)
def test_a_letter_appended_with_a_keyword_keeps_it_as_its_owners_word(
    world: World, folder: str, keyword: str, taught: tuple[int, int]
) -> None:
    """APPEND with $Junk (or into Spam with $NotJunk): the owner's word at APPEND is the
    keyword, the baseline as the folder is for a plain APPEND. Taking the keyword off turns
    the word over to the folder's (not spam in the Inbox, spam in Spam), which teaches that,
    instead of taking off a word nobody taught; putting it back undoes it."""
    w = world
    user, user_id = fresh(w, f"kw-{keyword[1:].lower()}")
    c = _imap(w, user)
    raw = letter(subject="kept", text=f"zanzibarquokka appended with {keyword}")
    when = imaplib.Time2Internaldate(time.time())
    assert c.append(folder, f"({keyword})", when, raw)[0] == "OK"
    uid = _uid(c, folder)
    c.select(folder)
    st = w.words.stats(user_id)
    assert (st.learned_spam, st.learned_ham) == (0, 0)  # an APPEND alone teaches nothing
    assert c.uid("STORE", uid, "-FLAGS", f"({keyword})")[0] == "OK"
    st = w.words.stats(user_id)
    assert (st.learned_spam, st.learned_ham) == taught
    assert c.uid("STORE", uid, "+FLAGS", f"({keyword})")[0] == "OK"
    c.logout()
    st = w.words.stats(user_id)
    assert (st.learned_spam, st.learned_ham) == (0, 0)
