"""Base and head at once (worker/pipeline/sides.py): the report of one after the other, real
Redis cache, real git checkouts and litellm over HTTP to the fake provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, model_config, write_repo
from worker.evals.serialize import to_jsonable
from worker.pipeline import sides
from worker.pipeline.config_file import read_config
from worker.pipeline.sides import at_once
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

ROWS = [{"id": f"t{i}", "input": f"ticket {i}"} for i in range(6)]


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if k not in ("latency_ms", "estimate") and not k.startswith("latency_")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def two_trees(llm: FakeLLMServer, tmp_path: Path) -> tuple[Path, Path]:
    config = model_config(llm.url, assertions="      - {type: contains, value: ticket}\n",
                          gate="{pass_rate: {min: 0.5, max_drop: 0.1}}")
    base = write_repo(tmp_path / "base", config, ROWS)
    head = write_repo(tmp_path / "head", config, ROWS, prompt="Kindly: {{ input }}")
    return head, base


@pytest.mark.parametrize("cached", [False, True])
async def test_at_once_gives_the_report_of_one_after_the_other(
        llm: FakeLLMServer, tmp_path: Path, redis: Any, monkeypatch: pytest.MonkeyPatch,
        cached: bool) -> None:
    llm.setup({"latency_ms": 20})
    head, base = two_trees(llm, tmp_path)
    base_config, head_config = read_config(base), read_config(head)
    assert base_config is not None and head_config is not None
    assert at_once(base_config, [head_config], base, head, None)
    reports, sent = {}, {}
    for concurrent in (False, True):
        monkeypatch.setattr(sides, "CONCURRENT_SIDES", concurrent)
        await redis.flushall()
        llm.reset()
        evals = context(redis=redis, namespace="t")
        report = await gate_trees(head, base, head_sha="h" * 40, base_sha="b" * 40,
                                  evals=evals)
        if cached:  # the warm re-run
            llm.reset()
            report = await gate_trees(head, base, head_sha="h" * 40, base_sha="b" * 40,
                                      evals=evals)
        reports[concurrent] = without_timings(to_jsonable(report))
        sent[concurrent] = len(llm.calls("chat"))
    assert reports[True] == reports[False]
    assert reports[True]["conclusion"] == "success"
    assert sent == {False: 0 if cached else 12, True: 0 if cached else 12}


async def test_a_head_equal_to_base_runs_after_it(llm: FakeLLMServer, tmp_path: Path) -> None:
    head, base = two_trees(llm, tmp_path)
    (head / "prompts" / "p.txt").write_text((base / "prompts" / "p.txt").read_text())
    base_config, head_config = read_config(base), read_config(head)
    assert base_config is not None and head_config is not None
    assert not at_once(base_config, [head_config], base, head, None)  # every answer shared
    assert at_once(base_config, [head_config], base, head, context(cache_mode="off").cache)


async def test_an_invalid_base_dataset_lets_head_run_on_its_own_contract(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    head, base = two_trees(llm, tmp_path)
    (base / "evals" / "d.jsonl").write_text("{not json\n")
    report = await gate_trees(head, base, head_sha="h" * 40, base_sha="b" * 40,
                              evals=context())
    assert report.config_error is None and report.head is not None
    assert any("base could not be evaluated" in n for n in report.notes), report.notes
    assert report.conclusion != "success"  # base not evaluated: the gate does not pass


async def test_an_invalid_head_dataset_is_the_report(llm: FakeLLMServer, tmp_path: Path) -> None:
    head, base = two_trees(llm, tmp_path)
    (head / ".llmgate.yml").write_text((head / ".llmgate.yml").read_text().replace(
        "evals/d.jsonl", "evals/missing.jsonl"))
    report = await gate_trees(head, base, head_sha="h" * 40, base_sha="b" * 40,
                              evals=context())
    assert report.config_error is not None and report.conclusion == "failure"
