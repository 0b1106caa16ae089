"""A repository whose pull request branches try to pass a regression by changing only the PR.

Issue 12's cases from the field: each branch regresses all 5 tickets (its prompt drops the
ticket's text, so no reply says "refund") and also changes one thing the PR controls that used
to make the check ``neutral`` (a passing conclusion) instead of ``failure``:

- ``pr/provider``: the target's model moves to a provider whose key the worker lacks
  (``anthropic/...`` without ``api_key_env``; ``ANTHROPIC_API_KEY`` unset);
- ``pr/keyenv``: ``api_key_env`` names a variable the worker does not have;
- ``pr/apibase``: ``api_base`` is an address not on the worker's allow-list;
- ``pr/budget``: ``settings.max_cost_usd`` tiny in the PR's own config;
- ``pr/timeout``: ``settings.timeout`` tiny in the PR's own config;
- ``pr/refused``: ``api_base`` on loopback where nothing listens (connection refused);
- ``pr/regress``: only the prompt (the plain regression, for outages and budgets).

Issue 30's (a cache the PR can write decides the verdict): ``pr/keyenv-only`` renames
``api_key_env`` to a variable the worker lacks and changes nothing else, so every call of head's
has base's cache key (exit 0 with the cache before, 1 without); ``priced`` is a base with a
budget, and ``pr/unpriced`` drops the target's ``pricing`` under it.

``undecided-neutral`` is a base whose config says ``settings.undecided: neutral``
(``pr/on-neutral`` regresses on it), ``pr/head-neutral`` sets it at head only; ``low-budget``
is a base with a budget the regression's estimate exceeds, and ``pr/raise-budget`` raises it at
head only. Every model call goes to the fake provider on loopback (or nowhere: a refused
``api_base``, a missing key).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit.llm_support import KEY_ENV
from tests.unit.worker_support import commit, git

TICKETS = [f"refund for order {n}" for n in range(1, 6)]
GOOD_PROMPT = "Customer says: {{ input }}"
BAD_PROMPT = "Ticket of {{ input | length }} characters."
#: An address no worker allows (TEST-NET-1, RFC 5737): the call is refused before it is sent.
FOREIGN_BASE = "http://192.0.2.7:8080/v1"
ANTHROPIC_MODEL = "anthropic/claude-3-5-haiku-20241022"


#: The suite's assertion: a reply must mention the refund.
REFUND = "      - type: contains\n        value: refund\n"


def config(url: str, *, settings: str = "", model: str = "openai/bot-model",
           api_base: str | None = None, key_env: str | None = KEY_ENV,
           assertions: str = REFUND, priced: bool = True) -> str:
    """Return the ``tickets`` suite's config; every target field on its own line (`LINES`);
    ``assertions`` are its YAML list items; ``priced`` False leaves out the model's
    ``pricing`` (``bot-model`` has no price of its own)."""
    key = f"      api_key_env: {key_env}\n" if key_env else "      # no api_key_env\n"
    pricing = "      pricing: {input: 2, output: 8}\n" if priced else "      # no pricing\n"
    return f"""\
version: 1
settings:
  concurrency: 5
  retry: {{max_retries: 0}}
{settings}suites:
  - name: tickets
    dataset: evals/tickets.jsonl
    target:
      model: {model}
      prompt: prompts/support.txt
      api_base: "{api_base or url}"
{key}{pricing}    assertions:
{assertions}    gate:
      pass_rate: {{max_drop: 0.1}}
"""


def _line(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


#: 1-based lines of the target's fields in `config` (with one settings line more or less).
LINES = {field: _line(config("u"), f"      {field}:") for field in ("model", "api_base",
                                                                     "api_key_env")}


def closed_port() -> int:
    """Return a loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_repo(dest: Path, url: str) -> dict[str, str]:
    """Create the repository at ``dest`` for the fake provider at ``url``; return branch -> SHA
    (``main`` checked out afterwards)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": f"t{i}", "input": text}) + "\n"
                      for i, text in enumerate(TICKETS, start=1))
    shas = {"main": commit(dest, "main", {".llmgate.yml": config(url),
                                          "prompts/support.txt": GOOD_PROMPT,
                                          "evals/tickets.jsonl": dataset})}
    bad = {"prompts/support.txt": BAD_PROMPT}
    branches = {
        "pr/provider": config(url, model=ANTHROPIC_MODEL, key_env=None),
        "pr/keyenv": config(url, key_env="FAKE_LLM_KEY_TYPO"),
        "pr/apibase": config(url, api_base=FOREIGN_BASE),
        "pr/budget": config(url, settings="  max_cost_usd: 0.000001\n"),
        "pr/timeout": config(url, settings="  timeout: 0.001\n"),
        "pr/refused": config(url, api_base=f"http://127.0.0.1:{closed_port()}/v1"),
        "pr/regress": config(url),
        "pr/head-neutral": config(url, settings="  undecided: neutral\n"),
    }
    for branch, text in branches.items():
        shas[branch] = commit(dest, branch, {**bad, ".llmgate.yml": text})
    shas["pr/keyenv-only"] = commit(dest, "pr/keyenv-only", {
        ".llmgate.yml": config(url, key_env="FAKE_LLM_KEY_TYPO")})
    budget = "  max_cost_usd: 1\n"
    shas["priced"] = commit(dest, "priced", {".llmgate.yml": config(url, settings=budget)})
    shas["pr/unpriced"] = commit(dest, "pr/unpriced", {
        ".llmgate.yml": config(url, settings=budget, priced=False)}, start="priced")
    for base, settings, pr, head_settings in (
            ("undecided-neutral", "  undecided: neutral\n", "pr/on-neutral",
             "  undecided: neutral\n"),
            ("low-budget", "  max_cost_usd: 0.0001\n", "pr/raise-budget",
             "  max_cost_usd: 100\n")):
        shas[base] = commit(dest, base, {".llmgate.yml": config(url, settings=settings)})
        shas[pr] = commit(dest, pr, {**bad, ".llmgate.yml": config(url, settings=head_settings)},
                          start=base)
    return shas


@pytest.fixture(scope="module")
def failclosed_repo(llm_server: FakeLLMServer,
                    tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`build_repo` once per test module, for the module's fake provider: (path, SHAs)."""
    path = tmp_path_factory.mktemp("failclosed") / "repo"
    return path, build_repo(path, llm_server.url)
