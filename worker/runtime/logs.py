"""Structured logs: one JSON object per line, carrying the job's delivery, repository and PR.

``LLMGATE_LOG_FORMAT=json`` (the container default) makes every log line of a process a JSON
object: ``ts`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, then whichever of
``job_id``, ``delivery_id``, ``repository``, ``pr`` and ``event`` are known, and ``exc`` with
the traceback of a logged exception. Inside a job (``bind_job``) every line carries the job's
identifiers, including lines logged by libraries; elsewhere a caller passes them with
``extra={...}``. ``text`` (the default) keeps the classic one-line format for a terminal.

Nothing here reads secrets: the fields are identifiers only, and messages are logged as the code
wrote them (the code never formats a token or key into one).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

#: The record attributes copied into a JSON line when present, in this order.
CONTEXT_FIELDS = ("job_id", "delivery_id", "repository", "pr", "event")
#: Accepted values of ``LLMGATE_LOG_FORMAT``.
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_job_context: ContextVar[Mapping[str, Any] | None] = ContextVar("llmgate_job", default=None)


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object (see the module docstring for its keys)."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as a single-line JSON object."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = _job_context.get() or {}
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is None:
                value = context.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def job_fields(job_id: str | None, payload: Any) -> dict[str, Any]:
    """Return the log fields of a job: its id and the payload's delivery, repository and PR.

    ``payload`` is a `worker.contract` payload (a dict); missing keys are simply left out, so a
    job of another shape still logs its ``job_id``.
    """
    fields: dict[str, Any] = {"job_id": job_id}
    if isinstance(payload, Mapping):
        fields["delivery_id"] = payload.get("delivery_id")
        repo = payload.get("repo")
        if isinstance(repo, Mapping) and "owner" in repo and "name" in repo:
            fields["repository"] = f"{repo['owner']}/{repo['name']}"
        fields["pr"] = payload.get("pr_number")
    return {name: value for name, value in fields.items() if value is not None}


def bind_job(job_id: str | None, payload: Any) -> Token[Mapping[str, Any] | None]:
    """Attach a job's fields to every log line of the current task until `unbind_job`."""
    return _job_context.set(job_fields(job_id, payload))


def unbind_job(token: Token[Mapping[str, Any] | None]) -> None:
    """Undo the matching `bind_job`."""
    _job_context.reset(token)


def log_format(environ: Mapping[str, str] = os.environ) -> str:
    """Return ``LLMGATE_LOG_FORMAT`` (``text`` or ``json``; unset or empty means ``text``).

    Raises:
        ValueError: any other value (the message names the variable and the choices).
    """
    value = environ.get("LLMGATE_LOG_FORMAT", "").strip().lower() or "text"
    if value not in LOG_FORMATS:
        raise ValueError(f"LLMGATE_LOG_FORMAT must be one of {', '.join(LOG_FORMATS)}, "
                         f"got {value[:20]!r}")
    return value


def configure_worker_logging(environ: Mapping[str, str] = os.environ) -> None:
    """Set up the worker's logging: root at ``LLMGATE_LOG_LEVEL`` (default INFO), in the format
    of ``LLMGATE_LOG_FORMAT``; in JSON mode arq's own handlers are switched to JSON too.

    Raises:
        ValueError: ``LLMGATE_LOG_FORMAT`` or ``LLMGATE_LOG_LEVEL`` is not a known value.
    """
    fmt = log_format(environ)
    level = environ.get("LLMGATE_LOG_LEVEL", "").strip().upper() or "INFO"
    if not isinstance(logging.getLevelNamesMapping().get(level), int):
        raise ValueError(f"LLMGATE_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {level!r}")
    formatter = JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    root.setLevel(level)
    for handler in root.handlers:
        handler.setFormatter(formatter)
    arq_logger = logging.getLogger("arq")
    if arq_logger.handlers:  # arq's command line gave it its own: do not print lines twice
        arq_logger.propagate = False
        if fmt == "json":
            for handler in arq_logger.handlers:
                handler.setFormatter(formatter)
