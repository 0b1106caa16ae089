"""What a stored baseline depends on: the key under which one suite's result is reused.

A baseline is looked up by repository, commit SHA and `BaselineKey`; the key covers the
suite's config and dataset content hashes and its fingerprint (worker/evals/run/fingerprint.py, by
the "compare" work: target, files on its command line, prompt, dataset, assertions, judges
and judge prompt versions). At one commit the files never change, so what the key guards
against is a different llmgate: a new release or record format may score differently, and its
version is part of ``config_hash``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config import MAX_DATASET_BYTES, read_repo_file
from worker.evals.run import fingerprint
from worker.evals.serialize import to_jsonable
from worker.evals.types import Config, SuiteConfig
from worker.version import VERSION

#: Version of what the key hashes; bump it to make every stored baseline unreachable.
KEY_VERSION = 1


@dataclass(frozen=True)
class BaselineKey:
    """What one suite's result at a commit depends on; a stored result is reused only when
    every part is equal.

    Attributes:
        suite: the suite name.
        config_hash: SHA-256 of the suite's parsed config section and the run settings
            (line numbers left out), the config schema version, llmgate's version and
            `KEY_VERSION`: a new llmgate release may score differently, so it runs again.
        dataset_hash: SHA-256 of the dataset file's bytes.
        fingerprint: the suite's fingerprint digest (worker/evals/run/fingerprint.py): target,
            files on its command line, prompt, dataset, assertions, judges, judge prompts.
    """

    suite: str
    config_hash: str
    dataset_hash: str
    fingerprint: str

    @property
    def digest(self) -> str:
        """32 hex digits of SHA-256 over every part: the last part of the record key."""
        text = json.dumps([self.suite, self.config_hash, self.dataset_hash, self.fingerprint])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]

    def as_json(self) -> dict[str, str]:
        """Return the key as a JSON object (stored in the record)."""
        return {"suite": self.suite, "config_hash": self.config_hash,
                "dataset_hash": self.dataset_hash, "fingerprint": self.fingerprint}

    @classmethod
    def from_json(cls, doc: Any) -> BaselineKey:
        """Read `as_json`'s output.

        Raises:
            TypeError: ``doc`` is not an object of four strings.
        """
        parts = [doc.get(k) if isinstance(doc, dict) else None
                 for k in ("suite", "config_hash", "dataset_hash", "fingerprint")]
        texts = [p for p in parts if isinstance(p, str)]
        if len(texts) != len(parts):
            raise TypeError("a baseline key is four strings")
        return cls(*texts)


def suite_key(config: Config, suite: SuiteConfig, root: Path) -> BaselineKey:
    """Return the key of ``suite`` (of ``config``) as checked out at ``root`` (reads its files;
    a missing or unreadable dataset is hashed as such: the run itself reports it)."""
    section = _without_lines(to_jsonable(suite))
    settings = to_jsonable(config.settings)
    settings.pop("statistics", None)  # how results are compared never changes a base run
    config_hash = fingerprint.digest([KEY_VERSION, _llmgate_version(), config.version,
                                      config.path, section, settings])
    try:
        data = read_repo_file(root, suite.dataset, MAX_DATASET_BYTES)
        dataset_hash = hashlib.sha256(data).hexdigest()
    except ConfigError as err:
        dataset_hash = fingerprint.digest(["unreadable", suite.dataset, err.message])
    return BaselineKey(suite.name, config_hash, dataset_hash,
                       fingerprint.suite_fingerprint(suite, config.settings, root).digest)


def _without_lines(value: Any) -> Any:
    """``value`` without line numbers (moving a line changes no result) and without the
    ``contract_root`` of a suite (a checkout's folder, never part of a parsed config)."""
    if isinstance(value, dict):
        return {k: _without_lines(v) for k, v in value.items()
                if k not in ("line", "lines", "contract_root")}
    if isinstance(value, list):
        return [_without_lines(v) for v in value]
    return value


def _llmgate_version() -> str:
    """llmgate's version (worker/version.py, which the installed distribution declares too;
    its name on the index is not ``llmgate``, which is another project's)."""
    return VERSION
