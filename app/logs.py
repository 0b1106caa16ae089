"""Log format of the web process: ``LLMGATE_LOG_FORMAT=text`` (default) or ``json``.

In JSON mode each line is one object: ``ts`` (ISO 8601, UTC), ``level``, ``logger``,
``message``, then whichever of ``delivery_id``, ``event``, ``action``, ``repository``, ``pr`` and
``outcome`` the log call gave (``extra=delivery_fields(...)``), and ``exc`` for a traceback. The
worker writes the same keys plus ``job_id`` (``worker/runtime/logs.py``), so one query finds a
delivery from the receiver to the check run. Fields are identifiers only, never secrets.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gidgethub.sansio import Event

from app.settings import SettingsError

#: Record attributes copied into a JSON line when a log call passed them.
FIELDS = ("delivery_id", "event", "action", "repository", "pr", "outcome")


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object (keys in the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as a single-line JSON object."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def delivery_fields(event: Event, outcome: str) -> dict[str, Any]:
    """Return the log fields of a verified delivery: ids, repository and PR number if any."""
    data = event.data
    fields: dict[str, Any] = {"delivery_id": event.delivery_id, "event": event.event,
                              "outcome": outcome, "action": data.get("action")}
    repo = data.get("repository")
    if isinstance(repo, Mapping):
        fields["repository"] = repo.get("full_name")
    for holder in ("pull_request", "issue"):
        item = data.get(holder)
        if isinstance(item, Mapping) and isinstance(item.get("number"), int):
            fields["pr"] = item["number"]
            break
    return fields


def web_formatter(environ: Mapping[str, str] = os.environ) -> logging.Formatter:
    """Return the formatter ``LLMGATE_LOG_FORMAT`` asks for (unset or empty: text).

    Raises:
        SettingsError: the value is neither ``text`` nor ``json``.
    """
    value = environ.get("LLMGATE_LOG_FORMAT", "").strip().lower() or "text"
    if value == "json":
        return JsonFormatter()
    if value == "text":
        return logging.Formatter("%(levelname)-8s %(name)s: %(message)s")
    raise SettingsError(f"LLMGATE_LOG_FORMAT must be text or json, got {value[:20]!r}")
