"""Complete the ``llmgate`` check run with its output and any number of annotations.

Limits (GitHub docs "REST API endpoints for check runs", "Update a check run"): at most 50
annotations per request, and each update *appends* its annotations to the run's list, so more
are sent as further PATCHes; ``output.summary`` and ``output.text`` hold at most 65535
characters; an annotation ``title`` at most 255 characters; ``message`` and ``raw_details`` at
most 64 KB. Apps may not set the conclusion ``stale``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worker.github.client import GitHubClient

#: Annotations accepted in one create/update request.
MAX_ANNOTATIONS_PER_REQUEST = 50
#: ``output.summary`` / ``output.text`` maximum, in characters.
MAX_OUTPUT_CHARS = 65535
#: Annotation ``title`` maximum, in characters. The output ``title`` has no documented maximum;
#: we clip it to the same length as a conservative bound.
MAX_TITLE_CHARS = 255
#: Annotation ``message`` / ``raw_details`` maximum: 64 KB, in UTF-8 bytes.
MAX_ANNOTATION_BYTES = 64 * 1024
#: Conclusions an App may set.
CONCLUSIONS = frozenset(
    {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"}
)
_ELLIPSIS = "\u2026"


def clip_text(s: str, max_chars: int) -> str:
    """Return ``s`` cut to at most ``max_chars`` characters, ending in ``…`` when cut.

    Raises:
        ValueError: ``max_chars`` is below 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    if len(s) <= max_chars:
        return s
    return s[: max_chars - 1] + _ELLIPSIS


def clip_bytes(s: str, max_bytes: int) -> str:
    """Return ``s`` cut so its UTF-8 encoding is at most ``max_bytes``, ending in ``…`` when cut.

    The cut never splits a multi-byte character.

    Raises:
        ValueError: ``max_bytes`` is below 3 (the ellipsis alone takes 3 bytes).
    """
    marker = _ELLIPSIS.encode("utf-8")
    if max_bytes < len(marker):
        raise ValueError(f"max_bytes must be >= {len(marker)}, got {max_bytes}")
    raw = s.encode("utf-8")
    if len(raw) <= max_bytes:
        return s
    return raw[: max_bytes - len(marker)].decode("utf-8", errors="ignore") + _ELLIPSIS


@dataclass(frozen=True)
class CheckOutput:
    """The visible output of a check run: a title, a Markdown summary and optional details."""

    title: str
    summary: str
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the ``output`` object for the API, every field clipped to GitHub's limits."""
        out: dict[str, Any] = {
            "title": clip_text(self.title, MAX_TITLE_CHARS),
            "summary": clip_text(self.summary, MAX_OUTPUT_CHARS),
        }
        if self.text:
            out["text"] = clip_text(self.text, MAX_OUTPUT_CHARS)
        return out


def clip_annotation(annotation: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of one annotation with ``title``, ``message`` and ``raw_details`` clipped."""
    out = dict(annotation)
    if isinstance(out.get("title"), str):
        out["title"] = clip_text(out["title"], MAX_TITLE_CHARS)
    for key in ("message", "raw_details"):
        if isinstance(out.get(key), str):
            out[key] = clip_bytes(out[key], MAX_ANNOTATION_BYTES)
    return out


def completion_bodies(conclusion: str, output: CheckOutput,
                      annotations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the PATCH bodies that complete a check run, in order.

    Each body carries the output and the next <= 50 annotations (GitHub appends them); only
    the LAST sets ``status: completed`` and the conclusion, so a check run is never seen
    completed with part of its annotations. 137 annotations give 3 bodies with 50, 50 and 37.

    Raises:
        ValueError: ``conclusion`` is not one an App may set.
    """
    if conclusion not in CONCLUSIONS:
        raise ValueError(f"conclusion {conclusion!r} is not one of {sorted(CONCLUSIONS)}")
    clipped = [clip_annotation(a) for a in annotations]
    step = MAX_ANNOTATIONS_PER_REQUEST
    chunks = [clipped[i : i + step] for i in range(0, len(clipped), step)] or [[]]
    bodies: list[dict[str, Any]] = []
    for i, chunk in enumerate(chunks):
        out = output.to_json()
        if chunk:
            out["annotations"] = chunk
        body: dict[str, Any] = {"output": out}
        if i == len(chunks) - 1:
            body = {"status": "completed", "conclusion": conclusion, **body}
        bodies.append(body)
    return bodies


async def complete_check_run(
    client: GitHubClient,
    owner: str,
    repo: str,
    check_run_id: int,
    conclusion: str,
    output: CheckOutput,
    annotations: Sequence[Mapping[str, Any]],
    actions: Sequence[Mapping[str, str]] = (),
    details_url: str | None = None,
) -> None:
    """Mark a check run completed with ``conclusion`` and attach all ``annotations``.

    Sends ``ceil(len(annotations) / 50)`` PATCH requests (at least one); see
    ``completion_bodies``. ``actions`` (buttons: ``label`` <= 20, ``description`` <= 40,
    ``identifier`` <= 20 characters, at most 3: GitHub's limits) go with the last one, and so
    does ``details_url`` (the full report's page, ``worker.report.store``), when given.

    Raises:
        ValueError: an invalid ``conclusion``.
        GitHubError: GitHub refused a request (see ``GitHubClient``).
    """
    bodies = completion_bodies(conclusion, output, annotations)
    if actions:
        bodies[-1]["actions"] = [dict(a) for a in actions]
    if details_url:
        bodies[-1]["details_url"] = details_url
    for body in bodies:
        await client.update_check_run(owner, repo, check_run_id, body)
