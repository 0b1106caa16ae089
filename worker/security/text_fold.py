"""Fold text to what a reader sees, for detectors that must not be evaded by encoding (pure).

A detector that matches raw code points is evaded by text that reads the same but is encoded
otherwise: a zero-width space before the ``@`` of an email, a no-break space between the groups
of a card number, a non-breaking hyphen in an SSN, a Cyrillic ``А`` in ``PRIVATE KEY``. `fold`
gives the text those detectors read instead (the PII scan, worker/security/pii.py; the
``refusal`` detector and ``not_contains``, worker/evals/score/). Each character is folded by
these rules, in order:

1. Invisible characters are removed: Unicode general category ``Cf`` (format characters: the
   zero-width space, joiners and non-joiner U+200B-U+200D, the marks U+200E-U+200F, U+2060-U+2064,
   the byte-order mark U+FEFF, the soft hyphen U+00AD, bidi controls) and the other code points
   Unicode calls default ignorable (``Default_Ignorable_Code_Point`` in DerivedCoreProperties.txt:
   U+034F, U+115F-U+1160, U+17B4-U+17B5, U+180B-U+180F, U+3164, U+FE00-U+FE0F, U+FFA0,
   U+E0000-U+E0FFF).
2. NFKC (Unicode Standard Annex #15): compatibility forms become their plain letters, so
   fullwidth ``４``, mathematical ``𝐀`` and ligatures read as ``4``, ``A``, ``fi``; a letter and
   its combining marks are composed together.
3. Combining marks left after NFKC are removed: categories ``Mn`` (nonspacing: U+0332
   combining low line, U+0301 acute on a digit) and ``Me`` (enclosing: U+20DD circle, U+20E3
   keycap), so ``4\u03321\u0332`` reads ``41``. A mark NFKC composed into a precomposed letter
   is part of that letter and stays (``e\u0301`` is ``é``, not ``e``); spacing marks (``Mc``,
   vowel signs of Indic scripts) are letters' parts and stay.
4. Spaces: every non-ASCII space separator (``Zs``) becomes ``" "``; the line and paragraph
   separators U+2028, U+2029 and U+0085 become ``"\\n"``.
5. Dashes: every dash punctuation (``Pd``: U+2010-U+2015, U+2E3A ...) and the minus signs
   U+2212, U+02D7, U+2796 and the hyphen bullet U+2043 become ``"-"``.
6. Look-alikes: Cyrillic and Greek letters that Unicode Technical Standard #39 (confusables.txt)
   lists as confusable with one Latin letter become that letter (`CONFUSABLES`: ``А`` -> ``A``,
   ``ο`` -> ``o``), so a fixed word such as ``BEGIN`` or ``PRIVATE KEY`` spelled with them is
   still that word. Other scripts are left as they are.

ASCII is never changed. `fold_view` also keeps, for each folded character, the span of the
original characters it comes from, so a finding in the folded text maps back to the original
(`FoldedText.original_span`), including any invisible characters and marks inside it; a mark is
mapped with the character it follows, so a span ending at a character covers its marks too.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

#: Default ignorable code points outside category ``Cf`` (Unicode DerivedCoreProperties.txt).
_IGNORABLE_RANGES = ((0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
                     (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
                     (0xE0000, 0xE0FFF))
#: Minus signs and a hyphen bullet that are not category ``Pd`` but read as ``-``.
_DASHES = frozenset("\u2212\u02d7\u2796\u2043")
_LINE_BREAKS = frozenset("\u2028\u2029\u0085")
#: Categories of combining marks: those kept with the character before them, those removed.
_MARKS = frozenset(("Mn", "Mc", "Me"))
_DROPPED_MARKS = frozenset(("Mn", "Me"))
_ASCII_RUN = re.compile(r"[\x00-\x7f]+")
#: Cyrillic and Greek letters confusable with one Latin letter (UTS #39 confusables.txt).
CONFUSABLES: dict[str, str] = {
    # Cyrillic capitals and small letters
    "\u0410": "A", "\u0412": "B", "\u0421": "C", "\u0415": "E", "\u041d": "H", "\u0406": "I",
    "\u04c0": "I", "\u0408": "J", "\u041a": "K", "\u041c": "M", "\u041e": "O", "\u0420": "P",
    "\u0405": "S", "\u0422": "T", "\u0425": "X", "\u0423": "Y", "\u04ae": "Y", "\u051a": "Q",
    "\u051c": "W", "\u0430": "a", "\u0441": "c", "\u0501": "d", "\u0435": "e", "\u04bb": "h",
    "\u0456": "i", "\u0458": "j", "\u04cf": "l", "\u043e": "o", "\u0440": "p", "\u051b": "q",
    "\u0455": "s", "\u051d": "w", "\u0445": "x", "\u0443": "y", "\u04af": "y",
    # Greek capitals and small letters
    "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I",
    "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T",
    "\u03a5": "Y", "\u03a7": "X", "\u03b1": "a", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v",
    "\u03bf": "o", "\u03c1": "p", "\u03c5": "u",
}


@functools.lru_cache(maxsize=65536)
def is_invisible(char: str) -> bool:
    """Return whether ``char`` (one character) is removed by rule 1 (format or ignorable)."""
    if char < "\x80":
        return False
    if unicodedata.category(char) == "Cf":
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE_RANGES)


def drop_invisible(text: str) -> str:
    """Return ``text`` without its invisible characters (rule 1 only)."""
    return text if text.isascii() else "".join(c for c in text if not is_invisible(c))


@dataclass(frozen=True)
class FoldedText:
    """A folded text and where each of its characters comes from.

    Attributes:
        text: the folded text.
        starts: per character of ``text``, the index in the original of the first character it
            comes from; empty when ``text`` is the original (ASCII, folded to itself).
        ends: per character of ``text``, the index just after the last original character it
            comes from (an original character folded to several gives each the same span).
    """

    text: str
    starts: tuple[int, ...] = ()
    ends: tuple[int, ...] = ()

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Map ``text[start:end]`` (``0 <= start < end <= len(text)``) to ``(start, end)`` in
        the original: from the first original character of its first character to the last of
        its last, so invisible characters between them are inside it."""
        if not self.starts:
            return start, end
        return self.starts[start], self.ends[end - 1]


def fold(text: str) -> str:
    """Return ``text`` folded by the rules of the module doc."""
    return fold_view(text).text


def fold_view(text: str) -> FoldedText:
    """Return ``text`` folded by the rules of the module doc, with the map to the original."""
    if text.isascii():
        return FoldedText(text)
    pieces: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = 0
    while at < len(text):
        run = _ASCII_RUN.match(text, at)
        # an ASCII run is its own fold, but its last character may carry combining marks
        stop = (run.end() if run.end() == len(text) else run.end() - 1) if run else at
        if stop > at:
            pieces.append(text[at:stop])
            starts += range(at, stop)
            ends += range(at + 1, stop + 1)
            at = stop
            continue
        if is_invisible(text[at]):
            at += 1
            continue
        last, cluster = _cluster(text, at)
        folded = _fold_cluster(cluster)
        pieces.append(folded)
        starts += [at] * len(folded)
        ends += [last + 1] * len(folded)
        at = last + 1
    return FoldedText("".join(pieces), tuple(starts), tuple(ends))


def _cluster(text: str, at: int) -> tuple[int, str]:
    """The character at ``at`` and the combining marks after it (invisible characters between
    them skipped): the index of its last mark, and its visible characters."""
    last, chars = at, [text[at]]
    for i in range(at + 1, len(text)):
        char = text[i]
        if char < "\x80":
            break
        if _is_mark(char):
            last = i
            chars.append(char)
        elif not is_invisible(char):
            break
    return last, "".join(chars)


@functools.lru_cache(maxsize=65536)
def _is_mark(char: str) -> bool:
    """Whether ``char`` combines with the character before it (a nonzero canonical combining
    class, or category ``Mn``, ``Mc`` or ``Me``), so it is normalised and mapped with it."""
    return bool(unicodedata.combining(char)) or unicodedata.category(char) in _MARKS


@functools.lru_cache(maxsize=65536)
def _fold_cluster(cluster: str) -> str:
    """Rules 2-6 for a character and its combining marks (rule 1 done)."""
    return "".join(_fold_char(c) for c in unicodedata.normalize("NFKC", cluster)
                   if not is_invisible(c) and unicodedata.category(c) not in _DROPPED_MARKS)


def _fold_char(char: str) -> str:
    """Rules 4-6 for one character of NFKC text."""
    if char.isascii():
        return char
    category = unicodedata.category(char)
    if category == "Zs":
        return " "
    if char in _LINE_BREAKS:
        return "\n"
    if category == "Pd" or char in _DASHES:
        return "-"
    return CONFUSABLES.get(char, char)
