"""The decorations judges put around a verdict, and how a line of a reply reads (pure).

Judges that commit to one verdict still dress it (issue 31): an emoji beside the word
(``✅ PASS``, ``PASS ✅``, ``**PASS** 👍``), markup tags around it (``<verdict>PASS</verdict>``,
``<answer>FAIL</answer>``, ``<VERDICT-<nonce>>PASS</VERDICT-<nonce>>``), or a hedge about tone
or style after it (``PASS, though the tone could be warmer``). worker/evals/score/judge_parse.py
reads a reply through `plain` (tags rewritten as labels, symbols removed) and its first and
last lines through `line_verdicts`; a line whose emoji say the other verdict (``✅ FAIL``) gives
both verdicts, which is a judge error.
"""

from __future__ import annotations

import re
import unicodedata

#: Emoji that say "pass" or "fail" on a line that gives a verdict (the variation selector
#: U+FE0F is removed before, worker/security/text_fold.drop_invisible).
PASS_SYMBOLS = frozenset("\u2705\u2714\u2611\U0001f44d\U0001f7e2\U0001f197\U0001f49a")
FAIL_SYMBOLS = frozenset("\u274c\u274e\u2716\u2717\u2718\U0001f44e\U0001f534\U0001f6ab\u26d4")
#: Verdict words as a reply writes them (whole words: ``bypass`` and ``fails`` are not).
VERDICT_WORD = re.compile(r"\b(pass|fail)(?:ed)?\b", re.IGNORECASE)
_LABEL = r"(?:final\s+)?(?:verdict|result|grade|decision|answer|judg(?:e)?ment)"
_TAG_NAME = (r"(?:final[ _-]?)?(?:verdict|result|grade|decision|answer|judg(?:e)?ment|score"
             r"|rating)|(?:verdict|score)-[0-9a-f]{16}")
#: A short tagged value: ``<verdict> **PASS** </verdict>``, ``<score>4</score>``, the tag's
#: name any case, attributes allowed, closed by the same name.
_TAGGED = re.compile(r"<\s*(" + _TAG_NAME + r")(?:\s[^<>]*)?>([^<>]{0,40})<\s*/\s*\1\s*>",
                     re.IGNORECASE)
_MARKUP = " \t\r\n*_`\"'.!"
#: What is stripped around a line that is only a verdict: markdown and punctuation.
STRIP = " \t*_`#>\"'.!:;,()[]-"
_TAGGED_VALUE = re.compile(r"(?:pass|fail)(?:ed)?|\d+(?:\.\d+)?(?:\s*/\s*\d+)?", re.IGNORECASE)
#: A line that starts with a verdict (after markdown, and an optional label), then either ends
#: or goes on after a separator: punctuation, a dash or bracket, or a conjunction.
_LEADING = re.compile(r"[\s*_`#>\"']*(?:" + _LABEL + r"\s*[:=\-]\s*[*_`\"'\s]*)?"
                      r"(pass|fail)(?:ed)?[*_`\"']*"
                      r"(?:[\s.!]*$|[,;:.!]\s|\s+-\s|\s*[(\u2013\u2014]"
                      r"|\s+(?:but|though|although|however|yet|with|because|since)\b)(.*)",
                      re.IGNORECASE)
#: Emoji skin-tone modifiers (category Sk), removed with the emoji they follow.
_SKIN_TONES = range(0x1F3FB, 0x1F400)


def plain(text: str) -> str:
    """Return ``text`` with short tagged verdicts and scores written as labels and symbols
    removed (`drop_symbols`).

    ``<verdict>PASS</verdict>`` becomes ``Verdict: PASS``, ``<score>4</score>`` ``Score: 4``,
    ``<VERDICT-<nonce>>FAIL</VERDICT-<nonce>>`` ``VERDICT-<nonce>: FAIL``. A tag whose content is
    not only a verdict word or a number (``<answer>The code is 4</answer>``) is left as it is.
    """
    return drop_symbols(_TAGGED.sub(_untag, text))


def _untag(found: re.Match[str]) -> str:
    value = found[2].strip(_MARKUP)
    if not _TAGGED_VALUE.fullmatch(value):
        return found[0]
    name = found[1] if "-" in found[1] else "Verdict" if value[0].isalpha() else "Score"
    return f"{name}: {value}"


def drop_symbols(text: str) -> str:
    """Return ``text`` without symbols: Unicode category ``So`` (emoji, dingbats such as
    U+2705 and U+274C), enclosing marks (``Me``: the keycap U+20E3) and skin-tone modifiers
    U+1F3FB-U+1F3FF. Letters, digits, punctuation and markdown stay."""
    return "".join(c for c in text if c < "\x80" or not _is_symbol(c))


def _is_symbol(char: str) -> bool:
    return unicodedata.category(char) in ("So", "Me") or ord(char) in _SKIN_TONES


def symbol_verdicts(line: str) -> set[str]:
    """Return the verdicts the emoji of ``line`` say: ``{"pass"}`` for ``✅``, ``{"fail"}``
    for ``❌`` (`PASS_SYMBOLS`, `FAIL_SYMBOLS`), both when it has both, none without them."""
    chars = set(line)
    return ({"pass"} if chars & PASS_SYMBOLS else set()) | \
        ({"fail"} if chars & FAIL_SYMBOLS else set())


def line_verdicts(line: str) -> set[str]:
    """Return the verdicts one line of a reply gives when it starts with one.

    The line (its symbols removed by the caller, `plain`) reads as a verdict when, past
    markdown and an optional label (``Verdict:``), it is a verdict word alone (``**PASS**``,
    ``Failed.``) or one followed by a separator and more text (``PASS, though the tone could
    be warmer``, ``FAIL - invents a fee``, ``Pass (the style is loose)``). The other verdict
    word anywhere in that text makes it give both (``PASS, but FAIL on tone``). Empty when the
    line does not start with a verdict (``Fail to see``, ``Passing grade``, ``bypass``).
    """
    alone = line.strip(STRIP).lower()
    if alone in ("pass", "passed", "fail", "failed"):
        return {alone[:4]}
    found = _LEADING.match(line)
    if found is None:
        return set()
    return {found[1].lower()} | {w.lower() for w in VERDICT_WORD.findall(found[2])}
