"""The support-bot repository of the end-to-end tests with a model target and an LLM judge.

Its suite ``support`` sends each ticket to ``openai/bot-model`` with ``prompts/support.txt`` and
has ``openai/judge-model`` grade the reply against a rubric; both models are reached at the fake
provider's ``url`` with the key named by `KEY_ENV` (start the workers with
``worker_env={KEY_ENV: "sk-e2e-fake"}``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.unit.worker_support import commit, git
from worker.cli.demo import Stack, pull_request_payload

#: The environment variable that holds the fake provider's key in the workers.
KEY_ENV = "FAKE_LLM_KEY"


def support_config(url: str, *, rubric: str, settings: str = "", target: str = "") -> str:
    """Return ``.llmgate.yml`` for the ``support`` suite, gated by ``pass_rate max_drop 0.1``.

    Args:
        url: the fake provider's base URL (``api_base`` of the target and the judge).
        rubric: the ``llm_judge`` assertion's rubric.
        settings: more lines of ``settings:``, each indented two spaces and ending in a newline.
        target: more lines of the target, each indented six spaces and ending in a newline.
    """
    endpoint = f'api_base: "{url}", api_key_env: {KEY_ENV}'
    return f"""\
version: 1
settings:
  judge: {{model: openai/judge-model, {endpoint}}}
{settings}suites:
  - name: support
    dataset: evals/tickets.jsonl
    target:
      model: openai/bot-model
      prompt: prompts/support.txt
      api_base: "{url}"
      api_key_env: {KEY_ENV}
{target}    assertions:
      - type: llm_judge
        rubric: {rubric}
    gate:
      pass_rate: {{max_drop: 0.1}}
"""


def build_support_repo(dest: Path, config: str, prompt: str, tickets: Sequence[str]) -> str:
    """Create the repository at ``dest`` (its parent must exist) with one commit on ``main``:
    ``config``, the ``prompt`` template and ``tickets`` as examples ``t1``, ``t2``, ... (no
    expected output). Return main's SHA."""
    dest.mkdir()
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": f"t{i}", "input": text}) + "\n"
                      for i, text in enumerate(tickets, start=1))
    return commit(dest, "main", {".llmgate.yml": config, "prompts/support.txt": prompt,
                                 "evals/tickets.jsonl": dataset})


def open_pull_request(stack: Stack, repo: Path, slug: tuple[str, str], number: int,
                      head: str, base: str, head_ref: str = "") -> dict[str, Any]:
    """Open pull request ``number`` of ``slug`` (owner, name) from ``head`` onto ``base`` (on
    ``main``) on the fake GitHub, deliver its ``opened`` event, and return its completed check
    run (waiting up to 240 s)."""
    owner, name = slug
    clone_url = repo.as_uri()
    stack.github("POST", "/_fake/setup", {"pulls": [{
        "owner": owner, "repo": name, "number": number, "head_sha": head,
        "base_sha": base, "base_ref": "main", "head_ref": head_ref or f"pr{number}",
        "clone_url": clone_url}]})
    payload = pull_request_payload("opened", owner=owner, repo=name, clone_url=clone_url,
                                   number=number, head_sha=head, base_sha=base)
    assert stack.deliver("pull_request", payload).status_code < 300
    run: dict[str, Any] = stack.wait_for_check(head, timeout_s=240)[-1]
    return run
