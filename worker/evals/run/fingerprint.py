"""Fingerprint a suite: SHA-256 digests of what produces its outputs and of what scores them.

A `SuiteFingerprint` has two maps of component -> SHA-256 hex digest and one combined digest:

- **outputs** (what produces the outputs): ``target`` (a command and its ``batch`` flag, or a
  model with its ``params``, ``api_base`` and ``version``; plus ``settings.repeats``),
  ``target_files`` (the repository files named on a command line, e.g. ``bot.py``; code they
  import is not followed), ``prompt`` (a model target's prompt file) and ``dataset_inputs``
  (each example's ``id``, ``input`` and ``vars``).
- **scoring** (what scores them): ``assertions`` (the suite's assertion specs; a basic text
  assertion with its semantics' version, worker/evals/score/assertions.py `TEXT_VERSION`),
  ``assertion_files`` (``json_schema`` files, ``python`` function files, the installed version
  of an ``entry_point``), ``judges`` (model, params and ``api_base`` of every ``llm_judge``,
  ``pairwise`` and ``similar``, defaults from ``settings.judge``/``settings.embedding``
  resolved; a ``local/<name>`` embedding model adds the digest of its directory,
  worker/evals/llm/local_embed.py), ``judge_prompts`` (`JudgeSpec.version`: the template
  version, rubric and scale),
  ``expected`` (each example's ``expected`` and own ``assert`` list, and a conversation's
  per-turn ``assert`` lists) and ``traps``.

Decisions: dataset line order, blank lines, JSON spacing and key order do not change a digest
(examples are answered one by one and paired by id); an example without an explicit ``id``
takes its line number as id, so moving it does. Adding or removing an example changes both
``dataset_inputs`` and ``expected`` (base is then re-scored: free for deterministic assertions,
judge answers mostly cached). ``tags`` and ``metadata`` are left out: they
select examples for gate rules, they neither produce nor score outputs. Prices, key variable
names, timeouts and concurrency are left out too. Gate rules are not part of it (base's rules
apply anyway, worker/evals/verdict/rules.py). A file that is missing or unreadable is hashed as
such, never raised: the run reports that error itself.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config import MAX_DATASET_BYTES, decode_utf8, parse_suite_dataset, read_repo_file
from worker.evals.llm import local_embed, parse_endpoint
from worker.evals.score import (
    ENTRY_POINT_GROUP,
    JUDGE_TEMPLATE_VERSION,
    NORMALIZED_TYPES,
    PAIRWISE_TEMPLATE_VERSION,
    TEXT_VERSION,
    TRAJECTORY_TEMPLATE_VERSION,
    judge_spec,
)
from worker.evals.types import (
    AssertionSpec,
    CommandTarget,
    Config,
    Endpoint,
    RunResult,
    Settings,
    SuiteConfig,
    SuiteFingerprint,
)

#: Components of `SuiteFingerprint.outputs` and `SuiteFingerprint.scoring`, in report order.
OUTPUT_COMPONENTS = ("target", "target_files", "prompt", "dataset_inputs")
SCORING_COMPONENTS = ("assertions", "assertion_files", "judges", "judge_prompts", "expected",
                      "traps")
#: What each component means, for the report ("scoring changed: judge prompts (rubric, scale)").
DESCRIPTIONS = {
    "target": "target", "target_files": "files on the target's command line",
    "prompt": "prompt file", "dataset_inputs": "dataset inputs",
    "assertions": "assertions", "assertion_files": "assertion files (schemas, python)",
    "judges": "judge models", "judge_prompts": "judge prompts (rubric, scale)",
    "expected": "expected values or the set of examples", "traps": "trap cases"}
_JUDGED = ("llm_judge", "pairwise", "harmful", "trajectory_judge")
_TEMPLATES = {"llm_judge": JUDGE_TEMPLATE_VERSION, "pairwise": PAIRWISE_TEMPLATE_VERSION,
              "harmful": JUDGE_TEMPLATE_VERSION, "trajectory_judge": TRAJECTORY_TEMPLATE_VERSION}


def digest(value: Any) -> str:
    """Return the SHA-256 hex digest of ``value``'s canonical JSON (key order, 1 == 1.0)."""
    text = json.dumps(_norm(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def suite_fingerprint(suite: SuiteConfig, settings: Settings, root: Path) -> SuiteFingerprint:
    """Fingerprint ``suite`` of a config as checked out at ``root`` (reads its files; no raise).

    The target's side (command files, prompt) is read at ``root``; the dataset, assertion
    files and traps at the suite's ``contract_root`` when it has one (head's target on base's
    evaluation contract, worker/evals/verdict/contract.py).
    """
    contract = suite.contract_root or root
    inputs, expected, example_specs = _dataset(contract, suite)
    outputs = {"target": digest([_target(suite), settings.repeats]),
               "target_files": digest(_command_files(suite, root)),
               "prompt": _file(root, getattr(suite.target, "prompt", None)),
               "dataset_inputs": inputs}
    specs = (*suite.assertions, *example_specs)
    scoring = {"assertions": digest([_spec(s) for s in suite.assertions]),
               "assertion_files": digest(_assertion_files(specs, contract)),
               "judges": digest([[s.type, _judge_endpoint(s, settings)] for s in specs
                                 if s.type in (*_JUDGED, "similar", "composite")]),
               "judge_prompts": digest(judge_versions(specs, settings)),
               "expected": expected, "traps": _file(contract, suite.traps)}
    return SuiteFingerprint(outputs, scoring, digest([outputs, scoring]))


def config_fingerprints(config: Config, root: Path) -> dict[str, SuiteFingerprint]:
    """Return suite name -> fingerprint for every suite of ``config`` at ``root``."""
    return {s.name: suite_fingerprint(s, config.settings, root) for s in config.suites}


def attach(run: RunResult, config: Config, root: Path) -> RunResult:
    """Return ``run`` with the fingerprint of each of its suites set (from ``config`` at
    ``root``, the checkout the run used)."""
    found = {s.name: s for s in config.suites}
    suites = {name: replace(result, fingerprint=suite_fingerprint(found[name], config.settings,
                                                                   root))
              if name in found else result for name, result in run.suites.items()}
    return replace(run, suites=suites)


def changed(base: Mapping[str, str], head: Mapping[str, str]) -> tuple[str, ...]:
    """Return the components whose digests differ (or exist on one side only), sorted by the
    component order of this module."""
    order = (*OUTPUT_COMPONENTS, *SCORING_COMPONENTS)
    names = {k for k in (*base, *head) if base.get(k) != head.get(k)}
    return tuple(sorted(names, key=lambda k: (order.index(k) if k in order else len(order), k)))


def describe(components: Iterable[str]) -> str:
    """Return the components in words, e.g. ``judge models, judge prompts (rubric, scale)``."""
    return ", ".join(DESCRIPTIONS.get(c, c) for c in components)


def to_json(fingerprint: SuiteFingerprint) -> dict[str, Any]:
    """Return ``{"outputs": {...}, "scoring": {...}, "digest": hex}`` (for stored baselines)."""
    return {"outputs": dict(fingerprint.outputs), "scoring": dict(fingerprint.scoring),
            "digest": fingerprint.digest}


def from_json(doc: Any) -> SuiteFingerprint:
    """Read what `to_json` wrote.

    Raises:
        ValueError: ``doc`` is not such a mapping of strings.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("digest"), str):
        raise ValueError("a fingerprint is {outputs, scoring, digest}")
    maps = [doc.get("outputs"), doc.get("scoring")]
    if not all(isinstance(m, dict) and all(isinstance(k, str) and isinstance(v, str)
                                           for k, v in m.items()) for m in maps):
        raise ValueError("fingerprint components must map names to hex digests")
    return SuiteFingerprint(dict(maps[0]), dict(maps[1]), doc["digest"])  # type: ignore[arg-type]


def judge_versions(specs: Iterable[AssertionSpec], settings: Settings) -> list[str]:
    """Return the prompt version of each judge (``llm_judge``, ``pairwise``,
    ``trajectory_judge``) of ``specs`` ("?" when it
    names no judge model: the run reports that itself)."""
    versions = []
    for spec in specs:
        if spec.type in _JUDGED:
            kind = _TEMPLATES[spec.type]
            try:
                versions.append(judge_spec(spec, settings.judge, _fail, kind).version)
            except ConfigError:
                versions.append("?")
    return versions


def _fail(message: str) -> ConfigError:
    return ConfigError("", None, message)


def _norm(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items()}
    return value


def _target(suite: SuiteConfig) -> dict[str, Any]:
    target = suite.target
    if isinstance(target, CommandTarget):
        return {"command": target.command, "batch": target.batch}
    return {"model": _endpoint(target.endpoint), "version": target.version}


def _endpoint(endpoint: Endpoint) -> dict[str, Any]:
    return {"model": endpoint.model, "params": endpoint.params, "api_base": endpoint.api_base}


def _judge_endpoint(spec: AssertionSpec, settings: Settings) -> dict[str, Any] | None:
    embedding = spec.type == "similar"
    default = settings.embedding if embedding else settings.judge
    try:
        endpoint = parse_endpoint(spec.params, _fail, embedding=embedding) \
            if "model" in spec.params else default
    except ConfigError:
        endpoint = None
    if endpoint is None:
        return None
    return {**_endpoint(endpoint), **local_embed.identity(endpoint.model)}


def _spec(spec: AssertionSpec) -> dict[str, Any]:
    """A spec as hashed: a text assertion with the version of its semantics (`TEXT_VERSION`),
    so a result scored under other semantics is scored again."""
    if spec.type in NORMALIZED_TYPES:
        return {"type": spec.type, "params": spec.params, "semantics": TEXT_VERSION}
    return {"type": spec.type, "params": spec.params}


def _read(root: Path, rel_path: str) -> bytes | None:
    try:
        return read_repo_file(root, rel_path, MAX_DATASET_BYTES)
    except ConfigError:
        return None


def file_digest(root: Path, rel_path: str | None) -> str:
    """SHA-256 hex digest of the repository file ``rel_path`` at ``root`` (a digest naming it
    missing when it cannot be read; of None for no file). Never raises."""
    return _file(root, rel_path)


def _file(root: Path, rel_path: str | None) -> str:
    if rel_path is None:
        return digest(None)
    data = _read(root, rel_path)
    return digest(["missing", rel_path]) if data is None else hashlib.sha256(data).hexdigest()


def _dataset(root: Path, suite: SuiteConfig) -> tuple[str, str, list[AssertionSpec]]:
    """Return the digests of the inputs and of the expectations (each in id order), and the
    examples' own assertions."""
    rel_path = suite.dataset
    data = _read(root, rel_path)
    try:
        examples = parse_suite_dataset(decode_utf8(data, rel_path), suite) \
            if data is not None else None
    except ConfigError:  # not UTF-8, an LFS pointer, a bad line: the run reports it
        examples = None
    if examples is None:
        raw = digest(["unreadable", rel_path, hashlib.sha256(data or b"").hexdigest()])
        return raw, raw, []
    ordered = sorted(examples, key=lambda e: e.id)
    return (digest([[e.id, e.input, e.vars] for e in ordered]),
            digest([[e.id, e.expected, [_spec(s) for s in e.assertions],
                     *([] if e.relevant_ids is None else [e.relevant_ids]),
                     *([[[_spec(s) for s in t.assertions] for t in e.turns]] if e.turns else [])]
                    for e in ordered]),
            [s for e in examples for s in (*e.assertions, *(a for t in e.turns
                                                            for a in t.assertions))])


def _command_files(suite: SuiteConfig, root: Path) -> dict[str, str]:
    if not isinstance(suite.target, CommandTarget):
        return {}
    found = {}
    for arg in shlex.split(suite.target.command):
        if "{" in arg or arg.startswith("-") or ("/" not in arg and "." not in arg):
            continue
        data = _read(root, arg)
        if data is not None:
            found[arg] = hashlib.sha256(data).hexdigest()
    return found


def _assertion_files(specs: Iterable[AssertionSpec], root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for spec in specs:
        if spec.type == "json_schema" and isinstance(spec.params.get("file"), str):
            found[spec.params["file"]] = _file(root, spec.params["file"])
        elif spec.type == "python" and isinstance(spec.params.get("function"), str):
            path = spec.params["function"].rsplit(":", 1)[0]
            found[path] = _file(root, path)
        elif spec.type == "python" and isinstance(spec.params.get("entry_point"), str):
            name = spec.params["entry_point"]
            found[f"entry_point:{name}"] = _entry_point_version(name)
    return found


def _entry_point_version(name: str) -> str:
    """Return ``distribution==version`` of the installed assertion ``name``, or "missing"."""
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            dist = ep.dist
            return f"{ep.value}@{dist.name}=={dist.version}" if dist is not None else ep.value
    return "missing"
