"""Redact known secrets from everything llmgate writes: reports, comments, annotations, logs.

A `Redactor` knows the exact values to hide: the App's private key, the webhook secret, the
installation tokens minted so far, the encryption keys and every provider key in the worker's
environment (any variable whose name says KEY, TOKEN, SECRET, PASSWORD, ...). A target may
hand a provider key to a model and the model may echo it back, so model outputs are redacted
too, before anything is rendered (`Redactor.redact_value` walks a whole `GateReport`).

Besides each exact value the redactor matches its JSON-escaped and URL-encoded forms and, for
multi-line secrets such as PEM keys, every line of at least `MIN_LINE_CHARS` characters, so a
key echoed in part or inside a JSON string is still caught. Values shorter than
`MIN_SECRET_CHARS` are not registered (they would blank out ordinary words). Shapes that are
never legitimate output are redacted even when unknown: GitHub tokens (``ghs_``, ``ghp_``,
``gho_``, ``ghu_``, ``ghr_``, ``github_pat_``; GitHub docs "About authentication to GitHub",
token prefixes) and PEM private-key blocks. A secret transformed by a model (reversed,
re-encoded, split) cannot be recognised; the sandbox keeps secrets from targets in the first
place (``worker/security/sandbox.py``).

`install_log_redaction` makes every log record of the process pass through a
`RedactingFilter` (message, arguments, traceback) at creation, whichever handler writes it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from worker.errors import ConfigError

#: What a secret is replaced with.
REDACTED = "[redacted]"
#: Shortest value registered as a secret, characters (shorter ones would hide ordinary words).
MIN_SECRET_CHARS = 8
#: Shortest line of a multi-line secret (a PEM body line is 64) registered on its own.
MIN_LINE_CHARS = 16
#: Nesting depth below which `Redactor.redact_value` turns a value into redacted JSON text.
MAX_DEPTH = 64
#: Environment variable names whose values are secrets.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|AUTH|SIGNATURE", re.I)
#: Shapes redacted even when the value is unknown: GitHub tokens and PEM private keys.
SECRET_SHAPES = re.compile(
    r"\b(?:gh[opsur]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"
    r"|-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]{0,40}PRIVATE KEY-----|\Z)"
)

T = TypeVar("T")


def variants(secret: str) -> set[str]:
    """Return the strings under which ``secret`` may appear in output.

    The value itself, its JSON-escaped and URL-encoded forms, and each line of a multi-line
    value that has at least `MIN_LINE_CHARS` characters; forms shorter than `MIN_SECRET_CHARS`
    are left out.
    """
    forms = {secret, json.dumps(secret)[1:-1], quote(secret, safe="")}
    forms.update(line.strip() for line in secret.splitlines()
                 if len(line.strip()) >= MIN_LINE_CHARS)
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def secrets_from_environ(environ: Mapping[str, str]) -> list[str]:
    """Return the secret values of an environment.

    Values of variables whose name matches `SECRET_NAME` (comma-separated lists such as
    ``LLMGATE_ENCRYPTION_KEYS`` give each item too) and passwords in URL values (e.g. a
    ``REDIS_URL`` of ``redis://:PASSWORD@host``).
    """
    found: list[str] = []
    for name, value in environ.items():
        if SECRET_NAME.search(name):
            found.append(value)
            found.extend(item.strip() for item in value.split(",") if "," in value)
        if "://" in value:
            found.extend(_url_password(value))
    return [value for value in found if len(value) >= MIN_SECRET_CHARS]


def _url_password(value: str) -> list[str]:
    try:
        password = urlsplit(value.strip()).password
    except ValueError:
        return []
    return [password] if password else []


class Redactor:
    """Replace known secrets (and token-shaped strings) with `REDACTED`; thread-safe.

    Example: ``Redactor(["sk-live-1234567890"]).redact("key=sk-live-1234567890")`` is
    ``"key=[redacted]"``.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        """Register ``secrets`` (values shorter than `MIN_SECRET_CHARS` are ignored)."""
        self._lock = threading.Lock()
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(*secrets)

    def __repr__(self) -> str:
        """Show how many forms are known, never the forms."""
        return f"Redactor({len(self._forms)} secret forms)"

    def __len__(self) -> int:
        """Return the number of secret forms matched (each secret has one or more)."""
        return len(self._forms)

    def add(self, *secrets: str) -> None:
        """Register more secrets, e.g. an installation token right after it is minted."""
        new = set().union(*(variants(s) for s in secrets if isinstance(s, str)))
        with self._lock:
            if new <= self._forms:
                return
            self._forms |= new
            ordered = sorted(self._forms, key=len, reverse=True)  # longest form wins
            self._pattern = re.compile("|".join(re.escape(form) for form in ordered))

    def redact(self, text: str) -> str:
        """Return ``text`` with every known secret form and token shape replaced."""
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
        return SECRET_SHAPES.sub(REDACTED, text)

    def redact_value(self, value: T) -> T:
        """Return a copy of ``value`` with every string in it redacted.

        Walks strings, dicts (keys too), lists, tuples, frozen dataclasses (such as
        ``GateReport``) and `ConfigError`; other values are returned as they are. Below
        `MAX_DEPTH` levels a value is replaced by its redacted JSON text.
        """
        result: T = self._walk(value, 0)
        return result

    def _walk(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if depth >= MAX_DEPTH:
            return self._flatten(value)
        if isinstance(value, dict):
            return {self._walk(k, depth + 1): self._walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            items = [self._walk(item, depth + 1) for item in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, ConfigError):
            return ConfigError(self.redact(value.path), value.line, self.redact(value.message))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self._walk(getattr(value, f.name), depth + 1)
                       for f in dataclasses.fields(value) if f.init}
            return dataclasses.replace(value, **changes)
        return value

    def _flatten(self, value: Any) -> str:
        try:
            text = json.dumps(value, default=str)
        except (RecursionError, ValueError, TypeError):
            text = "(a value nested too deeply to show)"
        return self.redact(text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts a record's message, arguments, traceback and stack.

    It formats the message (``msg % args``) once, redacts it and stores it back with no
    arguments; a traceback is formatted and redacted into ``exc_text``, which formatters
    print as it is. It never drops a record.
    """

    def __init__(self, redactor: Redactor) -> None:
        """Use ``redactor`` for every record."""
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always return True."""
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a bad format string: keep its parts, redacted
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = self.redactor.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact(record.stack_info)
        return True


_installed: dict[str, Any] = {}


def install_log_redaction(redactor: Redactor) -> Callable[[], None]:
    """Redact every log record this process creates from now on, whatever logger or handler.

    Installs a log-record factory that runs `RedactingFilter` on each new record. Installing
    again only swaps the redactor.

    Returns:
        A function that restores the previous record factory (for tests).
    """
    if "filter" in _installed:
        _installed["filter"].redactor = redactor
        return _uninstall
    previous = logging.getLogRecordFactory()
    record_filter = RedactingFilter(redactor)

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        record_filter.filter(record)
        return record

    _installed.update(filter=record_filter, previous=previous)
    logging.setLogRecordFactory(factory)
    return _uninstall


def _uninstall() -> None:
    if "previous" in _installed:
        logging.setLogRecordFactory(_installed["previous"])
    _installed.clear()
