"""`worker.security.text_fold`: each folding rule, and the map back to the original text."""

from __future__ import annotations

import pytest

from worker.security.text_fold import drop_invisible, fold, fold_view, is_invisible


@pytest.mark.parametrize(("text", "folded"), [
    # 1. invisible characters
    ("a\u200bb\u200cc\u200dd\u200ee\u200ff", "abcdef"),
    ("a\u2060b\u2061c\u2062d\u2063e\u2064f\ufeffg\u00adh", "abcdefgh"),
    ("a\u202eb\u2066c\u034fd\ufe0fe\U000e0041f", "abcdef"),  # bidi, CGJ, selectors, tags
    # 2. NFKC
    ("\uff14\uff11 \U0001d400\U0001d401 \ufb01", "41 AB fi"),
    ("e\u0301", "\u00e9"),  # composed
    # 3. combining marks left after NFKC (Mn, Me); precomposed letters and Mc stay
    ("4\u03321\u03321\u03321\u0332", "4111"),
    ("1\u03012\u03013\u0301-4\u03015\u0301", "123-45"),
    ("1\u20e3 2\u20dd x\u0301\u0332", "1 2 x"),
    ("e\u0332\u0301 caf\u00e9 \u0915\u093f", "\u00e9 caf\u00e9 \u0915\u093f"),
    ("\u0332a", "a"),  # a mark with nothing before it
    # 3. spaces and line separators
    ("a\u00a0b\u2007c\u202fd\u3000e\u1680f", "a b c d e f"),
    ("a\u2028b\u2029c\u0085d", "a\nb\nc\nd"),
    # 4. dashes and minus signs
    ("a\u2010b\u2011c\u2012d\u2013e\u2014f\u2015g\u2212h\u2e3ai\u02d7j", "a-b-c-d-e-f-g-h-i-j"),
    # 5. look-alikes
    ("\u0412\u0415GIN RS\u0410 PRIV\u0391TE K\u0395Y", "BEGIN RSA PRIVATE KEY"),
    ("\u0455k-\u0440r\u043ej", "sk-proj"),
    # other scripts and ASCII stay as they are
    *[(text, text) for text in ("\u0416\u0436 \u03a9\u03c9 \u4e2d\u6587 caf\u00e9",
                                "plain ASCII\t-- as is\n")],
])
def test_fold(text: str, folded: str) -> None:
    assert fold(text) == folded


def test_ascii_is_its_own_view() -> None:
    view = fold_view("jane@example.com")
    assert (view.text, view.starts, view.original_span(5, 12)) == ("jane@example.com", (), (5, 12))


@pytest.mark.parametrize(("text", "folded", "spans"), [
    # (start, end) in the folded text -> (start, end) in the original
    ("a\u200bb", "ab", {(0, 2): (0, 3), (0, 1): (0, 1), (1, 2): (2, 3)}),
    ("\u200bab\u200b", "ab", {(0, 2): (1, 3)}),
    ("\ufb01x", "fix", {(0, 1): (0, 1), (1, 2): (0, 1), (1, 3): (0, 2)}),
    ("e\u0301!", "\u00e9!", {(0, 1): (0, 2), (1, 2): (2, 3)}),
    ("u\u200b\u0308", "\u00fc", {(0, 1): (0, 3)}),  # marks compose across an invisible one
    # a removed mark is inside the span of the character it follows
    ("4\u03321\u0332!", "41!", {(0, 2): (0, 4), (1, 2): (2, 4), (2, 3): (4, 5)}),
    ("a1\u0301\u0332\u200bb", "a1b", {(0, 2): (0, 4), (1, 3): (1, 6)}),
    ("9\u20e3", "9", {(0, 1): (0, 2)}),
    ("12\u00a034", "12 34", {(0, 5): (0, 5), (3, 5): (3, 5)}),
])
def test_spans_map_back_to_the_original(text: str, folded: str,
                                         spans: dict[tuple[int, int], tuple[int, int]]) -> None:
    view = fold_view(text)
    assert view.text == folded
    assert {span: view.original_span(*span) for span in spans} == spans


def test_drop_invisible_only_removes() -> None:
    assert drop_invisible("VER\u200bDICT:\u00a0PA\u00adSS \u0410") == "VERDICT:\u00a0PASS \u0410"
    assert [is_invisible(c) for c in "\u200b\u00ad\ufe0f a\u00a0-"] == [
        True, True, True, False, False, False, False]
