"""The one job every tool runs: N support tickets, one model call each, one check per answer.

Each ticket asks the model to answer a customer (``Answer the customer: <ticket>``; the head of
the gate changes the prompt to ``Answer the customer kindly: <ticket>``); the fake provider
answers every call with `REPLY` after its latency. The check is the nearest each tool has to
the same thing: llmgate's and promptfoo's ``contains: ticket``, llmci's ``exact_match`` against
`REPLY` (it has no contains). The gate rule: pass rate (accuracy) at least 0.9, and, against the
base, a drop of at most 0.05 (llmgate ``max_drop``, llmci ``max_regression``; promptfoo has no
base comparison: its gate is two evals whose failures set the exit code).

Layout written by `write_all` (one folder per tool):

- ``llmgate/``: a git repository whose commit holds the base prompt, with the head prompt in
  the working tree: ``llmgate run`` gates the working tree, ``--base <sha>`` both.
- ``llmci/``: ``base.yaml`` and ``head.yaml`` with their prompt files; a gate is ``--config
  base.yaml --update-baseline`` then ``--config head.yaml`` (compared with that baseline).
- ``promptfoo/``: ``base.yaml`` and ``head.yaml`` over one ``tickets.csv``.
"""

from __future__ import annotations

import csv
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Every answer of the fake provider.
REPLY = "Thank you for writing: we are looking into your ticket now."
#: The prompt at base and at head, ``{input}`` standing for the ticket.
PROMPTS = {"base": "Answer the customer: {input}", "head": "Answer the customer kindly: {input}"}
#: The model name the tools ask for (the fake answers any).
MODEL = "bench-model"
#: The environment variable holding the (fake) API key.
KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class Job:
    """What every tool runs: ``examples`` tickets at ``concurrency`` against ``api_base``."""

    api_base: str
    examples: int
    concurrency: int


def tickets(count: int) -> list[dict[str, str]]:
    """Return ``count`` tickets: ``{"id", "input", "expected"}``."""
    return [{"id": f"t{i}", "input": f"Ticket {i}: my order #{1000 + i} has not arrived yet.",
             "expected": REPLY} for i in range(count)]


def _jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def write_llmgate(folder: Path, job: Job) -> str:
    """Write the llmgate repository (base committed, head in the working tree); return the
    base commit's SHA."""
    _jsonl(folder / "evals" / "tickets.jsonl", tickets(job.examples))
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    prompt = folder / "prompts" / "answer.txt"
    prompt.write_text(PROMPTS["base"].replace("{input}", "{{ input }}"), encoding="utf-8")
    (folder / ".llmgate.yml").write_text(
        f"version: 1\nsettings: {{concurrency: {job.concurrency}, timeout: 30}}\nsuites:\n"
        "  - name: tickets\n    dataset: evals/tickets.jsonl\n"
        f"    target: {{model: openai/{MODEL}, prompt: prompts/answer.txt, "
        f'api_base: "{job.api_base}", api_key_env: {KEY_ENV}, '
        "pricing: {input: 1, output: 2}}\n"
        "    assertions: [{type: contains, value: ticket}]\n"
        "    gate: {pass_rate: {min: 0.9, max_drop: 0.05}}\n", encoding="utf-8")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run([*git, "-C", str(folder), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(folder), "commit", "-qm", "base"], check=True)
    prompt.write_text(PROMPTS["head"].replace("{input}", "{{ input }}"), encoding="utf-8")
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True)
    return done.stdout.strip()


def write_llmci(folder: Path, job: Job) -> None:
    """Write llmci's ``base.yaml`` and ``head.yaml``, their prompts and the dataset."""
    _jsonl(folder / "evals" / "tickets.jsonl",
           [{"input": t["input"], "expected": t["expected"]} for t in tickets(job.examples)])
    for side, prompt in PROMPTS.items():
        (folder / f"prompt-{side}.txt").write_text(prompt, encoding="utf-8")
        (folder / f"{side}.yaml").write_text(
            f"version: 1\ntarget:\n  provider: openai\n  model: {MODEL}\n"
            f"  prompt_file: prompt-{side}.txt\n  base_url: {job.api_base}\n"
            "evals:\n  - name: tickets\n    dataset: evals/tickets.jsonl\n"
            "    judge: exact_match\n    metrics:\n"
            "      - {name: accuracy, threshold: 0.9, mode: absolute}\n"
            "      - {name: accuracy, threshold: 0.05, mode: max_regression}\n"
            f"settings:\n  parallelism: {job.concurrency}\n  timeout_per_call: 30\n",
            encoding="utf-8")


def write_promptfoo(folder: Path, job: Job) -> None:
    """Write promptfoo's ``base.yaml`` and ``head.yaml`` and the tickets as CSV."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "tickets.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["input"])
        writer.writerows([t["input"]] for t in tickets(job.examples))
    for side, prompt in PROMPTS.items():
        (folder / f"{side}.yaml").write_text(
            f"description: tickets ({side})\n"
            f"prompts:\n  - {json.dumps(prompt.replace('{input}', '{{input}}'))}\n"
            f"providers:\n  - id: openai:chat:{MODEL}\n"
            f"    config:\n      apiBaseUrl: {job.api_base}\n"
            "tests: file://tickets.csv\n"
            "defaultTest:\n  assert:\n    - {type: contains, value: ticket}\n"
            f"evaluateOptions:\n  maxConcurrency: {job.concurrency}\n", encoding="utf-8")
