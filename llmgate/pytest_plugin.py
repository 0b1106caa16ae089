"""A pytest plugin: the suites of ``.llmgate.yml`` as test items, beside the unit tests.

Opt in with ``pytest --llmgate`` or ``llmgate = true`` in the ini file (pytest.ini, or
``[tool.pytest.ini_options]`` of pyproject.toml); without either, the plugin collects nothing.
It collects the ``.llmgate.yml`` at the root of a git repository (or of a folder outside git)
when pytest walks over it: name it (``pytest --llmgate .llmgate.yml tests``) or put it in
``testpaths``. Configs in folders are gated through the root config, as ``llmgate run`` gates
them; a ``.llmgate.yml`` below the root is not collected on its own.

Items, by node id:

- ``.llmgate.yml::<suite>::<example id>``: one per example of the suite's dataset; fails when the
  example fails at head, with its reasons, output and expected value; with ``--llmgate-base``
  an example that fails at base as well is an expected failure (xfail), as the gate does not
  hold it against the change.
- ``.llmgate.yml::<suite>::gate::<metric>``: one per metric the suite gates; fails when a rule on
  it fails, regresses, or is inconclusive where ``on_inconclusive`` makes that count.
- ``.llmgate.yml::verdict``: fails whenever ``llmgate run`` would exit non-zero (fail closed:
  a configuration or execution error, an undecided gate), with the headline and why.
- ``.llmgate.yml::config``: only for a config that cannot be read; fails with the error.

The gate runs once per pytest process (`llmgate.api.run`, ``llmgate run``'s own path), at the
first selected item, for the suites the selected items need; every item then reads its result.
Under pytest-xdist each worker process that receives an item of the file runs the gate once
(``--dist loadfile`` sends them all to one worker: one run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmgate.api import EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR, Result, run

#: The config file the plugin collects (`worker.evals.filenames.CONFIG_FILENAME`).
CONFIG_FILE = ".llmgate.yml"
#: Each collected file's result, run once per process, and the suites its selected items need
#: (None: every suite).
_RESULTS = pytest.StashKey[dict[Path, Result]]()
_SUITES = pytest.StashKey[dict[Path, "set[str] | None"]]()


class EvalFailure(Exception):
    """An item's failure, shown as its text alone (no traceback of the plugin)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--llmgate``, ``--llmgate-base`` and the ini options ``llmgate``, ``llmgate_base``."""
    group = parser.getgroup("llmgate", "llmgate eval suites as tests")
    group.addoption("--llmgate", action="store_true", default=False,
                    help="collect the suites of the repository's .llmgate.yml as test items")
    group.addoption("--llmgate-base", default=None, metavar="REF",
                    help="compare with this base ref, as llmgate run --base (default: head "
                         "alone, absolute rules only)")
    parser.addini("llmgate", type="bool", default=False,
                  help="collect .llmgate.yml suites as test items (as --llmgate)")
    parser.addini("llmgate_base", default="", help="base ref for the llmgate items")


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("llmgate") or config.getini("llmgate"))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect ``file_path`` when the plugin is enabled and it is the root ``.llmgate.yml``."""
    if file_path.name != CONFIG_FILE or not _enabled(parent.config):
        return None
    from worker.cli import repo_root

    if repo_root(file_path.parent) != file_path.parent.absolute():
        return None  # a folder's config: gated through the root config
    file: ConfigFile = ConfigFile.from_parent(parent, path=file_path)
    return file


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note which suites each collected file's selected items need."""
    needed: dict[Path, set[str] | None] = {}
    for item in items:
        if isinstance(item, GateItem):
            suites = needed.setdefault(item.path, set())
            if item.suite is None:
                needed[item.path] = None
            elif suites is not None:
                suites.add(item.suite)
    config.stash[_SUITES] = needed


class ConfigFile(pytest.File):
    """The root ``.llmgate.yml``: one `SuiteNode` per suite of every config it gates."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Yield the suites, then the ``verdict`` item; a ``config`` item for a config that
        cannot be read (its error is the item's failure)."""
        from worker.errors import ConfigError
        from worker.evals.config import load_suite_dataset
        from worker.pipeline import folder_root, plan_configs, read_config

        root = self.path.parent
        for plan in plan_configs(root, None).configs:
            folder = folder_root(root, plan.folder) if plan.folder else root
            try:
                if plan.error is not None:
                    raise plan.error
                config = read_config(root, plan.path)
                if config is None or folder is None:
                    continue  # deleted at head, or its folder is not a folder
                for suite in config.suites:
                    ids = [e.id for e in load_suite_dataset(suite.contract_root or folder,
                                                            suite)]
                    name = f"{plan.folder}/{suite.name}" if plan.folder else suite.name
                    yield SuiteNode.from_parent(self, name=name, suite=suite.name,
                                                config_path=plan.path, ids=ids,
                                                metrics=list(suite.gate))
            except ConfigError as err:
                yield GateItem.from_parent(self, name="config", kind="config",
                                           detail=f"configuration error: {err}")
        yield GateItem.from_parent(self, name="verdict", kind="verdict")


class SuiteNode(pytest.Collector):
    """One suite: an item per example id, then a ``gate`` node with an item per metric."""

    def __init__(self, *, suite: str, config_path: str, ids: list[str], metrics: list[str],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite, self.config_path, self.ids, self.metrics = suite, config_path, ids, metrics

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Yield the example items (first of each id), then the gate's items."""
        common = {"suite": self.suite, "config_path": self.config_path}
        for example_id in dict.fromkeys(self.ids):
            yield GateItem.from_parent(self, name=example_id, kind="example", **common)
        if self.metrics:
            yield RulesNode.from_parent(self, name="gate", metrics=self.metrics, **common)


class RulesNode(pytest.Collector):
    """A suite's gate: one item per metric it gates."""

    def __init__(self, *, suite: str, config_path: str, metrics: list[str],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite, self.config_path, self.metrics = suite, config_path, metrics

    def collect(self) -> Iterator[pytest.Item]:
        """Yield one rule item per gated metric."""
        for metric in self.metrics:
            yield GateItem.from_parent(self, name=metric, kind="rule", suite=self.suite,
                                       config_path=self.config_path)


class GateItem(pytest.Item):
    """One example, one gated metric, the verdict or a broken config (``kind``)."""

    def __init__(self, *, kind: str, suite: str | None = None, config_path: str = CONFIG_FILE,
                 detail: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind, self.suite, self.config_path, self.detail = kind, suite, config_path, detail

    def runtest(self) -> None:
        """Read this item's part of the file's result (running the gate at the first item).

        Raises:
            EvalFailure: the example, rule or verdict fails; its text says why.
        """
        if self.kind == "config":
            raise EvalFailure(self.detail)
        result = _result(self)
        if self.kind == "verdict":
            if not result.passed:
                raise EvalFailure("\n".join([f"llmgate run would exit {result.exit_code} "
                                             f"({result.conclusion}): {result.headline}",
                                             *result.why]))
            return
        unrun = result.exit_code in (EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR)
        if unrun:
            raise EvalFailure("\n".join(["the gate did not run:", *result.why]))
        (_check_example if self.kind == "example" else _check_rule)(self, result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        """Show an `EvalFailure` as its text; anything else as pytest would."""
        if isinstance(excinfo.value, EvalFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Name the item by the config file and its node name."""
        return self.path, None, f"llmgate {self.kind}: {self.name}"


def _result(item: GateItem) -> Result:
    """The gate of ``item``'s file, run at the first item that asks (once per process)."""
    results = item.config.stash.setdefault(_RESULTS, {})
    if item.path not in results:
        suites = item.config.stash.get(_SUITES, {}).get(item.path)
        base = item.config.getoption("llmgate_base") or item.config.getini("llmgate_base")
        options = [arg for name in sorted(suites or ()) for arg in ("--suite", name)]
        results[item.path] = run(item.path.parent, base=base or None, options=options)
    return results[item.path]


def _check_example(item: GateItem, result: Result) -> None:
    found = [e for e in result.examples if (e.config, e.suite, e.id)
             == (item.config_path, item.suite, item.name)]
    if not found:
        pytest.skip(f"example {item.name} did not run (settings.smoke, or the suite stopped)")
    example = found[0]
    if example.passed:
        return
    text = "\n".join([f"{item.suite}::{example.id} (line {example.line}) failed:",
                      *(f"  {reason}" for reason in example.reasons),
                      f"  output: {example.output!r}", f"  expected: {example.expected!r}"])
    if example.failed_at_base and not example.regressed:
        pytest.xfail(f"fails at base too: {'; '.join(example.reasons)}")
    raise EvalFailure(text)


def _check_rule(item: GateItem, result: Result) -> None:
    rules = [r for r in result.rules if (r.config, r.suite, r.metric)
             == (item.config_path, item.suite, item.name)]
    lines = [f"{r.rule}{f' [{r.group}]' if r.group else ''}: {r.status} (base {r.base}, head "
             f"{r.head}){f': {r.reason}' if r.reason else ''}" for r in rules]
    if any(r.blocks for r in rules):
        raise EvalFailure("\n".join([f"{item.suite} {item.name}:", *lines]))
    if not rules or all(r.status == "skipped" for r in rules):
        pytest.skip("; ".join(lines) or f"no rule on {item.name} was checked")
