"""The PII detectors, table-driven: what each finds, what it must not, and the redaction.

Credential-shaped values are assembled at test time (never committed as literals). The card
numbers are the issuers' published test numbers; the national ids are the documented
specimens (SSA's ranges, HMRC's NINO format, the Government of Canada's sample SIN
046 454 286, an INSEE NIR with its key, a DNI with its letter).
"""

from __future__ import annotations

import random
import string

import pytest

from worker.security.pii import (
    CATEGORIES,
    PiiRedactor,
    luhn_ok,
    redact_findings,
    scan,
)


def _key(prefix: str, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    rng = random.Random(prefix)
    return prefix + "".join(rng.choice(alphabet) for _ in range(n))


AWS = _key("AKIA", 16, string.ascii_uppercase + string.digits)
GITHUB = _key("ghp_", 36)
SK = _key("sk-proj-", 40)
SLACK = _key("xoxb-", 30)
GOOGLE = _key("AIza", 35)
STRIPE = _key("sk_" + "live_", 24)
PEM = "-----BEGIN " + "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END " + \
    "PRIVATE KEY-----"

#: (text, the kinds found in order) for true positives.
FOUND = [
    ("write to jane.doe+billing@mail.example.co.uk today", ["email"]),
    ("a@b.io", ["email"]),
    ("call +1 415-555-0132 now", ["phone"]),
    ("(415) 555-0132", ["phone"]),
    ("415.555.0132", ["phone"]),
    ("+44 20 7946 0958", ["phone"]),
    ("+33 1 23 45 67 89", ["phone"]),
    ("tel:+14155550132", ["phone"]),
    ("visa 4111 1111 1111 1111", ["card"]),
    ("mc 5555-5555-5555-4444", ["card"]),
    ("amex 3782 822463 10005", ["card"]),
    ("raw 4012888888881881", ["card"]),
    ("ssn 123-45-6789", ["national_id.us"]),
    ("nino AB 12 34 56 C", ["national_id.uk"]),
    ("sin 046 454 286", ["national_id.ca"]),
    ("nir 2 55 08 14 168 025 38", ["national_id.fr"]),
    ("dni 12345678Z and nie X1234567L", ["national_id.es", "national_id.es"]),
    ("from 192.168.1.10 to 8.8.8.8", ["ipv4", "ipv4"]),
    ("v6 2001:db8::ff00:42:8329 and fe80::1ff:fe23:4567:890a", ["ipv6", "ipv6"]),
    (f"AWS {AWS}", ["aws_access_key_id"]),
    (f"token={GITHUB}", ["github_token"]),
    (f"OPENAI_API_KEY={SK}", ["sk_key"]),
    (f"slack {SLACK}", ["slack_token"]),
    (f"key {GOOGLE}", ["google_api_key"]),
    (f"stripe {STRIPE}", ["stripe_key"]),
    (f"here:\n{PEM}\nbye", ["pem_private_key"]),
    ("cut " + PEM.split("-----END")[0], ["pem_private_key"]),
]

#: Texts with nothing to find (false positives the detectors must not make).
CLEAN = [
    "no personal data here, just words",
    "user at example dot com",
    "@handle and email@ alone",
    "date 2024-01-15, time 12:30:45, order 12345, total 1,234.56",
    "version 1.2.3 and 1.2.3.4.5, build 300.1.1.1",
    "isbn 978-3-16-148410-0, zip 94103-1234, id 12345678901",
    "1234 5678 9012 3456 fails the Luhn check",
    "4111111111111112 fails it too",
    "0000 0000 0000 0000 passes Luhn but is no card",
    "ssn-like 000-12-3456 666-12-3456 900-12-3456 123-00-4567 123-45-0000",
    "nino with a barred prefix GB123456A, a bad suffix AB123456E",
    "sin 046 454 287 (bad Luhn)",
    "nir 2 55 08 14 168 025 39 (bad key)",
    "dni 12345678A (wrong letter)",
    "sk-short and AKIA123 and ghp_tooshort",
    "the word ask-about-it-later-please-thanks",
    "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
    "a sha 3f786850e387550fdab836ed7e6dc881de23001b",
    "a slice x[1::2], a scope std::vector, a time 12:30",
    "groups 4111 11-11 1111 1111 of two digits are no card",
]


@pytest.mark.parametrize(("text", "kinds"), FOUND)
def test_finds(text: str, kinds: list[str]) -> None:
    assert [f.kind for f in scan(text)] == kinds


@pytest.mark.parametrize("text", CLEAN)
def test_no_false_positive(text: str) -> None:
    assert scan(text) == []


@pytest.mark.parametrize(("digits", "ok"), [
    ("4111111111111111", True), ("79927398713", True), ("378282246310005", True),
    ("4111111111111112", False), ("79927398710", False), ("1234567812345678", False),
    ("0", True), ("", False),
])
def test_luhn(digits: str, ok: bool) -> None:
    assert luhn_ok(digits) is ok


def test_categories_and_countries_choose() -> None:
    text = "jane@example.com 192.168.1.10 123-45-6789 AB123456C"
    assert [f.category for f in scan(text, ["ip"])] == ["ip"]
    assert [f.kind for f in scan(text, ["national_id"], ["uk"])] == ["national_id.uk"]
    assert [f.category for f in scan(text)] == ["email", "ip", "national_id", "national_id"]


#: tester16 hole 3, kept verbatim: (text, the values found and their kinds).
FIELD_FOUND = [
    ("call 1-555-123-4567", [("1-555-123-4567", "phone")]),
    ("call 5551234567", [("5551234567", "phone")]),  # bare digits: found after a phone word
    ("ring 07700 900123", [("07700 900123", "phone")]),
    ("appelez 01 23 45 67 89", [("01 23 45 67 89", "phone")]),
    ("mail jürgen@example.de", [("jürgen@example.de", "email")]),
    ("card 4111 1111-1111 1111", [("4111 1111-1111 1111", "card")]),
    ("groups 4111-1111 1111-1111 mix separators", [("4111-1111 1111-1111", "card")]),
    ("ssn 123 45 6789", [("123 45 6789", "national_id.us")]),
    ("Phone: 02079460958.", [("02079460958", "phone")]),
    ("call me at 5551234567", [("5551234567", "phone")]),
    ("write to müller@bücher.de", [("müller@bücher.de", "email")]),
    ("at 1.2.3.4 since version 2", [("1.2.3.4", "ipv4")]),
]
#: tester16 hole 3's false positives, and the rules behind them.
FIELD_CLEAN = [
    "upgrade to version 1.2.3.4 of the app", "release 10.0.0.1 ships", "v1.2.3.4",
    "from 1999-2005-2010", "ids 1234-5678-9012",  # three groups of 12 digits: no phone
    "commit 4111111111111111deadbeef", "x4111111111111111",  # digits inside a word
    "order 5551234567", "timestamp 1700000000",  # bare 10 digits, no phone word
    "ssn-like 123 45 0000 and 123-45 6789",  # a bad serial; mixed SSN separators
]


@pytest.mark.parametrize(("text", "values"), FIELD_FOUND)
def test_field_cases_are_found(text: str, values: list[tuple[str, str]]) -> None:
    assert [(text[f.start:f.end], f.kind) for f in scan(text)] == values


@pytest.mark.parametrize("text", FIELD_CLEAN)
def test_field_false_positives_are_not_made(text: str) -> None:
    assert scan(text) == []


@pytest.mark.parametrize(("allow", "text", "left"), [
    (["support@example.com"], "SUPPORT@example.com", []),
    (["Support@Example.COM"], "mail support@example.com", []),
    (["support@example.com"], "mail sales@example.com", ["sales@example.com"]),
    (["ABC"], "call 5551234567", ["5551234567"]),
])
def test_allow_is_case_insensitive_for_emails(allow: list[str], text: str,
                                              left: list[str]) -> None:
    assert [text[f.start:f.end] for f in scan(text, allow=allow)] == left


def test_allow_leaves_known_values() -> None:
    text = "write to support@acme.test, not jane@acme.test"
    found = scan(text, allow=["support@acme.test"])
    assert [text[f.start:f.end] for f in found] == ["jane@acme.test"]


def test_a_card_is_not_also_a_phone() -> None:
    assert [f.category for f in scan("4111-1111-1111-1111")] == ["card"]
    assert [f.category for f in scan("4111 1111 1111 1111 +1 415 555 0132")] == [
        "card", "phone"]


def test_many_findings_are_all_found() -> None:
    text = "jane@example.com 4111 1111 1111 1111 +1 415 555 0132 " * 500
    assert [f.category for f in scan(text)] == ["email", "card", "phone"] * 500


def test_redaction_replaces_every_finding_and_keeps_the_rest() -> None:
    text = f"mail jane@example.com, card 4111 1111 1111 1111, key {SK}."
    assert redact_findings(text, scan(text)) == (
        "mail [REDACTED email], card [REDACTED card], key [REDACTED api_key].")


def test_pii_redactor_walks_values_and_only_its_categories() -> None:
    value = {"out": ["jane@example.com at 10.0.0.1"], "n": 3}
    assert PiiRedactor(["email"]).redact_value(value) == {
        "out": ["[REDACTED email] at 10.0.0.1"], "n": 3}
    assert PiiRedactor(CATEGORIES).redact_value(value)["out"] == [
        "[REDACTED email] at [REDACTED ip]"]
