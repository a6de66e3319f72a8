"""PII regex taggers: exact spans in several scripts, negatives, counts, and the planted PII of the sample corpus."""

from __future__ import annotations

import json

import pytest

from taggers import registry
from taggers.base import Document, TaggerError
from taggers.builtin.pii import find_pii
from tests.support.documents import sample_rows
from tests.support.repo import REPO_ROOT

ROOT = REPO_ROOT
SAMPLE = ROOT / "examples" / "sample"


def found(text: str) -> list[tuple[str, str]]:
    return [(s.type, text[s.start : s.end]) for s in find_pii(text)]


E, P, I = "EMAIL_ADDRESS", "PHONE_NUMBER", "IP_ADDRESS"  # noqa: E741 - the span types, short as in the tables below


@pytest.mark.parametrize(
    "text, expected",
    [
        # international and national phone formats
        ("call +49 30 1234567 now", [(P, "+49 30 1234567")]),
        ("or call +44 20 7946 0958.", [(P, "+44 20 7946 0958")]),
        ("Phone: (555) 123-4567\n", [(P, "(555) 123-4567")]),
        ("tel 555-123-4567,", [(P, "555-123-4567")]),
        ("tel 555.867.5309", [(P, "555.867.5309")]),
        ("au +33 1 23 45 67 89.", [(P, "+33 1 23 45 67 89")]),
        ("ou 01 23 45 67 89", [(P, "01 23 45 67 89")]),
        ("+81 3-1234-5678", [(P, "+81 3-1234-5678")]),
        ("Tel.: 030/1234567", [(P, "030/1234567")]),
        ("Sie 030 12345678 an", [(P, "030 12345678")]),
        ("(030) 1234567", [(P, "(030) 1234567")]),
        ("al +49 (0)89 987654-0.", [(P, "+49 (0)89 987654-0")]),
        ("Phone: +1 (212) 555-0199", [(P, "+1 (212) 555-0199")]),
        ("call 1-800-555-0199.", [(P, "1-800-555-0199")]),
        ("+7 495 123-45-67", [(P, "+7 495 123-45-67")]),
        ("+55 11 91234-5678", [(P, "+55 11 91234-5678")]),
        # e-mails: exact span without brackets or punctuation
        ("Mail: <aiko.tanaka@example.net>", [(E, "aiko.tanaka@example.net")]),
        ("write to (bob@example.com).", [(E, "bob@example.com")]),
        ("oliver.smith+docs@example.co.uk or", [(E, "oliver.smith+docs@example.co.uk")]),
        ("e-mail:bob@example.org;", [(E, "bob@example.org")]),
        # accented Latin and Cyrillic
        ("écrivez à müller.zoé@exemple.fr, merci", [(E, "müller.zoé@exemple.fr")]),
        ("Пишите: иван@пример.рф или ivan.petrov@example.ru.", [(E, "иван@пример.рф"), (E, "ivan.petrov@example.ru")]),
        ("Телефон: +7 495 123-45-67, почта: ivan@example.ru", [(P, "+7 495 123-45-67"), (E, "ivan@example.ru")]),
        # glued to CJK punctuation and text
        ("联系：alice@example.com。", [(E, "alice@example.com")]),
        ("请联系alice@example.com获取", [(E, "alice@example.com")]),
        ("电话：+86 10 1234 5678，邮箱：wei@example.cn）", [(P, "+86 10 1234 5678"), (E, "wei@example.cn")]),
        ("お問い合わせは（wei.zhang@example.cn、電話 +49 (0)89 987654-0）まで", [(E, "wei.zhang@example.cn"), (P, "+49 (0)89 987654-0")]),
        ("服务器地址：192.168.1.20。", [(I, "192.168.1.20")]),
        # IPs
        ("router at 192.168.0.1.", [(I, "192.168.0.1")]),
        ("listen 0.0.0.0:80", [(I, "0.0.0.0")]),
        ("dns 8.8.8.8 and 1.1.1.1", [(I, "8.8.8.8"), (I, "1.1.1.1")]),
        ("net 10.0.0.0/8", [(I, "10.0.0.0")]),
        ("addr 2001:db8::1 ok", [(I, "2001:db8::1")]),
        ("link fe80::1234%eth0", [(I, "fe80::1234")]),
        ("AAAA   2001:DB8:1000:2000::19\n", [(I, "2001:DB8:1000:2000::19")]),
        ("full 2001:0db8:0000:0000:0000:ff00:0042:8329 x", [(I, "2001:0db8:0000:0000:0000:ff00:0042:8329")]),
        # an address at the start of a line is no section heading
        ('203.0.113.5 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200', [(I, "203.0.113.5")]),
        ("127.0.0.1 localhost\n10.0.0.5 db.internal", [(I, "127.0.0.1"), (I, "10.0.0.5")]),
        ("  * 203.0.113.9 blocked", [(I, "203.0.113.9")]),
        ("192.168.1.1 is my router", [(I, "192.168.1.1")]),
        ("host\xa010.0.0.1 up", [(I, "10.0.0.1")]),  # after an NBSP
        # small parts are addresses too without a section/version context
        ("dns 8.8.4.4 or 10.1.1.1", [(I, "8.8.4.4"), (I, "10.1.1.1")]),
        ("ping 1.2.3.4", [(I, "1.2.3.4")]),
        ("localhost ::1 and [::1]:80", [(I, "::1"), (I, "::1")]),
        # recall: spaced North American numbers, the 00 international prefix
        ("Phone: 555 123 4567", [(P, "555 123 4567")]),
        ("Tel 0049 30 12345678.", [(P, "0049 30 12345678")]),
        # e-mail boundaries: "--" after, "..." before
        ("alice@example.com--or", [(E, "alice@example.com")]),
        ("us...alice@example.com", [(E, "alice@example.com")]),
        # a following number group or an extension is not part of the phone
        ("Call +1 555 123 4567 24 hours a day", [(P, "+1 555 123 4567")]),
        ("+1 555 123 4567 2023", [(P, "+1 555 123 4567")]),
        ("Tel 030 12345678 4 times", [(P, "030 12345678")]),
        ("ph +1-555-123-4567-1234", [(P, "+1-555-123-4567")]),
        ("Call +49 30 12345678 2023 edition", [(P, "+49 30 12345678")]),
        ("+44 20 7946 0958 24 hours", [(P, "+44 20 7946 0958")]),
        ("+33 1 23 45 67 89 10 fois", [(P, "+33 1 23 45 67 89")]),
    ],
)
def test_exact_spans(text, expected):
    assert found(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # dotted section numbers and versions are not IPs
        "see 12.3.2.3.1 for details",
        "version 1.2.3.4.5 released",
        "5.2.1.1. Dependencies",
        "See Section\xa04.2.13.1, “Guided partitioning”",
        "- 4.8.3.1. Positional-or-Keyword Arguments",
        "Linux 2.6.18.3-exp (linmac)",
        "As of 2.6.8.1, comments",
        "Firefox/2.0.0.11",
        "v1.2.3.4",
        "10.0.0.256 and 300.1.1.1",
        "chapter 10.1.2.3 and § 1.2.3.4",  # section numbers by context
        "see 第 6.1.2.2 节 and 11.7.3.2 节",
        "Section 4.2.13.1",
        "5.2.1.1 Dependencies",  # a heading without the final dot: section-like parts
        "Not implemented, as of 2.6.8.1",
        "0011 2233 4455",  # 00 prefix but equal groups
        # hex dumps
        "0x1234 5678 9abc",
        "de ad be ef 12 34 56 78",
        "00000010  48 65 6c 6c 6f 20 57 6f  72 6c 64",
        "0010: 0123 4567 89ab cdef",
        # dates, tables, plain digit runs, other numbers
        "2023-10-05",
        "05.10.2023",
        "05/10/2023",
        "on 10-05-2023",
        "12345678901234",
        "| 1234 | 5678 | 9012 |",
        "row 012 013 023 123",
        "Boston, MA 02111-1307, USA",
        "ISBN 978-3-16-148410-0",
        "1,234,567.89 and 3.14159265",
        "x = +1 2",
        # code and times are not IPv6
        "std::vector<int> and a::b",
        "12:34:56",
        "00:1a:2b:3c:4d:5e",
        "Usage::",
        # not e-mails
        "x@y and a@b.c and user@localhost and @user",
        # Usenet Message-IDs in fortunes
        "-- Larry Wall in <7886@jpl-devvax.JPL.NASA.GOV>",
        "-- Larry Wall in <1992Jul2.222039.26476@netlabs.com>",
        "-- Larry Wall in <199705101952.MAA00756@wall.org>",
        "<1234@host.UUCP>",
    ],
)
def test_negatives(text):
    assert found(text) == []


def test_message_ids_are_an_option_and_digit_addresses_stay():
    text = "-- Larry Wall in <7886@jpl-devvax.JPL.NASA.GOV>"
    assert [(s.start, s.end) for s in find_pii(text, keep_message_ids=True)] == [(18, 46)]
    assert found("QQ: 123456789@qq.com") == [(E, "123456789@qq.com")]  # not in <...>: an address
    assert found("Dave Mack (mack@inco.UUCP)") == [(E, "mack@inco.UUCP")]  # old UUCP mailbox: a person


def test_offsets_are_code_points():
    text = "Ünïcödé 😀 文字 — contact: zoë@example.com"
    (span,) = find_pii(text)
    start = len("Ünïcödé 😀 文字 — contact: ")  # 24 code points (the emoji is one, not two UTF-16 units)
    assert (span.start, span.end) == (start, start + 15) == (24, 39)
    assert text[span.start : span.end] == "zoë@example.com"


def test_pii_regex_doc_score():
    tagger = registry.get("pii_regex")()
    text = "mail bob@example.com or call +44 20 7946 0958 today"
    spans = tagger.predict(Document("a", text))
    assert spans == [
        (E, 5, 20, 1.0),
        (P, 29, 45, 1.0),
        ("doc", 0, len(text), 2 / 9),
    ]
    assert tagger.predict(Document("b", "")) == [("doc", 0, 0, -1.0)]
    assert tagger.group(tagger.predict(Document("c", "no pii here"))) == {"doc": [[0, 11, 0.0]]}


def test_pii_regex_with_counts():
    tagger = registry.get("pii_regex_with_counts")()
    text = "a@example.com b@example.com 10.0.2.15 +33 1 23 45 67 89"
    grouped = tagger.group(tagger.predict(Document("a", text)))
    n = len(text)
    assert grouped == {
        "doc_count": [[0, n, 4.0]],
        "doc_frac": [[0, n, round((13 + 13 + 9 + 17) / n, 5)]],
        "EMAIL_ADDRESS_count": [[0, n, 2.0]],
        "PHONE_NUMBER_count": [[0, n, 1.0]],
        "IP_ADDRESS_count": [[0, n, 1.0]],
        "EMAIL_ADDRESS": [[0, 13, 1.0], [14, 27, 1.0]],
        "IP_ADDRESS": [[28, 37, 1.0]],
        "PHONE_NUMBER": [[38, n, 1.0]],
    }
    empty = tagger.group(tagger.predict(Document("b", "")))
    assert empty["doc_count"] == [[0, 0, 0.0]] and empty["doc_frac"] == [[0, 0, -1.0]]
    only_mail = registry.get("pii_regex_with_counts")(types=["EMAIL_ADDRESS"])
    assert {s.type for s in only_mail.predict(Document("c", text))} == {"EMAIL_ADDRESS", "EMAIL_ADDRESS_count", "doc_count", "doc_frac"}
    # Only the selected types' counts are written, also for a document without PII.
    assert set(only_mail.group(only_mail.predict(Document("d", "nothing")))) == {"doc_count", "doc_frac", "EMAIL_ADDRESS_count"}
    assert set(only_mail.group([])) == {"doc_count", "doc_frac", "EMAIL_ADDRESS_count"}


def test_types_are_filtered_before_overlaps_are_resolved():
    # The phone "+49 30 12345678" overlaps the e-mail "12345678@example.com" and wins when
    # every type is wanted; asking for e-mails only must still find the e-mail.
    text = "call +49 30 12345678@example.com"
    assert found(text) == [(P, "+49 30 12345678")]
    for name in ("pii_regex", "pii_regex_with_counts"):
        tagger = registry.get(name)(types=["EMAIL_ADDRESS"])
        grouped = tagger.group(tagger.predict(Document("a", text)))
        assert grouped["EMAIL_ADDRESS"] == [[12, 32, 1.0]], name
    counts = registry.get("pii_regex_with_counts")(types=["EMAIL_ADDRESS"])
    assert counts.group(counts.predict(Document("a", text)))["EMAIL_ADDRESS_count"] == [[0, 32, 1.0]]


def test_bad_options():
    with pytest.raises(TaggerError, match="types"):
        registry.get("pii_regex")(types=["SSN"])
    with pytest.raises(TaggerError, match="keep_message_ids"):
        registry.get("pii_regex")(keep_message_ids="yes")
    with pytest.raises(TaggerError, match="keep_message_ids"):
        registry.get("pii_regex")(keep_message_ids="no")
    for bad in ("EMAIL_ADDRESS", {"EMAIL_ADDRESS": 1}, [["EMAIL_ADDRESS"]], 3):
        with pytest.raises(TaggerError, match="types"):
            registry.get("pii_regex_with_counts")(types=bad)


def _sample_docs() -> list[dict]:
    return sample_rows()


@pytest.mark.skipif(not (SAMPLE / "planted.json").exists(), reason="sample corpus not present")
def test_every_planted_email_and_phone_in_the_sample_corpus():
    planted_ids = set(json.loads((SAMPLE / "planted.json").read_text())["pii_injected"])
    tagger = registry.get("pii_regex_with_counts")()
    docs = _sample_docs()
    results = tagger.predict_batch([Document.from_row(r) for r in docs])
    kinds = {"email": E, "phone": P}
    checked, planted_docs = 0, set()
    for row, spans in zip(docs, results):
        got = {(s.type, s.start, s.end) for s in spans}
        for pii in row["metadata"].get("pii", []):
            if pii["type"] not in kinds:
                continue  # names are not regex PII
            assert row["text"][pii["start"] : pii["end"]] == pii["value"]
            assert (kinds[pii["type"]], pii["start"], pii["end"]) in got, (row["id"], pii)
            checked += 1
            planted_docs.add(row["id"])
    assert planted_ids <= planted_docs
    assert checked >= 96  # 48 planted documents (+ duplicates), an e-mail and a phone each
    # Message-IDs in fortunes are dropped, real sign-off addresses kept.
    fortunes = [(r, s) for r, s in zip(docs, results) if r["source"] == "fortunes"]
    emails = [r["text"][s.start : s.end] for r, ss in fortunes for s in ss if s.type == E]
    assert "mack@inco.UUCP" in emails and "peter.hunter@blackfriars.oxford.ac.uk" in emails
    assert not [e for e in emails if e.startswith(("1991", "1992", "1997", "1998"))]
