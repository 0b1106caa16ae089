"""Complete the ``llmgate`` check run with its output and any number of annotations.

Limits (GitHub docs "REST API endpoints for check runs", "Update a check run"): at most 50
annotations per request, and each update *appends* its annotations to the run's list, so more
are sent as further PATCHes; ``output.summary`` and ``output.text`` hold at most 65535 bytes of
UTF-8 (the docs say characters; GitHub counts bytes: `worker.github.limits`); an annotation
``title`` at most 255, ``message`` and ``raw_details`` at most 64 KB. Apps may not set the
conclusion ``stale``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worker.github.client import GitHubClient
from worker.github.limits import (
    MAX_ANNOTATION_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_OUTPUT_TITLE_BYTES,
    clip_bytes,
    clip_text,
    fit_annotation,
)

__all__ = ["CONCLUSIONS", "MAX_ANNOTATIONS_PER_REQUEST", "MAX_ANNOTATION_BYTES",
           "MAX_OUTPUT_BYTES", "CheckOutput", "clip_annotation", "clip_bytes", "clip_text",
           "complete_check_run", "completion_bodies"]

#: Annotations accepted in one create/update request.
MAX_ANNOTATIONS_PER_REQUEST = 50
#: Conclusions an App may set.
CONCLUSIONS = frozenset(
    {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"}
)


@dataclass(frozen=True)
class CheckOutput:
    """The visible output of a check run: a title, a Markdown summary and optional details."""

    title: str
    summary: str
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the ``output`` object for the API, every field cut to GitHub's limits in
        UTF-8 bytes, on a character boundary."""
        out: dict[str, Any] = {
            "title": clip_bytes(self.title, MAX_OUTPUT_TITLE_BYTES),
            "summary": clip_bytes(self.summary, MAX_OUTPUT_BYTES),
        }
        if self.text:
            out["text"] = clip_bytes(self.text, MAX_OUTPUT_BYTES)
        return out


def clip_annotation(annotation: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of one annotation with ``title``, ``message`` and ``raw_details`` cut to
    GitHub's limits in UTF-8 bytes (`worker.github.limits.fit_annotation`)."""
    return fit_annotation(annotation)


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
