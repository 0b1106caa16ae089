"""Trap cases: known-wrong outputs the suite's judge must fail, to measure the judge itself.

A suite's ``traps:`` names a JSONL file (relative to the repository root) with one trap a line:
``{"id"?, "input", "output", "expected"?, "vars"?, "contexts"?}``, where ``output`` is an answer
known to be wrong (a byte-order mark only at the start of the file, as in datasets) and
``contexts`` the retrieved passages a built-in RAG criterion judges it with
(worker/evals/score/rag_judges.py; a trap such a judge cannot judge is a configuration error).
Each of the suite's ``llm_judge`` (and ``harmful``) assertions judges each trap; a trap is caught
when every judge fails it (an errored judge does not catch it). ``judge_trap_accuracy`` (caught /
traps) is a metric like any other, so a gate can require it (``min: 1.0``), and the report shows it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.config import decode_utf8, refuse_stray_bom
from worker.evals.llm import ModelCaller
from worker.evals.llm_types import RunUsage, TrapSummary
from worker.evals.score import CRITERIA, JUDGE_TYPES, judge_spec, missing_input, run_judge
from worker.evals.types import Example, Settings, SuiteConfig

TRAP_KEYS = ("id", "input", "output", "expected", "vars", "contexts")
#: A trap: the example, its known-wrong output and the contexts it was retrieved with.
Trap = tuple[Example, object, tuple[object, ...]]


def parse_traps(text: str, path: str) -> list[Trap]:
    """Parse trap lines into (example, wrong output, contexts) triples (pure).

    Raises:
        ConfigError: a line that is not a JSON object with ``input`` and ``output``.
    """
    traps: list[Trap] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        refuse_stray_bom(raw, path, number)
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(path, number, f"invalid JSON: {exc}") from None
        if not isinstance(doc, dict) or "input" not in doc or "output" not in doc \
                or set(doc) - set(TRAP_KEYS) or not isinstance(doc.get("vars", {}), dict) \
                or not isinstance(doc.get("contexts", []), list):
            raise ConfigError(path, number, "a trap is {id?, input, output, expected?, vars?, "
                              "contexts?}: `output` is the known-wrong answer the judge must "
                              "fail, `contexts` a list of retrieved passages")
        example = Example(str(doc.get("id", number)), number, doc["input"], doc.get("expected"),
                          doc.get("vars", {}))
        traps.append((example, doc["output"], tuple(doc.get("contexts", []))))
    return traps


def load_traps(root: Path, rel_path: str) -> list[Trap]:
    """Read the trap file of a suite.

    Raises:
        ConfigError: the file is missing, outside the repository, or invalid.
    """
    path = (root / rel_path).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        raise ConfigError(rel_path, None, "trap file not found in the repository (fix `traps:`)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(rel_path, None, f"cannot be read: {exc.strerror}") from None
    text = decode_utf8(data, rel_path)
    return parse_traps(text, rel_path)


async def judge_traps(suite: SuiteConfig, root: Path, settings: Settings,
                      caller: ModelCaller) -> tuple[TrapSummary | None, RunUsage]:
    """Judge the suite's traps with its ``llm_judge`` (and ``harmful``) assertions.

    Returns:
        The summary (None when the suite has no traps) and what the judge calls spent.

    Raises:
        ConfigError: traps without an ``llm_judge`` assertion, or a bad trap file.
    """
    if suite.traps is None:
        return None, RunUsage()
    specs = [s for s in suite.assertions if s.type in JUDGE_TYPES]
    if not specs:
        raise ConfigError(suite.traps, None, f"suite {suite.name!r} has `traps` but no "
                          "`llm_judge` assertion to test with them")

    def fail(message: str) -> ConfigError:
        return ConfigError(suite.traps or "", None, message)

    judges = [judge_spec(s, settings.judge, fail) for s in specs]
    caught, errors, missed, spend = 0, 0, [], RunUsage()
    traps = load_traps(root, suite.traps)
    for example, _, contexts in traps:
        for js in judges:
            unusable = js.criterion and missing_input(CRITERIA[js.criterion], example, contexts)
            if unusable:
                raise ConfigError(suite.traps, example.line, f"this trap cannot test the "
                                  f"{js.criterion} judge: {unusable}")
    judged = await asyncio.gather(*(
        asyncio.gather(*(run_judge(js, caller, example, output, contexts=contexts)
                         for js in judges))
        for example, output, contexts in traps))
    for (example, _, _), verdicts in zip(traps, judged, strict=True):
        spend = sum((used for _, used in verdicts), spend)
        if any(result.errored for result, _ in verdicts):
            errors += 1
            missed.append(example.id)
        elif all(not result.passed for result, _ in verdicts):
            caught += 1
        else:
            missed.append(example.id)
    return TrapSummary(len(traps), caught, errors, tuple(missed)), spend
