"""Markdown for GitHub from untrusted text: the escapers and templates every report uses (pure).

Everything a pull request controls (model outputs, expected values, example ids, suite and
metric names, error messages) is untrusted. In markdown it goes through `inline` (markdown and
HTML escaped, whitespace collapsed, ``@mentions`` broken with a zero-width joiner), `fenced` (a
code block whose fence is longer than any backtick run inside it, mentions broken too) or `cell`
(an HTML table cell on one source line, every ``<``, ``>``, ``&`` and quote an entity). The
templates of ``templates/`` (jinja2, `render_template`) see only such strings. Used by
worker/report/render.py (one config) and worker/report/multi.py (several).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import jinja2

_ZWJ = "\u200d"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_MENTION = re.compile(r"@(?=[\w-])")
_CONTROL = {c: None for c in (*range(0, 9), 11, 12, *range(14, 32), 127)}
#: Characters that start markdown, HTML or math inline: entities or backslash escapes (GFM).
_INLINE = str.maketrans({"<": "&lt;", ">": "&gt;", "&": "&amp;"}
                        | {c: "\\" + c for c in "\\`*[]|~$"} | _CONTROL)
#: A list marker or heading at the start of a line would open a block (nested list, heading).
_LEADING_MARKER = re.compile(r"^([-+#]|\d+(?=[.)]))")
#: Runs of underscores; only those inside a word (pass_rate) cannot start emphasis (GFM 6.2).
_UNDERSCORES = re.compile(r"_+")
#: The icon and word of each check-run conclusion.
VERDICT = {"success": ("✅", "pass"), "failure": ("❌", "fail"), "neutral": ("⚪", "neutral"),
           "cancelled": ("⚪", "cancelled"), "timed_out": ("⌛", "timed out"),
           "action_required": ("⚠️", "action required"), "skipped": ("⏭", "skipped")}
#: Threshold rules (how their text starts), whose status the metric table shows, not the
#: statistics table (worker/report/stats_table.py) nor the Why (worker/report/decision.py).
THRESHOLD_RULES = ("min ", "max_drop ", "max ", "max_increase ", "max_increase_pct ")
# Markdown, not HTML: HTML autoescaping would garble it; view models are escaped in Python.
_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=False,  # noqa: S701
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    keep_trailing_newline=True)


def as_text(value: Any) -> str:
    """Return ``value`` as text: itself for a string, "(none)" for None, else sorted JSON."""
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def clip(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters, ending with how long it was when cut."""
    if len(text) <= limit:
        return text
    marker = f"… [clipped, {len(text)} chars]"
    return (text[: max(limit - len(marker), 0)] + marker)[:limit]


def inline(value: Any, limit: int) -> str:
    """Escape untrusted text for one line of markdown (a table cell, a list item)."""
    text = " ".join(clip(as_text(value), limit).split()).translate(_INLINE)
    text = _LEADING_MARKER.sub(lambda m: m[0] + "\\" if m[0][0].isdigit() else "\\" + m[0], text)
    return _MENTION.sub("@" + _ZWJ, _UNDERSCORES.sub(lambda m: _underscores(text, m), text))


def _underscores(text: str, match: re.Match[str]) -> str:
    before, after = text[match.start() - 1: match.start()], text[match.end(): match.end() + 1]
    return match[0] if before.isalnum() and after.isalnum() else match[0].replace("_", "\\_")


def cell(value: Any, limit: int) -> str:
    """Escape untrusted text for an HTML table cell written on one source line.

    Markdown is not parsed inside an HTML block, and the block ends only at a blank line, so
    every ``<``, ``>``, ``&`` and quote is an entity (``</details>`` or ``<!-- llmgate -->``
    stay text), line breaks (``\\r\\n``, ``\\r``, ``\\n``) become ``<br>``, control characters
    are dropped and mentions are broken.
    """
    text = html.escape(clip(as_text(value), limit).translate(_CONTROL), quote=True)
    return _LINE_BREAK.sub("<br>", _MENTION.sub("@" + _ZWJ, text))


def fenced(value: Any, limit: int) -> str:
    """Put untrusted text in a fenced code block that no backtick run inside can close."""
    text = _MENTION.sub("@" + _ZWJ, clip(as_text(value), limit).translate(_CONTROL))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


#: What `safe` removes: what could end a code span, a table cell or a line, or mention someone.
_UNSAFE = re.compile(r"[`\r\n|<>@\\]")


def safe(text: str, limit: int = 80) -> str:
    """Return ``text`` fit for a markdown code span: no backticks, pipes, newlines, ``@``."""
    cleaned = _UNSAFE.sub(" ", text).strip()
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "\u2026"


def short_sha(sha: str) -> str:
    """Return a commit SHA as 7 characters in code, or escaped text ("working tree" for "")."""
    if re.fullmatch(r"[0-9a-f]{7,64}", sha):
        return f"`{sha[:7]}`"
    return inline(sha or "working tree", 40)


def render_template(template: str, **context: Any) -> str:
    """Render one template of ``templates/`` with ``context``, ending in one newline."""
    return _ENV.get_template(template).render(**context).rstrip("\n") + "\n"
