"""What a notification says: the JSON webhook's body (a stable, versioned schema) and Slack's.

Pure: no I/O. The JSON body (`Notice`, ``version`` `NOTICE_VERSION`) is documented in
docs/operations.md ("Notifications"); a field is only ever added, never renamed or removed,
within one version. Slack gets ``{"text": ...}`` in its mrkdwn (`slack_text`), with ``&``, ``<``
and ``>`` escaped as Slack asks (https://api.slack.com/reference/surfaces/formatting#escaping).
The signature of a JSON body is HMAC-SHA256 over its exact bytes, hex, as GitHub signs its
webhooks (``X-Hub-Signature-256``; https://docs.github.com/en/webhooks/using-webhooks/
validating-webhook-deliveries).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Callable
from typing import Literal, TypedDict

from worker.evals.types import RuleOutcome
from worker.notify.verdict import PushVerdict

#: Version of the JSON body; a breaking change makes a new version.
NOTICE_VERSION = 1
#: Header carrying ``sha256=<hex>`` of a signed JSON body.
SIGNATURE_HEADER = "X-Llmgate-Signature-256"
#: Header naming the body's event (``regression`` or ``undecided``).
EVENT_HEADER = "X-Llmgate-Event"
#: Outcomes listed at most (a body stays small: Slack truncates long texts).
MAX_RULES = 20


class RuleLine(TypedDict):
    """One rule behind a notice: ``suite``/``metric`` under ``rule`` (e.g. ``max_drop 0.05``),
    ``previous`` and ``now`` the metric's values (null when unknown), ``status`` the rule's
    (``fail``, ``regression``, ``inconclusive``, ``skipped``) and ``reason`` its words."""

    suite: str
    metric: str
    group: str
    rule: str
    previous: float | None
    now: float | None
    status: str
    reason: str


class Notice(TypedDict):
    """The JSON webhook's body, version 1 (docs/operations.md, "Notifications").

    ``event`` is ``regression`` (a gate rule fails against the previous push) or
    ``undecided`` (the comparison could not be decided: ``reason`` says why). ``config`` is the
    folder of the config ("" for the repository's root config). URLs are null when unknown;
    ``report_url`` is null when no report was stored for the run.
    """

    version: int
    event: Literal["regression", "undecided"]
    repository: str
    config: str
    branch: str
    sha: str
    short_sha: str
    commit_url: str | None
    previous_sha: str
    previous_commit_url: str | None
    report_url: str | None
    reason: str
    rules: list[RuleLine]


def commit_url(clone_url: str, sha: str) -> str | None:
    """Return the web page of ``sha`` for a repository cloned from ``clone_url``
    (``https://HOST/owner/name[.git]`` -> ``https://HOST/owner/name/commit/<sha>``), or None
    for a clone URL that is not http(s)."""
    if not clone_url.startswith(("https://", "http://")) or not sha:
        return None
    base = clone_url.rstrip("/").removesuffix(".git")
    return f"{base}/commit/{sha}"


def build_notice(verdict: PushVerdict, *, repository: str, folder: str, branch: str, sha: str,
                 clone_url: str, report_url: str | None = None,
                 redact: Callable[[str], str] = str) -> Notice:
    """Return the notice of a ``regressed`` or ``undecided`` `PushVerdict`.

    Args:
        verdict: the push's verdict (``passed`` is refused).
        repository: ``owner/name``; folder: the config's folder ("" for the root config).
        branch, sha: the pushed branch and commit (40 hex).
        clone_url: the repository's clone URL (for the commit links).
        report_url: the run's report, or None.
        redact: applied to every text from the run (reasons), e.g. the worker's `Redactor`.

    Raises:
        ValueError: ``verdict.status`` is ``passed``.
    """
    if verdict.status == "passed":
        raise ValueError("a push that passed has no notice")
    event: Literal["regression", "undecided"] = \
        "regression" if verdict.status == "regressed" else "undecided"
    rules = [_line(o, redact) for o in verdict.failing[:MAX_RULES]]
    return Notice(version=NOTICE_VERSION, event=event, repository=repository, config=folder,
                  branch=branch, sha=sha, short_sha=sha[:7],
                  commit_url=commit_url(clone_url, sha), previous_sha=verdict.previous_sha,
                  previous_commit_url=commit_url(clone_url, verdict.previous_sha),
                  report_url=report_url, reason=redact(verdict.reason), rules=rules)


def _line(outcome: RuleOutcome, redact: Callable[[str], str]) -> RuleLine:
    return RuleLine(suite=outcome.suite, metric=outcome.metric, group=outcome.group,
                    rule=outcome.rule, previous=_finite(outcome.base), now=_finite(outcome.head),
                    status=outcome.status, reason=redact(outcome.reason))


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: they become null."""
    return value if value is not None and math.isfinite(value) else None


def json_body(notice: Notice) -> bytes:
    """Return the JSON webhook's body: compact UTF-8 JSON with sorted keys."""
    return json.dumps(notice, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def sign(secret: str, body: bytes) -> str:
    """Return ``sha256=<hex>``: HMAC-SHA256 of ``body`` keyed by ``secret`` (UTF-8)."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def slack_text(notice: Notice) -> str:
    """Return the notice as Slack mrkdwn: a headline line, then one line per rule."""
    where = _escape(notice["repository"] + (f"/{notice['config']}" if notice["config"] else ""))
    commit = f"{where}@{notice['short_sha']}"
    link = f"<{notice['commit_url']}|{commit}>" if notice["commit_url"] else f"`{commit}`"
    what = "regressed" if notice["event"] == "regression" else "could not be compared"
    lines = [f":rotating_light: *llmgate*: {link} on `{_escape(notice['branch'])}` {what} "
             f"against the previous push `{notice['previous_sha'][:7]}`"]
    if notice["reason"]:
        lines.append(f"_{_escape(notice['reason'])}_")
    for rule in notice["rules"]:
        group = f" [{_escape(rule['group'])}]" if rule["group"] else ""
        reason = f": {_escape(rule['reason'])}" if rule["reason"] else ""
        lines.append(f"• *{_escape(rule['suite'])}*{group} `{_escape(rule['metric'])}` "
                     f"{_value(rule['previous'])} → {_value(rule['now'])}, "
                     f"rule `{_escape(rule['rule'])}` {rule['status']}{reason}")
    if notice["report_url"]:
        lines.append(f"<{notice['report_url']}|Report>")
    return "\n".join(lines)


def slack_body(notice: Notice) -> bytes:
    """Return the body of a Slack incoming webhook: ``{"text": slack_text(notice)}``."""
    return json.dumps({"text": slack_text(notice)}, ensure_ascii=False).encode("utf-8")


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
