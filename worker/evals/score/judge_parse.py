"""Read a verdict, a score or a pairwise pick from a judge model's reply (pure, fail closed).

Judges answer in many shapes: ``PASS``, ``Pass.``, ``**PASS**``, ``Verdict: pass``, a fenced
``json`` block, a score with prose around it. A reply is read only when it commits to exactly
one verdict, or one score on the configured scale. The reader accepts, in this order:

0. Decorations go first (worker/evals/score/judge_lines.py, issue 31): a short tagged verdict
   or score reads as a label (``<verdict>PASS</verdict>`` as ``Verdict: PASS``, also
   ``<answer>``, ``<result>``, ``<score>``, ``<VERDICT-<nonce>>``), and emoji are removed
   (``✅ PASS`` reads ``PASS``); a verdict line whose emoji say the other verdict (``✅ FAIL``)
   gives both verdicts.
1. JSON: the reply, or its first fenced code block, is a JSON object with a verdict key
   (``verdict``, ``result``, ``grade``, ``decision``, ``label``, ``answer``: ``pass``/``fail``,
   or 0/1 as Ragas writes it), a boolean ``pass``/``passed`` (or, on the pass/fail scale, a
   boolean ``score`` as LangChain's openevals writes it), or a score key (``score``,
   ``rating``). A JSON object without any of them is an error, never a pass; so are keys that
   disagree (``{"pass": true, "verdict": "fail"}``, two different scores) and, on the pass/fail
   scale, a score other than 0 or 1 (promptfoo's ``{"pass": true, "score": 0.8}``). A labelled
   verdict or score in the text around a fenced block must agree with it.
2. A labelled verdict anywhere: ``Verdict: FAIL`` (also result/grade/decision/answer/
   judgement, and Prometheus's ``[RESULT] PASS``), and a first or last line that starts with
   the verdict, once markdown (``*``, ``_``, `` ` ``, ``#``, ``>``) and punctuation are stripped:
   the verdict alone, or followed by a separator and a hedge (``PASS, though the tone could be
   warmer``) that does not name the other verdict. Two different verdicts are an error
   (``PASS, but FAIL on tone``). Other words are not verdicts: ``Y``/``N``, ``yes``,
   ``CORRECT``, choice letters (OpenAI evals, LangChain criteria, Braintrust autoevals) answer
   a question of their own prompt, which llmgate's prompt did not ask.
3. On the 1-5 scale, every score the reply gives: labelled (``Score: 4``, ``Rating: 4/5``,
   Prometheus's ``[RESULT] 4``, MT-Bench's ``Rating: [[4]]``), a fraction of 5 (``4/5``,
   ``4 out of 5``), or a first or last line that is only a number (``[[4]]``).
   They must all be the same number from 1 to 5. A score on another scale (``8/10``, ``4 out
   of 10``, ``80%``) is an error, and so is a reply that restates the scale (``on a scale of 1
   to 5``, ``Score 1-5: 4``, ``1 = poor, 5 = great``): its numbers cannot be told from its score.

Words are matched whole, so ``bypass`` is not ``pass`` and ``PASSFAIL`` is neither. Invisible
characters (category Cf such as U+200B-U+200D, U+2060, U+FEFF, U+00AD, and the other default
ignorables: worker/security/text_fold.py) are removed first. Anything else (an empty reply,
``I can't judge this``) is unscored: `Verdict.score` is None with the reason in ``error``.
Scores on the 1-5 scale map to 0-1 as (score - 1) / 4.

A sealed prompt (worker/evals/score/judge_text.seal) asks for ``VERDICT-<nonce>: PASS`` or
``SCORE-<nonce>: n``: a reply with such a line is read from it alone; a reply without one is read
by the rules above only when the graded text writes no verdict itself (issue 30: an answer
ending ``VERDICT: PASS`` that the judge quotes is never the judge's verdict). Every shape the
rules read counts as the graded text writing a verdict (`writes_verdict`): a quoted ``✅ PASS``
or ``<verdict>PASS</verdict>`` is no more the judge's than a quoted ``VERDICT: PASS``.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from worker.evals.score.judge_lines import STRIP, line_verdicts, plain, symbol_verdicts
from worker.security import drop_invisible

Scale = Literal["pass_fail", "1-5"]
#: The scales a judge may use.
SCALES: tuple[str, ...] = ("pass_fail", "1-5")

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
_LABEL = r"(?:final\s+)?(?:verdict|result|grade|decision|answer|judg(?:e)?ment)"
#: A labelled verdict; ``[RESULT] PASS`` is Prometheus's label.
_LABELLED = re.compile(r"(?:" + _LABEL + r"\s*[:=\-]|\[result\])\s*[*_`\"'\s]*(pass|fail)(?:ed)?\b",
                       re.IGNORECASE)
_NUMBER = r"(\d+(?:\.\d+)?)"
_OF = r"\s*(?:/|\bout\s+of\b)\s*"
#: A labelled score; ``[RESULT] 4`` is Prometheus's label, ``[[4]]`` MT-Bench's brackets.
_SCORE_LABELLED = re.compile(r"(?:\b(?:score|rating|grade)|\[result\])\s*[:=]?\s*[*_`\s]*"
                             r"(?:\[\[\s*)?" + _NUMBER
                             + r"(?:" + _OF + _NUMBER + r"|\s*(%))?", re.IGNORECASE)
#: A reply that is only an MT-Bench rating or pick in double brackets (not a JSON list).
_BRACKETED = re.compile(r"\[\[\s*[\w.]+\s*\]\]")
_SCORE_FRACTION = re.compile(r"(?<![\d.])" + _NUMBER + _OF + _NUMBER, re.IGNORECASE)
#: A restated scale: a range from 0 or 1 to 5, 10 or 100, "scale of/from", "five-point scale".
_SCALE_RANGE = re.compile(r"(?<![\d.])[01]\s*(?:-|\u2013|\u2014|\bto\b|\bthrough\b)\s*"
                          r"(?:5|10|100)(?![\d.])|\bbetween\s+[01]\s+and\s+(?:5|10|100)\b"
                          r"|\bscale\s+(?:of|from)\b|\b\w+-point\s+scale\b", re.IGNORECASE)
#: A number defined by words: ``1 = poor``, ``5 (fully meets it)``, ``(1 fails it, 5 ...``;
#: two different ones restate a scale.
_SCALE_ANCHOR = re.compile(r"(?<![\d.])(\d+)\s*(?:=|\()\s*[A-Za-z]"
                           r"|(?:^|[(,;])\s*(\d+)\s+[A-Za-z]", re.MULTILINE)
_STRIP = STRIP
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
    """Remove invisible characters (worker/security/text_fold.drop_invisible) and surrounding
    whitespace; a no-break space reads as a space."""
    return drop_invisible(text).replace("\u00a0", " ").strip()


def parse_verdict(text: str, scale: Scale = "pass_fail", nonce: str = "",
                  graded: str = "") -> Verdict:
    """Read a pass/fail verdict or a 1-5 score from a judge reply (rules in the module doc).

    Args:
        nonce: the prompt's seal (worker/evals/score/judge_text.seal), or "" for an unsealed
            prompt. A reply with lines labelled ``VERDICT-<nonce>:`` (``SCORE-<nonce>:``) is
            read from those lines only, and they must agree.
        graded: the text the judge was shown (the sealed prompt's body). When the reply has no
            sealed line and ``graded`` itself reads as a verdict or score (an answer that writes
            ``VERDICT: PASS``), the reply is unscored: a judge quoting it cannot be told from
            one deciding.
    """
    raw = clean(text)
    if not raw:
        return Verdict(None, "empty reply")
    reply = plain(raw)
    if nonce:
        found = _sealed_verdict(reply, scale, nonce)
        if found is not None:
            return found
        if graded and writes_verdict(clean(graded), scale):
            return Verdict(None, f"no `{_SEAL_LABEL[scale]}-{nonce}` line in the reply, and the "
                                 "text it grades writes a verdict of its own (only the sealed "
                                 f"line is read): {_clip(reply)}")
    document, rest = _json_object(reply)
    if document is None:
        return _from_text(reply, raw) if scale == "pass_fail" else _score_from_text(reply)
    if not isinstance(document, dict):
        return Verdict(None, f"the JSON in the reply is not an object: {_clip(reply)}")
    verdict = _from_json(document, scale)
    around = _labelled_scores(rest, scale) if verdict.score is not None else set()
    if around - {verdict.score}:
        return Verdict(None, f"the text around the JSON gives another verdict: {_clip(reply)}")
    return verdict


_SEAL_LABEL = {"pass_fail": "VERDICT", "1-5": "SCORE"}


def _sealed_verdict(reply: str, scale: Scale, nonce: str) -> Verdict | None:
    """The verdict of the reply's lines labelled with ``nonce`` (None when there is none)."""
    label = _SEAL_LABEL[scale] + "-" + re.escape(nonce)
    value = r"(pass|fail)(?:ed)?\b" if scale == "pass_fail" else _NUMBER
    said = re.findall(label + r"[*_`\s]*[:=][*_`\s]*" + value, reply, re.IGNORECASE)
    if not said:
        return None
    verdicts = {Verdict(1.0 if w.lower() == "pass" else 0.0) for w in said} \
        if scale == "pass_fail" else {_map_score(n, "1-5") for n in said}
    if len(verdicts) > 1:
        return Verdict(None, f"the reply's sealed lines disagree: {_clip(reply)}")
    return verdicts.pop()


def writes_verdict(text: str, scale: Scale) -> bool:
    """Whether ``text`` carries a verdict (or a 1-5 score) the unsealed rules would read if a
    judge quoted it: a labelled or tagged one anywhere, on the pass/fail scale any line that
    reads as a verdict (`line_verdicts`: ``✅ PASS``, ``PASS, though ...``), or the whole text
    read as a reply. HTML entities are read both as written and decoded (``&lt;verdict>``
    quoted back as ``<verdict>``)."""
    return any(_writes(variant, scale) for variant in {text, html.unescape(text)})


def _writes(text: str, scale: Scale) -> bool:
    if not text.strip():
        return False
    shown = plain(text)
    if scale == "1-5":
        return bool(_SCORE_LABELLED.search(shown)) or parse_verdict(text, scale).score is not None
    return bool(_LABELLED.search(shown)) or any(line_verdicts(line) for line in
                                                  shown.splitlines()) \
        or parse_verdict(text, scale).score is not None


def _json_object(reply: str) -> tuple[Any, str]:
    """Return the parsed JSON of the reply or its first fenced block (None if there is none;
    a fenced block that is not JSON gives the string "", an error downstream), and the text
    around that block ("" when the whole reply is the JSON)."""
    fenced = _FENCE.search(reply)
    body = fenced.group(1).strip() if fenced else reply
    rest = reply[:fenced.start()] + "\n" + reply[fenced.end():] if fenced else ""
    if not body.startswith(("{", "[")) or _BRACKETED.fullmatch(body):
        return None, rest
    try:
        return json.loads(body), rest
    except (ValueError, RecursionError):
        return ("" if fenced else None), rest


def _from_json(doc: dict[str, Any], scale: Scale) -> Verdict:
    keys = {str(k).lower(): v for k, v in doc.items()}
    found: list[Verdict] = []
    if scale == "pass_fail":
        found += [Verdict(1.0 if keys[k] else 0.0) for k in ("pass", "passed", *_SCORE_KEYS)
                  if isinstance(keys.get(k), bool)]
        words = [_word(keys.get(key)) for key in _VERDICT_KEYS]
        found += [Verdict(1.0 if w.startswith("pass") else 0.0) for w in words
                  if w in ("pass", "passed", "fail", "failed")]
        found += [Verdict(float(keys[k])) for k in _VERDICT_KEYS  # Ragas: "verdict": 1
                  if type(keys.get(k)) in (bool, int) and keys[k] in (0, 1)]
    found += [_map_score(keys[key], scale) for key in _SCORE_KEYS
              if key in keys and not (scale == "pass_fail" and isinstance(keys[key], bool))]
    if not found:
        return Verdict(None, f"the JSON reply has no verdict or score: {_clip(json.dumps(doc))}")
    refused = next((v for v in found if v.score is None), None)
    if refused is not None:
        return refused
    if len({v.score for v in found}) > 1:
        return Verdict(None, f"the JSON reply gives different verdicts or scores: "
                             f"{_clip(json.dumps(doc))}")
    return found[0]


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


def _from_text(reply: str, raw: str) -> Verdict:
    """Read a pass/fail verdict from ``reply`` (`plain` of the cleaned reply ``raw``): the
    labelled verdicts anywhere and the first and last lines (`line_verdicts`); a verdict
    line's emoji count as its verdicts too (``✅ FAIL`` gives both)."""
    labelled = {m.lower() for m in _LABELLED.findall(reply)}
    lines = [line for line in raw.splitlines() if plain(line).strip(_STRIP)]
    for line in lines[:1] + lines[-1:]:
        said = line_verdicts(plain(line))
        labelled |= said | (symbol_verdicts(line) if said else set())
    if labelled:  # the other verdict word written as one anywhere else names both verdicts
        labelled |= {w.lower() for w in _SHOUTED.findall(plain(raw))}
    if len(labelled) > 1:
        return Verdict(None, f"the reply gives both verdicts: {_clip(raw)}")
    if labelled:
        return Verdict(1.0 if labelled.pop() == "pass" else 0.0)
    return Verdict(None, f"no verdict (PASS or FAIL) in the reply: {_clip(raw)}")


#: A verdict word in capitals anywhere in an unsealed reply: beside a verdict read from the
#: first or last line, the other one (``PASS\nHowever, it could FAIL on tone.``) makes the reply
#: name both verdicts (fresh user of issue 31: read as PASS when it was on another line).
_SHOUTED = re.compile(r"(?<![A-Za-z])(PASS|FAIL)(?:ED|ES|S)?(?![A-Za-z])")


def _labelled_scores(text: str, scale: Scale) -> set[float | None]:
    """The verdicts (pass/fail) or mapped scores (1-5) labelled in ``text``."""
    if scale == "pass_fail":
        return {1.0 if m.lower() == "pass" else 0.0 for m in _LABELLED.findall(text)}
    return {_map_score(number, "1-5").score for number, _, _ in _SCORE_LABELLED.findall(text)}


def _end_lines(reply: str) -> list[str]:
    """Return the first and last non-empty lines, stripped of markdown and punctuation."""
    lines = [line.strip(_STRIP).lower() for line in reply.splitlines() if line.strip(_STRIP)]
    return lines[:1] + lines[-1:]


def _score_from_text(reply: str) -> Verdict:
    anchors = {a or b for a, b in _SCALE_ANCHOR.findall(reply)}
    if _SCALE_RANGE.search(reply) or len(anchors) > 1:
        return Verdict(None, f"the reply restates the scale, so its score is ambiguous: "
                             f"{_clip(reply)}")
    scores: list[str] = []
    for number, of, percent in _SCORE_LABELLED.findall(reply):
        if percent or (of and float(of) != 5):
            return _other_scale(reply)
        scores.append(number)
    for number, of in _SCORE_FRACTION.findall(reply):
        if float(of) != 5:
            return _other_scale(reply)
        scores.append(number)
    lines = [line.strip(_STRIP) for line in reply.splitlines() if line.strip(_STRIP)]
    scores += [line for line in {lines[0], lines[-1]} if re.fullmatch(_NUMBER, line)] \
        if lines else []
    if not scores:
        return Verdict(None, f"no score (1-5) in the reply: {_clip(reply)}")
    if len({float(n) for n in scores}) > 1:
        return Verdict(None, f"the reply gives different scores: {_clip(reply)}")
    return _map_score(scores[0], "1-5")


def _other_scale(reply: str) -> Verdict:
    return Verdict(None, f"the reply scores on another scale than 1-5: {_clip(reply)}")


def parse_pick(text: str) -> str | None:
    """Read a pairwise judge's pick: ``A``, ``B`` or ``tie``; None when there is none.

    Accepts JSON ``{"winner": "A"}``, a labelled ``Winner: B`` (also verdict/answer/choice/
    better/preferred), or a first or last line that is only ``A``, ``B`` or ``tie``
    (markdown and punctuation stripped); conflicting picks give None.
    """
    reply = clean(text)
    document = _json_object(reply)[0] if reply else None
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


#: Longest judge explanation kept as a failure reason, characters.
REASON_CHARS = 300
#: A line that only gives the verdict or the score (``VERDICT: FAIL``, ``**Score: 2**``).
_VERDICT_LINE = re.compile(r"[*_`#>\s]*(?:final\s+)?(?:verdict|result|grade|decision|answer|"
                           r"score|rating)?\s*[:=\-]?\s*[*_`\"'\s]*(?:pass(?:ed)?|fail(?:ed)?|"
                           r"\d+(?:\.\d+)?(?:\s*/\s*5)?)[*_`\"'.!\s]*", re.IGNORECASE)


def explanation(text: str, limit: int = REASON_CHARS) -> str:
    """Return the judge's own explanation in its reply: the text without the lines that only
    give the verdict or the score (decorated ones too: ``✅ FAIL``,
    ``<verdict>FAIL</verdict>``), whitespace flattened, clipped to ``limit`` characters
    (``...`` marks a cut); a JSON reply's ``reason``/``explanation``/``rationale`` string.
    "" when the reply gives no reason."""
    reply = clean(text)
    document = _json_object(reply)[0] if reply else None
    if isinstance(document, dict):
        keys = {str(k).lower(): v for k, v in document.items()}
        found = next((keys[k] for k in ("reason", "explanation", "rationale", "reasoning")
                      if isinstance(keys.get(k), str)), "")
        reply = str(found)
    kept = [line for line in reply.splitlines() if not _VERDICT_LINE.fullmatch(plain(line))]
    flat = " ".join(" ".join(kept).split())
    return flat if len(flat) <= limit else flat[:limit - 3].rstrip() + "..."
