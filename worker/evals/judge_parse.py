"""Read a verdict, a score or a pairwise pick from a judge model's reply (pure, fail closed).

Judges answer in many shapes: ``PASS``, ``Pass.``, ``**PASS**``, ``Verdict: pass``, a fenced
``json`` block, a score with prose around it. The reader accepts, in this order:

1. JSON: the reply, or its first fenced code block, is a JSON object with a verdict key
   (``verdict``, ``result``, ``grade``, ``decision``, ``label``, ``answer``: ``pass``/``fail``),
   a boolean ``pass``/``passed``, or a score key (``score``, ``rating``). A JSON object without
   any of them is an error, never a pass.
2. A labelled verdict anywhere: ``Verdict: FAIL`` (also result/grade/decision/answer); when the
   labels disagree, an error.
3. A first or last line that is nothing but the verdict, once markdown (``*``, ``_``, `` ` ``,
   ``#``, ``>``) and punctuation are stripped; if the first and last lines disagree, an error.

Words are matched whole, so ``bypass`` is not ``pass`` and ``PASSFAIL`` is neither. Zero-width
characters (U+200B-U+200D, U+2060, U+FEFF) are removed first. Anything else (an empty reply,
``I can't judge this``) is unscored: `Verdict.score` is None with the reason in ``error``.
Scores on the 1-5 scale map to 0-1 as (score - 1) / 4.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

Scale = Literal["pass_fail", "1-5"]
#: The scales a judge may use.
SCALES: tuple[str, ...] = ("pass_fail", "1-5")

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_LABEL = r"(?:final\s+)?(?:verdict|result|grade|decision|answer)"
_LABELLED = re.compile(_LABEL + r"\s*[:=\-]\s*[*_`\"'\s]*(pass|fail)(?:ed)?\b", re.IGNORECASE)
_SCORE_LABELLED = re.compile(r"\b(?:score|rating|grade)\s*[:=]?\s*[*_`\s]*(\d+(?:\.\d+)?)"
                             r"\s*(?:/\s*5|out of 5)?", re.IGNORECASE)
_SCORE_FRACTION = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:/\s*5|out of 5)\b", re.IGNORECASE)
_STRIP = " \t*_`#>\"'.!:;,()[]-"
_VERDICT_KEYS = ("verdict", "result", "grade", "decision", "label", "answer")
_SCORE_KEYS = ("score", "rating")
_PICK = re.compile(r"\b(?:winner|verdict|answer|choice|better|preferred)\s*[:=\-]\s*[*_`\"'\s]*"
                   r"(?:response\s+|output\s+)?(a|b|tie)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    """A parsed judge reply.

    Attributes:
        score: 0-1 (1 pass, 0 fail; a 1-5 score mapped), or None when unscored.
        error: why no score was read ("" when scored).
    """

    score: float | None
    error: str = ""


def clean(text: str) -> str:
    """Remove zero-width characters and surrounding whitespace."""
    return text.translate(_ZERO_WIDTH).replace("\u00a0", " ").strip()


def parse_verdict(text: str, scale: Scale = "pass_fail") -> Verdict:
    """Read a pass/fail verdict or a 1-5 score from a judge reply (rules in the module doc)."""
    reply = clean(text)
    if not reply:
        return Verdict(None, "empty reply")
    document = _json_object(reply)
    if document is not None:
        return _from_json(document, scale) if isinstance(document, dict) else Verdict(
            None, f"the JSON in the reply is not an object: {_clip(reply)}")
    return _from_text(reply) if scale == "pass_fail" else _score_from_text(reply)


def _json_object(reply: str) -> Any:
    """Return the parsed JSON of the reply or its first fenced block, None if there is none;
    a fenced block that is not JSON gives the string "" (an error downstream)."""
    fenced = _FENCE.search(reply)
    body = fenced.group(1).strip() if fenced else reply
    if not body.startswith(("{", "[")):
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return "" if fenced else None


def _from_json(doc: dict[str, Any], scale: Scale) -> Verdict:
    keys = {str(k).lower(): v for k, v in doc.items()}
    if scale == "pass_fail":
        for key in ("pass", "passed"):
            if isinstance(keys.get(key), bool):
                return Verdict(1.0 if keys[key] else 0.0)
        for key in _VERDICT_KEYS:
            word = _word(keys.get(key))
            if word in ("pass", "passed", "fail", "failed"):
                return Verdict(1.0 if word.startswith("pass") else 0.0)
    for key in _SCORE_KEYS:
        if key in keys:
            return _map_score(keys[key], scale)
    return Verdict(None, f"the JSON reply has no verdict or score: {_clip(json.dumps(doc))}")


def _word(value: Any) -> str:
    return value.strip(_STRIP).lower() if isinstance(value, str) else ""


def _map_score(value: Any, scale: Scale) -> Verdict:
    try:
        number = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        return Verdict(None, f"score {value!r} is not a number")
    if scale == "pass_fail":
        if number in (0.0, 1.0):
            return Verdict(number)
        return Verdict(None, f"score {value!r} is not 0 or 1 on a pass/fail scale")
    if not 1 <= number <= 5:
        return Verdict(None, f"score {value!r} is outside 1-5")
    return Verdict((number - 1) / 4)


def _from_text(reply: str) -> Verdict:
    labelled = {m.lower() for m in _LABELLED.findall(reply)}
    if not labelled:
        labelled = {w for w in _end_lines(reply) if w in ("pass", "fail")}
    if len(labelled) > 1:
        return Verdict(None, f"the reply gives both verdicts: {_clip(reply)}")
    if labelled:
        return Verdict(1.0 if labelled.pop() == "pass" else 0.0)
    return Verdict(None, f"no verdict (PASS or FAIL) in the reply: {_clip(reply)}")


def _end_lines(reply: str) -> list[str]:
    """Return the first and last non-empty lines, stripped of markdown and punctuation."""
    lines = [line.strip(_STRIP).lower() for line in reply.splitlines() if line.strip(_STRIP)]
    return lines[:1] + lines[-1:]


def _score_from_text(reply: str) -> Verdict:
    labelled = _SCORE_LABELLED.findall(reply)
    if labelled:
        return _map_score(labelled[-1], "1-5")
    fraction = _SCORE_FRACTION.findall(reply)
    if fraction:
        return _map_score(fraction[-1], "1-5")
    lines = [line.strip(_STRIP) for line in reply.splitlines() if line.strip(_STRIP)]
    for line in (lines[-1], lines[0]) if lines else ():
        if re.fullmatch(r"\d+(?:\.\d+)?", line):
            return _map_score(line, "1-5")
    return Verdict(None, f"no score (1-5) in the reply: {_clip(reply)}")


def parse_pick(text: str) -> str | None:
    """Read a pairwise judge's pick: ``A``, ``B`` or ``tie``; None when there is none.

    Accepts JSON ``{"winner": "A"}``, a labelled ``Winner: B`` (also verdict/answer/choice/
    better/preferred), or a first or last line that is only ``A``, ``B`` or ``tie``
    (markdown and punctuation stripped); conflicting picks give None.
    """
    reply = clean(text)
    document = _json_object(reply) if reply else None
    if isinstance(document, dict):
        keys = {str(k).lower(): v for k, v in document.items()}
        for key in ("winner", "verdict", "choice", "better", "preferred", "answer"):
            word = _word(keys.get(key)).removeprefix("response ").removeprefix("output ")
            if word in ("a", "b", "tie"):
                return word.upper() if word != "tie" else "tie"
        return None
    picks = {m.lower() for m in _PICK.findall(reply)}
    if not picks:
        picks = {w for w in _end_lines(reply) if w in ("a", "b", "tie")}
    if len(picks) != 1:
        return None
    pick = picks.pop()
    return pick.upper() if pick != "tie" else "tie"


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
