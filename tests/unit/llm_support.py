"""Helpers of the LLM tests: the fake provider as a fixture, a test repository, a fake sleep."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer, running_fake_llm
from worker.evals.context import EvalContext
from worker.evals.llm import direct

#: The environment variable holding the fake provider's key in the test configs.
KEY_ENV = "FAKE_LLM_KEY"


@pytest.fixture(scope="module")
def llm_server() -> Iterator[FakeLLMServer]:
    """One fake OpenAI-compatible server per test module."""
    with running_fake_llm() as server:
        yield server


@pytest.fixture()
def llm(llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    """The module's fake server, reset (no rules, faults or calls) and its key in the env."""
    return _fresh(llm_server, monkeypatch)


def _fresh(llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    llm_server.reset()
    llm_server.setup({"rules": [], "default_reply": None, "latency_ms": 0, "rate_limit": None,
                      "batch": None})
    monkeypatch.setenv(KEY_ENV, "sk-fake-test-key")
    return llm_server


#: The two ways a call to an ``openai/<name>`` endpoint with ``api_base`` can be sent.
PATHS = ("direct", "litellm")


@pytest.fixture(name="llm", params=PATHS)
def llm_on_both_paths(request: pytest.FixtureRequest, llm_server: FakeLLMServer,
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    """`llm`, once per provider path (a module takes it as ``llm = llm_on_both_paths``):
    ``direct`` (worker/evals/llm/direct.py) or ``litellm`` (``LLMGATE_DIRECT_CLIENT=0``). At the
    end the test fails if a call took the other path: none through the direct client on
    litellm's, and on the direct one, if the server saw a model of the direct path
    (`direct.unknown_openai_model`), some calls through the direct client."""
    path = request.param
    monkeypatch.setenv(direct.DIRECT_ENV, "1" if path == "direct" else "0")
    sent: list[str] = []
    post = direct.post

    async def counted(api_base: str, where: str, *args: Any, **kwargs: Any) -> direct.Answer:
        sent.append(where)
        return await post(api_base, where, *args, **kwargs)

    monkeypatch.setattr(direct, "post", counted)
    yield _fresh(llm_server, monkeypatch)
    if path == "litellm":
        assert not sent, f"{len(sent)} calls took the direct path under LLMGATE_DIRECT_CLIENT=0"
    elif any(direct.unknown_openai_model(f"openai/{c['model']}") for c in llm_server.calls()):
        assert sent, "the server saw calls to a direct-path model, none through the client"


class FakeSleep:
    """An ``asyncio.sleep`` stand-in that records the waits and returns at once; its `clock`
    is virtual time that only its sleeps move (give it to the context as ``clock``)."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.now = 1000.0

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        """Virtual monotonic seconds: the sum of the waits slept so far, plus 1000."""
        return self.now


def context(sleep: FakeSleep | None = None, **kwargs: Any) -> EvalContext:
    """An eval context with a recording sleep and a seeded jitter source."""
    sleep = sleep or FakeSleep()
    options: dict[str, Any] = {"sleep": sleep, "clock": sleep.clock, "rng": random.Random(7),
                               "say": lambda _: None, **kwargs}
    return EvalContext.of(**options)


def endpoint_yaml(url: str, model: str = "openai/test-model", extra: str = "") -> str:
    """The YAML flow mapping of a model endpoint on the fake server."""
    return (f'{{model: {model}, api_base: "{url}", api_key_env: {KEY_ENV}'
            + (f", {extra}" if extra else "") + "}")


def write_repo(root: Path, config: str, rows: list[dict[str, Any]],
               prompt: str = "Customer says: {{ input }}", files: dict[str, str] | None = None,
               ) -> Path:
    """Write a config, ``evals/d.jsonl``, ``prompts/p.txt`` and other files under ``root``."""
    (root / "evals").mkdir(parents=True, exist_ok=True)
    (root / "prompts").mkdir(exist_ok=True)
    (root / ".llmgate.yml").write_text(config)
    (root / "evals" / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "prompts" / "p.txt").write_text(prompt)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def model_config(url: str, *, settings: str = "", assertions: str = "", gate: str = "",
                 target_extra: str = "", suite_extra: str = "") -> str:
    """A one-suite config with a model target on the fake server."""
    if "concurrency" not in settings:
        settings = "concurrency: 4" + (f", {settings}" if settings else "")
    return (f"version: 1\nsettings: {{{settings}}}\n"
            "suites:\n  - name: s\n    dataset: evals/d.jsonl\n"
            f"    target: {endpoint_yaml(url, extra='prompt: prompts/p.txt' + target_extra)}\n"
            + (f"    assertions:\n{assertions}" if assertions else "")
            + (f"    gate: {gate}\n" if gate else "") + suite_extra)


def echo_repo(llm: FakeLLMServer, root: Path) -> Path:
    """A git repository at ``root`` with one two-example suite ``s`` whose model (the fake
    server, set to answer ``echo``) must answer with ``echo``: it passes, two calls a side."""
    llm.setup({"default_reply": "echo"})
    repo = write_repo(root, model_config(llm.url, gate="{pass_rate: {min: 0.5}}",
                                         assertions="      - {type: contains, value: echo}\n"),
                      [{"id": "a", "input": "hi"}, {"id": "b", "input": "ho"}])
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo
