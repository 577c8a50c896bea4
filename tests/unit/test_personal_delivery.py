"""Delivery with personal sender lists (:mod:`pochta.mailbox.personal`): recipients whose
lists disagree get their own letters (own header, own folder), the attachments are still
stored once, and only the installation's verdict teaches."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.mailtools import letter, payload

from pochta.antispam import packed, personal
from pochta.antispam.shingles.counters import Packed, unpack
from pochta.antispam.shingles.registry import update_refs
from pochta.antispam.verdict import Counting, Verdict
from pochta.app import Pochta, build
from pochta.config import load_settings
from pochta.errors import StorageError
from pochta.mailbox.intake import for_the_server
from pochta.mailbox.prepare import prepare
from pochta.mailbox.trace import verdict_headers
from pochta.mime.letter import parse
from pochta.types import Envelope, ListEntry, User

DATA = Path(__file__).parent.parent / "data" / "phishing"
SENDER = "Shop News <news@mail.shop.example>"
TEXT = "Hi Ann,\n\nthe minutes of Tuesday's meeting are attached; see you on Friday.\n\nPeter\n"


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    p = build(load_settings(data_dir=tmp_path / "data"))
    yield p
    p.close()


def users(p: Pochta, n: int) -> list[User]:
    return [p.mailbox.index.add_user(f"u{i}@example.org", "x") for i in range(n)]


def head(p: Pochta, v: Verdict) -> bytes:
    return verdict_headers(v, p.scanner.authserv_id, b"\r\n")


def test_nobody_listed_is_one_letter_for_all_as_before(pochta: Pochta) -> None:
    rcpts = users(pochta, 3)
    pochta.mailbox.lists.add(rcpts[0].id, "other.example", "block")
    raw = letter(sender=SENDER, text=TEXT, attachments=[("a.bin", payload(1, 20_000))])
    done = pochta.mailbox.deliver(raw, rcpts, scan=True)
    assert done.verdict is not None and done.verdict.listed is None
    skeletons = {pochta.mailbox.index.content(i)[0] for i in done.ids}
    assert len(skeletons) == 1
    for u, i in zip(rcpts, done.ids, strict=True):
        assert pochta.mailbox.raw(u.id, i) == head(pochta, done.verdict) + raw


def test_a_block_gives_its_owner_a_letter_of_their_own_and_the_attachment_once(
    pochta: Pochta,
) -> None:
    blocker, other = users(pochta, 2)
    pochta.mailbox.lists.add(blocker.id, "shop.example", "block")
    att = payload(2, 120_000)
    raw = letter(sender=SENDER, text=TEXT, attachments=[("big.bin", att)])
    done = pochta.mailbox.deliver(raw, [blocker, other], scan=True)
    installation = done.verdict
    assert installation is not None and installation.label == "ham"
    assert done.uploaded == 1 and done.attachments == 1
    assert pochta.blobs.stat(done_key(pochta, done.ids[0])).counter == 2  # one file, two letters
    mine_b = pochta.mailbox.letter(blocker.id, done.ids[0])
    mine_o = pochta.mailbox.letter(other.id, done.ids[1])
    assert (mine_b.folder, mine_b.verdict) == ("Spam", "spam")
    assert (mine_o.folder, mine_o.verdict) == ("Inbox", "ham")
    blocked = personal.personal(
        installation, [ListEntry("shop.example", "block")], "news@mail.shop.example"
    )
    got_b = pochta.mailbox.raw(blocker.id, done.ids[0])
    assert got_b == head(pochta, blocked) + raw
    assert b"; list=block\r\n" in got_b.split(b"Authentication-Results")[0]
    assert pochta.mailbox.raw(other.id, done.ids[1]) == head(pochta, installation) + raw
    assert pochta.mailbox.attachment(blocker.id, done.ids[0], 0)[0] == att
    # deleting one letter leaves the other's attachment
    pochta.mailbox.delete(blocker.id, done.ids[0])
    pochta.mailbox.process_deletions()
    assert pochta.mailbox.attachment(other.id, done.ids[1], 0)[0] == att
    assert pochta.mailbox.fsck().ok


def test_groups_without_attachments_are_delivered_together(pochta: Pochta) -> None:
    rcpts = users(pochta, 4)
    pochta.mailbox.lists.add(rcpts[1].id, "news@mail.shop.example", "block")
    pochta.mailbox.lists.add(rcpts[3].id, "mail.shop.example", "block")
    raw = letter(sender=SENDER, text=TEXT)
    done = pochta.mailbox.deliver(raw, rcpts, scan=True)
    folders = [pochta.mailbox.letter(u.id, i).folder for u, i in zip(rcpts, done.ids, strict=True)]
    assert folders == ["Inbox", "Spam", "Inbox", "Spam"]  # the ids in the recipients' order
    # two headers: the installation's, and "list=block" (the address's and the domain's)
    assert len({pochta.mailbox.index.content(i)[0] for i in done.ids}) == 2
    assert pochta.mailbox.stats()["letters"] == 4


def test_an_allowed_sender_of_a_phishing_letter_still_gets_phishing(pochta: Pochta) -> None:
    truster, other = users(pochta, 2)
    raw = (DATA / "ru15_sber_spoofed_broken_dkim.eml").read_bytes()
    pochta.mailbox.lists.add(truster.id, "sberbank.ru", "allow")
    pochta.mailbox.lists.add(other.id, "info@sberbank.ru", "allow")
    done = pochta.mailbox.deliver(raw, [truster, other], scan=True)
    for u, i in zip([truster, other], done.ids, strict=True):
        stored = pochta.mailbox.letter(u.id, i)
        assert (stored.folder, stored.verdict) == ("Spam", "phishing")
        assert b"list=allow-refused:phishing" in pochta.mailbox.raw(u.id, i)


def test_an_allow_lets_the_senders_spam_verdict_through_for_its_owner_only(
    pochta: Pochta,
) -> None:
    truster, other = users(pochta, 2)
    raw = (DATA / "spam_ru01_windows_ad.eml").read_bytes()
    pochta.mailbox.lists.add(truster.id, "sale@okna-econom.biz", "allow")
    done = pochta.mailbox.deliver(raw, [truster, other], scan=True, envelope=Envelope())
    assert done.verdict is not None and done.verdict.label == "spam"
    assert pochta.mailbox.letter(truster.id, done.ids[0]).folder == "Inbox"
    assert pochta.mailbox.letter(other.id, done.ids[1]).folder == "Spam"


def test_only_the_installations_verdict_teaches(
    pochta: Pochta, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker, other = users(pochta, 2)
    pochta.mailbox.lists.add(blocker.id, "shop.example", "block")
    learned: list[Verdict] = []
    real = pochta.scanner.learn

    def learn(
        verdict: Verdict, at: float | None = None, packed: tuple[Packed, ...] | None = None
    ) -> str | None:
        learned.append(verdict)
        return real(verdict, at, packed)

    monkeypatch.setattr(pochta.scanner, "learn", learn)
    done = pochta.mailbox.deliver(letter(sender=SENDER, text=TEXT), [blocker, other], scan=True)
    assert learned == [done.verdict]
    assert learned[0].listed is None and learned[0].label == "ham"


def test_a_list_store_that_cannot_be_read_leaves_everyone_the_installations_verdict(
    pochta: Pochta, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker, other = users(pochta, 2)
    pochta.mailbox.lists.add(blocker.id, "shop.example", "block")

    def down(*args: object) -> object:
        raise StorageError("the database is down")

    assert pochta.mailbox.lists is not None
    monkeypatch.setattr(pochta.mailbox.lists.store, "lookup", down)
    done = pochta.mailbox.deliver(letter(sender=SENDER, text=TEXT), [blocker, other], scan=True)
    got = [pochta.mailbox.letter(u.id, i) for u, i in zip([blocker, other], done.ids, strict=True)]
    assert [g.folder for g in got] == ["Inbox", "Inbox"]


def done_key(p: Pochta, letter_id: int) -> str:
    return p.mailbox.index.content(letter_id)[1][0].key


def club(i: int) -> bytes:
    return letter(
        sender="Rowing Club <club@rowing.example>",
        subject=f"Rowing club notes, week {i}",
        text=f"Hi all, the regatta meeting moved to Thursday {i}. The boathouse keys are with"
        " Pete; the new oars arrived. Training schedule attached below as usual. Cheers, the"
        " committee",
    )


def teach_club(pochta: Pochta, spam_says: User, ham_says: User) -> None:
    """``spam_says`` taught the club's notes are spam, ``ham_says`` that they are not; each
    also said "spam" of three pill letters and "not spam" of a lunch note (enough of both
    kinds for their words to count). Through the scanner's words alone: moving the letters
    would also complain to the shingle counters; the feedback paths have their own tests."""
    pills = [
        letter(subject=f"cheap pills {j}", text="buy cheap viagra now, best price online pharmacy")
        for j in range(3)
    ]
    lunch = letter(subject="lunch", text="see you at noon")
    for i in range(4):
        pochta.scanner.feedback(parse(club(i)), "spam", "ham", owner=spam_says.id)
        pochta.scanner.feedback(parse(club(i + 4)), "not_spam", "spam", owner=ham_says.id)
    for owner in (spam_says.id, ham_says.id):
        pochta.scanner.feedback(parse(lunch), "not_spam", "spam", owner=owner)
        for raw in pills:
            pochta.scanner.feedback(parse(raw), "spam", "ham", owner=owner)


def test_a_users_own_words_give_that_user_a_letter_of_their_own(pochta: Pochta) -> None:
    """Personal words in the per-recipient step: alice taught that the club's notes are spam,
    bob that they are not (each with enough of both kinds), carol taught nothing; the next
    notes go to alice's Spam with her own header, to bob's Inbox with his, and carol gets the
    installation's verdict, all in one delivery."""
    alice, bob, carol = users(pochta, 3)
    teach_club(pochta, alice, bob)
    words = pochta.scanner.words
    personal_words = pochta.scanner.personal
    assert words is not None and personal_words is not None
    words.flush()
    assert personal_words.refresh() == {alice.id, bob.id}
    raw = club(20)
    done = pochta.mailbox.deliver(raw, [alice, bob, carol], scan=True)
    installation = done.verdict
    assert installation is not None
    got = [
        pochta.mailbox.letter(u.id, i) for u, i in zip((alice, bob, carol), done.ids, strict=True)
    ]
    assert [(m.folder, m.verdict) for m in got[:2]] == [("Spam", "spam"), ("Inbox", "ham")]
    assert (got[2].folder, got[2].verdict) == (installation.folder, installation.label)
    raws = [pochta.mailbox.raw(m.user_id, m.id) for m in got]
    assert raws[0].endswith(raw) and raws[0].startswith(b"X-Pochta-Spam: spam;")
    assert raws[1].endswith(raw) and raws[1].startswith(b"X-Pochta-Spam: ham;")
    assert raws[2] == head(pochta, installation) + raw


def test_own_words_that_agree_with_the_installation_keep_the_common_letter(
    pochta: Pochta,
) -> None:
    """Words that do not change the verdict's label change nothing that is stored: of alice
    (taught the club's notes are spam) and bob (taught they are not), the one who agrees
    with the installation stays in carol's group (carol taught nothing): one skeleton with
    the installation's header, as when nobody taught anything; only the one who disagrees
    gets a letter of their own."""
    alice, bob, carol = users(pochta, 3)
    teach_club(pochta, alice, bob)
    words, personal_words = pochta.scanner.words, pochta.scanner.personal
    assert words is not None and personal_words is not None
    words.flush()
    assert personal_words.refresh() == {alice.id, bob.id}
    raw = club(20)
    done = pochta.mailbox.deliver(raw, [alice, bob, carol], scan=True)
    installation = done.verdict
    assert installation is not None
    got = [
        pochta.mailbox.letter(u.id, i) for u, i in zip((alice, bob, carol), done.ids, strict=True)
    ]
    assert [m.verdict for m in got[:2]] == ["spam", "ham"]  # each as they taught
    agrees, disagrees = (0, 1) if installation.label == "spam" else (1, 0)
    skeletons = [pochta.mailbox.index.content(i)[0] for i in done.ids]
    assert skeletons[agrees] == skeletons[2] != skeletons[disagrees]
    for m in (got[agrees], got[2]):
        assert pochta.mailbox.raw(m.user_id, m.id) == head(pochta, installation) + raw


def test_a_workers_slim_answer_delivers_what_its_whole_analysis_does(pochta: Pochta) -> None:
    """What a worker sends back of a letter it decided (``intake.for_the_server``: the
    analysis without its signs, features and shingles; the verdict's features as the model
    reads them; the shingles once, without their text; the features, tokens and hashes
    packed), read back as the server reads it, stores the same bytes, in the same
    folders, with the same per-recipient verdicts (alice's and bob's own words re-run the
    model on those features) and teaches the same lesson, in a fraction of the bytes."""
    alice, bob, carol = users(pochta, 3)
    teach_club(pochta, alice, bob)
    words, personal_words = pochta.scanner.words, pochta.scanner.personal
    assert words is not None and personal_words is not None
    words.flush()
    assert personal_words.refresh() == {alice.id, bob.id}
    scanner = pochta.scanner
    raw = club(20)
    envelope = Envelope(ip="192.0.2.1", sender="club@rowing.example", recipients=())
    prepared = prepare(raw, envelope, "helo", inline_limit=4096, analyzer=scanner.analyzer)
    assert prepared.analysis is not None
    analysis, verdict = scanner.judge(prepared.analysis)
    whole = dataclasses.replace(prepared, analysis=analysis, verdict=verdict)
    answer = pickle.dumps(for_the_server(whole, scanner.model), pickle.HIGHEST_PROTOCOL)
    slim = pickle.loads(answer)  # as the server reads it
    assert slim.verdict is not None and slim.analysis is not None
    assert len(answer) * 2 < len(pickle.dumps(whole, pickle.HIGHEST_PROTOCOL))
    assert slim.analysis.tokens == analysis.tokens and slim.analysis.hashes == analysis.hashes
    assert slim.verdict.hashes == verdict.hashes
    assert not slim.analysis.features and not slim.analysis.shingles and not slim.shingles
    assert not slim.verdict.shingles and slim.refs is not None
    assert len(slim.verdict.features) < len(verdict.features)
    refs = update_refs(verdict.shingles)  # what a lesson counts, when the verdict counts
    assert refs and unpack(slim.refs) == refs
    scanner.counting = Counting(spam_at=0.0, ham_below=2.0)  # every verdict counts
    mine, theirs = scanner.lesson(verdict), scanner.lesson(slim.verdict, packed=slim.refs)
    assert mine.kind is not None and (mine.kind, mine.taught) == (theirs.kind, theirs.taught)
    assert [*mine.refs] == [*theirs.refs, *unpack(theirs.packed)] == refs
    counters = scanner.counters
    assert counters is not None
    updates = []
    for lesson in (mine, theirs):  # taught in this process (no workers): the same increments
        before = counters.stats().updates
        assert scanner.teach(lesson) == mine.kind
        updates.append(counters.stats().updates - before)
    assert updates[0] == updates[1] > 0
    for owner in (alice, bob):  # the model reads the slim features as it reads the whole
        mine = scanner.for_owner(verdict, analysis, owner.id)
        assert mine.probability != verdict.probability
        assert scanner.for_owner(slim.verdict, slim.analysis, owner.id).probability == (
            mine.probability
        )
    stored = []
    for given in (whole, slim):
        done = pochta.mailbox.deliver_prepared(given, [alice, bob, carol])
        pairs = zip((alice, bob, carol), done.ids, strict=True)
        got = [pochta.mailbox.letter(u.id, i) for u, i in pairs]
        raws = [pochta.mailbox.raw(m.user_id, m.id) for m in got]
        stored.append(([(m.folder, m.verdict) for m in got], raws, done.size, done.stored))
    assert stored[0] == stored[1]
    assert [v for _, v in stored[1][0]] == ["spam", "ham", verdict.label]


def test_a_workers_answer_packs_the_features_of_a_letter_without_phishing_points(
    pochta: Pochta,
) -> None:
    """The rules' points of a letter no rule of a group scored are ints (``round(0, 6)``);
    the model reads every feature as a float, so the answer carries them as floats and the
    verdict's features travel packed (``packed.Row``), read back as the model reads them."""
    scanner = pochta.scanner
    envelope = Envelope(ip="192.0.2.1", sender="club@rowing.example", recipients=())
    prepared = prepare(club(20), envelope, "helo", inline_limit=4096, analyzer=scanner.analyzer)
    assert prepared.analysis is not None and scanner.model is not None
    analysis, verdict = scanner.judge(prepared.analysis)
    assert type(verdict.features["rules.phishing_score"]) is int  # no phishing rule hit
    whole = dataclasses.replace(prepared, analysis=analysis, verdict=verdict)
    slim = pickle.loads(pickle.dumps(for_the_server(whole, scanner.model)))
    assert slim.verdict is not None
    assert isinstance(slim.verdict.features, packed.Row)
    assert scanner.model.row(slim.verdict.features) == scanner.model.row(verdict.features)
