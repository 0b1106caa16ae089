"""Read the schema file a ``json_schema`` assertion names (``file:``), as the config's other files.

A schema file is a file of the checkout that the config names, like a dataset: the runner
(worker/evals/run/runner.py) reads it with the dataset, where the suite's scoring files are
(``contract_root`` or the run's root), and re-scoring (worker/evals/verdict/comparable.py) alike;
the schema goes inline into the spec, so scoring (worker/evals/score/structured.py) reads no
file. Its text is decoded as the config's other files are (worker/evals/config/files.py
`decode_utf8`: a byte-order mark dropped, a Git LFS pointer refused), and it is checked as an
inline schema is (`structured.check_schema`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from worker.errors import ConfigError
from worker.evals.config.files import decode_utf8
from worker.evals.score import check_schema
from worker.evals.types import AssertionSpec


def load_schema_file(spec: AssertionSpec, root: Path) -> AssertionSpec:
    """Return ``spec`` with the schema of its ``file`` read inline (other specs unchanged).

    Raises:
        ConfigError: the file is missing, outside the repository, unparseable or not a schema.
    """
    if spec.type != "json_schema" or "file" not in spec.params:
        return spec
    rel = str(spec.params["file"])
    path = (root / rel).resolve()

    def fail(message: str) -> ConfigError:
        return ConfigError(rel, None, message)

    if Path(rel).is_absolute() or not path.is_relative_to(root.resolve()) or not path.is_file():
        raise fail("schema file not found inside the repository (fix `file:` of json_schema)")
    try:
        schema = yaml.safe_load(decode_utf8(path.read_bytes(), rel))  # BOM, LFS pointer
    except (OSError, yaml.YAMLError) as exc:
        raise fail(f"cannot read the schema: {exc}") from None
    check_schema(schema, fail)
    return AssertionSpec(spec.type, {"schema": schema}, spec.line)
