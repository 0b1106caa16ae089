"""GitHub's length limits on what the App writes, counted as GitHub counts them: UTF-8 bytes.

GitHub's REST reference states the check-run limits in characters ("Create a check run":
``output.summary`` and ``output.text`` "Maximum length: 65535 characters"; an annotation
``title`` "The maximum size is 255 characters"; ``message`` and ``raw_details`` "The maximum
size is 64 KB"), but it measures bytes: a summary of fewer than 65535 characters that is rich
in emoji is refused with 422 ``summary exceeds a maximum bytesize of 65535``
(github/docs#35252). An issue comment is refused with "Body is too long (maximum is 65536
characters)", and measurements disagree on its unit (dead-claudia/github-limits#13 found
262144 bytes); a body of at most 65535 bytes fits every reading. Limits GitHub does not
document (the output ``title``, a check run's ``name``) are held to 255 bytes, the smallest
documented field limit.

Everything here is pure. Each cut keeps a prefix, never splits a character and ends in ``…``
(3 bytes) when it cut anything, so a clipped text always fits its limit exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``output.summary`` / ``output.text`` maximum, UTF-8 bytes (github/docs#35252).
MAX_OUTPUT_BYTES = 65535
#: ``output.title`` maximum, UTF-8 bytes: undocumented; the annotation title's 255 is used.
MAX_OUTPUT_TITLE_BYTES = 255
#: Annotation ``title`` maximum: GitHub's 255 characters, held as 255 UTF-8 bytes.
MAX_ANNOTATION_TITLE_BYTES = 255
#: Annotation ``message`` / ``raw_details`` maximum: 64 KB, in UTF-8 bytes.
MAX_ANNOTATION_BYTES = 64 * 1024
#: Check run ``name`` maximum, UTF-8 bytes: undocumented; held like the output title.
MAX_CHECK_NAME_BYTES = 255
#: Issue / pull request comment ``body`` maximum, UTF-8 bytes (module docstring).
MAX_COMMENT_BYTES = 65535

_ELLIPSIS = "\u2026"


def utf8_size(text: str) -> int:
    """Return the length of ``text`` as GitHub measures it: its UTF-8 encoding, in bytes."""
    return len(text.encode("utf-8"))


def clip_text(s: str, max_chars: int) -> str:
    """Return ``s`` cut to at most ``max_chars`` characters, ending in ``…`` when cut.

    For display only (a reason in a summary, a report page): GitHub's limits are bytes
    (`clip_bytes`).

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

    The cut never splits a multi-byte character (an emoji's 4 bytes go whole or not at all).

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


def fit_annotation(annotation: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of one annotation with ``title``, ``message`` and ``raw_details`` cut to
    GitHub's limits in bytes (255 and 64 KB); other keys are kept as they are."""
    out = dict(annotation)
    if isinstance(out.get("title"), str):
        out["title"] = clip_bytes(out["title"], MAX_ANNOTATION_TITLE_BYTES)
    for key in ("message", "raw_details"):
        if isinstance(out.get(key), str):
            out[key] = clip_bytes(out[key], MAX_ANNOTATION_BYTES)
    return out


def fit_output(output: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of a check run ``output`` object whose ``title``, ``summary``, ``text``
    and annotations fit GitHub's limits in bytes (other keys, e.g. ``images``, as they are)."""
    out = dict(output)
    if isinstance(out.get("title"), str):
        out["title"] = clip_bytes(out["title"], MAX_OUTPUT_TITLE_BYTES)
    for key in ("summary", "text"):
        if isinstance(out.get(key), str):
            out[key] = clip_bytes(out[key], MAX_OUTPUT_BYTES)
    if isinstance(out.get("annotations"), list):
        out["annotations"] = [fit_annotation(a) if isinstance(a, Mapping) else a
                              for a in out["annotations"]]
    return out


def fit_check_name(name: str) -> str:
    """Return a check run name cut to `MAX_CHECK_NAME_BYTES`; the same name always gives the
    same result, so a run is created and looked up under one name."""
    return clip_bytes(name, MAX_CHECK_NAME_BYTES)


def fit_check_run(body: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of a create/update check run body that fits GitHub's limits in bytes:
    its ``name`` (`fit_check_name`) and its ``output`` (`fit_output`)."""
    out = dict(body)
    if isinstance(out.get("name"), str):
        out["name"] = fit_check_name(out["name"])
    if isinstance(out.get("output"), Mapping):
        out["output"] = fit_output(out["output"])
    return out


def fit_comment(body: str) -> str:
    """Return an issue comment body cut to `MAX_COMMENT_BYTES`."""
    return clip_bytes(body, MAX_COMMENT_BYTES)
