"""A gated repository with many pull request heads, written in one ``git fast-import``.

``main`` holds ``.llmgate.yml``, the echo target ``target.py`` and a three-example dataset
(every example passes). Each head ``(pr, push)`` is a commit on branch ``pr/<pr>-<push>`` whose
parent is ``main``: it changes ``NOTES.md`` (so every head is its own commit) and, when asked,
makes the target sleep before it answers, so a test can have jobs surely running or queued.
Heads of a model-target repository (`model_config`) change the prompt instead, so every head
asks the fake provider new questions (response-cache writes).

Hundreds of heads take well under a second (one fast-import), where a ``git commit`` per head
takes seconds.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.unit.worker_support import git

EXAMPLES = ("alpha", "bravo", "charlie")
TARGET = """import json, sys, time
SLEEP_S = {sleep_s}
example = json.load(open(sys.argv[1]))
time.sleep(SLEEP_S)
json.dump({{"output": example["input"]}}, open(sys.argv[2], "w"))
"""
CONFIG = """version: 1
settings:
  concurrency: 4
  timeout: {timeout_s}
suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 target.py {{input_file}} {{output_file}}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.5
"""
#: The environment variable naming the fake provider's key in the workers (model repositories).
KEY_ENV = "FAKE_LLM_KEY"


def model_config(url: str) -> str:
    """Return ``.llmgate.yml`` of a model target at the fake provider ``url`` whose replies
    only need to be non-empty (``regex .``), gated by ``pass_rate min 0.5``."""
    return f"""version: 1
settings:
  concurrency: 4
suites:
  - name: bot
    dataset: evals/echo.jsonl
    target:
      model: openai/bot-model
      prompt: prompts/bot.txt
      api_base: "{url}"
      api_key_env: {KEY_ENV}
    assertions:
      - type: regex
        pattern: "."
    gate:
      pass_rate:
        min: 0.5
"""


@dataclass(frozen=True)
class ChaosRepo:
    """The repository built by `build_chaos_repo`.

    Attributes:
        path: the working repository (its ``file://`` URI is the clone URL).
        main: main's 40-hex SHA (every head's base).
        heads: ``(pr, push)`` -> the head's 40-hex SHA, pushes numbered from 1.
    """

    path: Path
    main: str
    heads: Mapping[tuple[int, int], str]

    @property
    def clone_url(self) -> str:
        """The ``file://`` URL workers fetch from."""
        return self.path.as_uri()

    def newest(self) -> dict[int, str]:
        """Each pull request's newest head: ``pr -> SHA`` of its highest push."""
        out: dict[int, tuple[int, str]] = {}
        for (pr, push), sha in self.heads.items():
            if pr not in out or push > out[pr][0]:
                out[pr] = (push, sha)
        return {pr: sha for pr, (_, sha) in sorted(out.items())}


def _blob(text: str) -> bytes:
    data = text.encode()
    return b"data %d\n%s\n" % (len(data), data)


def _commit(ref: str, mark: int, message: str, files: Mapping[str, str],
            parent: int | None) -> bytes:
    out = [f"commit {ref}\nmark :{mark}\n".encode(),
           b"author T <t@example.invalid> 1700000000 +0000\n",
           b"committer T <t@example.invalid> 1700000000 +0000\n", _blob(message)]
    if parent is not None:
        out.append(f"from :{parent}\n".encode())
    for name, text in files.items():
        out.append(f"M 100644 inline {name}\n".encode() + _blob(text))
    return b"".join(out)


def build_chaos_repo(dest: Path, prs: int, pushes: int = 1, *, sleep_s: float = 0,
                     timeout_s: int = 60, config: str | None = None) -> ChaosRepo:
    """Create the repository at ``dest`` with ``prs`` pull requests of ``pushes`` heads each.

    Args:
        sleep_s: seconds the heads' target sleeps per example (main's never sleeps).
        timeout_s: the config's per-example ``timeout``, seconds.
        config: another ``.llmgate.yml`` (e.g. `model_config`); then heads change
            ``prompts/bot.txt`` instead of the target.
    """
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n" for w in EXAMPLES)
    main = {".llmgate.yml": config or CONFIG.format(timeout_s=timeout_s),
            "target.py": TARGET.format(sleep_s=0), "evals/echo.jsonl": dataset,
            "prompts/bot.txt": "Answer: {{ input }}"}
    stream = [_commit("refs/heads/main", 1, "main", main, None)]
    mark = 1
    for pr in range(1, prs + 1):
        for push in range(1, pushes + 1):
            mark += 1
            files = {"NOTES.md": f"pull request {pr}, push {push}\n"}
            if config is not None:
                files["prompts/bot.txt"] = f"PR {pr} push {push}. Answer: {{{{ input }}}}"
            elif sleep_s:
                files["target.py"] = TARGET.format(sleep_s=sleep_s)
            stream.append(_commit(f"refs/heads/pr/{pr}-{push}", mark, f"pr {pr} push {push}",
                                  files, 1))
    subprocess.run(["git", "-C", str(dest), "fast-import", "--quiet"], input=b"".join(stream),
                   check=True, capture_output=True)
    git(dest, "checkout", "-q", "main")
    refs = dict(line.split() for line in git(
        dest, "for-each-ref", "--format=%(refname:short) %(objectname)").splitlines())
    heads = {(pr, push): refs[f"pr/{pr}-{push}"]
             for pr in range(1, prs + 1) for push in range(1, pushes + 1)}
    return ChaosRepo(dest, refs["main"], heads)
