"""A repository whose branches spend outside the one budget of a gate (issue 31).

- ``pairwise`` (base) / ``pr/pairwise``: a ``pairwise`` suite under ``max_cost_usd`` $0.004;
  each target answer is `LONG_REPLY` (100 completion tokens at $10 per million: $0.001), so
  head's 5 answers ($0.005) reach the budget and its 10 pairwise judge calls must not be sent.
  The estimate expects 1 completion token a call (``estimate_output_tokens: 1``), so the run
  starts.
- ``command`` (base) / ``pr/command``: a command target reporting ``"cost": 0.001`` per
  example, one at a time, under ``max_cost_usd`` $0.002: two examples spend the budget.
- ``slow`` (base) / ``pr/slow``: answers without ``usage`` (cost unknown) under
  ``max_duration`` 1 s, one call at a time: the run stops over time having spent only
  unknown-cost calls.
- ``plain`` (base) / ``pr/plain``: 5 examples of a model target, the response cache off
  (``cache: false``): one evaluation sends 10 calls, base's 5 and head's 5.
- ``long`` (base) / ``pr/long``: `plain`'s suite on 20 examples, 2 calls at a time: with a
  slow provider the run lasts long enough to be closed in the middle.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit.llm_support import endpoint_yaml
from tests.unit.worker_support import commit, git

#: A target answer of 100 words: 100 completion tokens (the fake counts words).
LONG_REPLY = " ".join(["word"] * 100)
PRICED = "pricing: {input: 0, output: 10}"
ROWS = [{"id": f"e{i}", "input": f"question {i}"} for i in range(1, 6)]
BOT = """\
import json, sys
doc = json.load(open(sys.argv[1]))
json.dump({"output": "answer " + doc["input"], "cost": 0.001}, open(sys.argv[2], "w"))
"""


def pairwise_config(url: str) -> str:
    """Base's pairwise config (`module docstring`)."""
    judge = endpoint_yaml(url, "openai/judge-model", PRICED)
    target = endpoint_yaml(url, "openai/bot-model", f"prompt: prompts/p.txt, {PRICED}")
    return f"""\
version: 1
settings: {{concurrency: 5, max_cost_usd: 0.004, estimate_output_tokens: 1, cache: false,
  retry: {{max_retries: 0}}, judge: {judge}}}
suites:
  - name: s
    dataset: evals/d.jsonl
    target: {target}
    assertions:
      - type: pairwise
        rubric: Which is kinder?
    gate: {{win_rate: {{min: 0}}}}
"""


def command_config() -> str:
    """Base's command-target config (`module docstring`)."""
    python = shlex.quote(sys.executable)
    return f"""\
version: 1
settings: {{concurrency: 1, max_cost_usd: 0.002, timeout: 20}}
suites:
  - name: s
    dataset: evals/d.jsonl
    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}
    assertions:
      - {{type: contains, value: answer}}
    gate: {{pass_rate: {{min: 0.5}}}}
"""


def slow_config(url: str) -> str:
    """Base's config of usage-less answers under a time limit (`module docstring`)."""
    target = endpoint_yaml(url, "openai/bot-model", f"prompt: prompts/p.txt, {PRICED}")
    return f"""\
version: 1
settings: {{concurrency: 1, max_duration: 1, max_cost_usd: 10, cache: false,
  retry: {{max_retries: 0}}}}
suites:
  - name: s
    dataset: evals/d.jsonl
    target: {target}
    assertions:
      - {{type: contains, value: word}}
    gate: {{pass_rate: {{min: 0.5}}}}
"""


def plain_config(url: str, concurrency: int = 5, dataset: str = "evals/d.jsonl") -> str:
    """Base's config of a plain model target without the response cache."""
    target = endpoint_yaml(url, "openai/bot-model", f"prompt: prompts/p.txt, {PRICED}")
    return f"""\
version: 1
settings: {{concurrency: {concurrency}, cache: false, retry: {{max_retries: 0}}}}
suites:
  - name: s
    dataset: {dataset}
    target: {target}
    assertions:
      - {{type: contains, value: question}}
    gate: {{pass_rate: {{min: 0.5}}}}
"""


def build_repo(dest: Path, url: str) -> dict[str, str]:
    """Create the repository at ``dest`` for the fake provider at ``url``; return branch ->
    SHA."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps(r) + "\n" for r in ROWS)
    many = "".join(json.dumps({"id": f"q{i}", "input": f"question {i}"}) + "\n"
                   for i in range(1, 21))
    shas = {"main": commit(dest, "main", {"evals/d.jsonl": dataset, "evals/long.jsonl": many,
                                          "prompts/p.txt": "{{ input }}"})}
    for base, config in (("pairwise", pairwise_config(url)), ("command", command_config()),
                         ("slow", slow_config(url)), ("plain", plain_config(url)),
                         ("long", plain_config(url, 2, "evals/long.jsonl"))):
        shas[base] = commit(dest, base, {".llmgate.yml": config, "bot.py": BOT})
        shas[f"pr/{base}"] = commit(dest, f"pr/{base}", {"prompts/p.txt": "Kindly: {{ input }}",
                                                          "README.md": "head\n"}, start=base)
    return shas


@pytest.fixture(scope="module")
def budget_repo(llm_server: FakeLLMServer,
                tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`build_repo` once per test module, for the module's fake provider: (path, SHAs)."""
    path = tmp_path_factory.mktemp("budget") / "repo"
    return path, build_repo(path, llm_server.url)
