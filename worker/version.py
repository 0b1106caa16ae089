"""llmgate's version, the one source of it: pyproject.toml reads `VERSION` from here
(``[tool.setuptools.dynamic]``), so ``llmgate --version`` prints it without importing
`importlib.metadata` (about 50 ms of imports, a third of the command's time)."""

#: The release, as PEP 440 spells it.
VERSION = "0.1.0"

#: The distribution's name on the package index (pyproject.toml's ``[project] name``): the
#: name ``llmgate`` there is another project's, so installing that name never installs this
#: one. The import package and the command stay ``llmgate``.
DISTRIBUTION = "llmgate-app"
