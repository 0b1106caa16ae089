"""``llmgate init``: a working ``.llmgate.yml``, a starter dataset and a CI workflow.

Every choice is a flag (for scripts); on a terminal, the choices not given are asked, each
with its default. The files written:

- ``.llmgate.yml``: one suite ``starter`` on ``evals/starter.jsonl``, gated by ``min`` and
  ``max_drop`` on ``pass_rate``; its first line (`SCHEMA_MODELINE`) points editors at the
  installed JSON Schema of the format;
- ``evals/starter.jsonl``: three examples with ``contains`` assertions;
- the target: for ``--target command`` (default) ``evals/starter_bot.py``, a stand-in that
  answers each input with itself, so ``llmgate run`` passes at once (replace its command by
  your program's); for ``--target model`` ``prompts/starter.txt`` and the model ``--model``
  with its key in ``--api-key-env``;
- the CI workflow: ``--ci github`` (default) ``.github/workflows/llmgate.yml``, which runs the
  llmgate Action (`ACTION`) at this release's tag (`TAG`), with the model's key from the
  repository secret of the same name for ``--target model``; ``--ci gitlab``
  ``.gitlab-ci.llmgate.yml`` (to ``include:``; deploy/gitlab-ci/llmgate.gitlab-ci.yml, word for
  word), which installs llmgate from its repository at a tag pinned by commit; ``--ci none``
  nothing. Neither installs llmgate by name from the package index (another project's name),
  neither keeps the response cache in the checkout, and neither lets a pull request's job read
  a cache another pull request's job wrote (docs/local-run.md, "Trust in CI").

An existing file is never overwritten without ``--force`` (exit 2, nothing written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from worker.version import VERSION

DATASET = "evals/starter.jsonl"
_EXAMPLES = [("refund", "Where is my refund?", "refund"),
             ("password", "How do I reset my password?", "password"),
             ("hours", "When are you open?", "open")]
_BOT = '''"""A stand-in target: answers each input with itself. Replace it with your program."""
import json
import sys

example = json.load(open(sys.argv[1], encoding="utf-8"))
json.dump({"output": str(example["input"])}, open(sys.argv[2], "w", encoding="utf-8"))
'''
_PROMPT = "You answer customer questions in one sentence.\n\nQuestion: {{ input }}\n"
#: The llmgate GitHub Action, as docs/local-run.md names it: OWNER is the GitHub owner of the
#: llmgate repository the workflow runs (this one's, or a fork's).
ACTION = "OWNER/llmgate/deploy/github-action"
#: The release the written workflows install, by its tag (the Action's ref).
TAG = f"v{VERSION}"
_GITHUB = """name: llmgate
on: pull_request
permissions:
  contents: read
jobs:
  gate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with: {{fetch-depth: 0}}
      - uses: actions/setup-python@v5
        with: {{python-version: "3.11"}}
      # installs llmgate from the Action's own repository at this tag, never by name from the
      # package index (the name `llmgate` there is another project's); OWNER: that repository's
      - uses: {action}@{tag}
        with: {{baseline-store: git}}
{env}"""
_GITLAB = """# llmgate in GitLab CI: `include:` this file (docs/local-run.md, "In GitLab CI").
# Who writes what a merge request's job reads (docs/local-run.md, "Trust in CI"): the cache of
# answers and base results is keyed by the target branch and saved only by that branch's own
# pipeline (llmgate-baseline); a merge request's job only restores it (policy: pull), copies it
# out of the checkout before llmgate runs, and fails if the merge request commits .llmgate-ci/.
# llmgate is installed from its repository at a release tag, pinned by the tag's commit: set
# LLMGATE_COMMIT (in the project's CI/CD variables or here) to the commit LLMGATE_TAG names
# (`git ls-remote $LLMGATE_REPOSITORY refs/tags/$LLMGATE_TAG`). Never by name from the package
# index: the name `llmgate` there is another project's (docs/install.md).
.llmgate:
  image: python:3.11
  variables:
    GIT_DEPTH: "0"
    LLMGATE_CACHE_DIR: /tmp/llmgate/cache
    LLMGATE_REPOSITORY: https://github.com/OWNER/llmgate
    LLMGATE_TAG: v0.1.0
    LLMGATE_COMMIT: ""
  before_script:
    - |
      if ! printf %s "$LLMGATE_COMMIT" | grep -Eqx '[0-9a-f]{40}'; then
        echo "llmgate: set LLMGATE_COMMIT to the commit of $LLMGATE_TAG (40 hex)" >&2; exit 3
      fi
      python3 -m pip install --quiet "git+$LLMGATE_REPOSITORY@$LLMGATE_COMMIT"
      if [ "$(llmgate --version)" != "llmgate ${LLMGATE_TAG#v}" ]; then
        echo "llmgate: $(llmgate --version) is not $LLMGATE_TAG" >&2; exit 3
      fi
    - |
      if [ -n "$(git ls-files -- .llmgate-ci)" ]; then
        echo "llmgate: .llmgate-ci/ is committed; only the CI cache may fill it" >&2; exit 3
      fi
    - mkdir -p .llmgate-ci /tmp/llmgate && cp -R .llmgate-ci/. /tmp/llmgate/
llmgate:
  extends: .llmgate
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
  cache:
    key: llmgate-$CI_MERGE_REQUEST_TARGET_BRANCH_NAME
    paths: [.llmgate-ci/]
    policy: pull          # never saved: no merge request's job writes what another reads
    unprotect: true       # the default branch's cache, though merge requests are unprotected
  script:
    - git fetch origin "$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
    - llmgate run --base "origin/$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
      --baseline-store /tmp/llmgate/baselines
llmgate-baseline:
  extends: .llmgate
  rules:
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
  cache:
    key: llmgate-$CI_COMMIT_BRANCH
    paths: [.llmgate-ci/]
    policy: pull-push
    unprotect: true
  script:
    - llmgate baseline push --baseline-store /tmp/llmgate/baselines --branch "$CI_COMMIT_BRANCH"
    - cp -R /tmp/llmgate/. .llmgate-ci/
"""
#: The first line of the written ``.llmgate.yml``: editors with the YAML language server
#: (VS Code's YAML extension, Neovim, JetBrains) check and complete the file against the JSON
#: Schema of the installed llmgate (worker/evals/config/llmgate.schema.json; docs/configuration.md,
#: "Editor support: the JSON Schema").
#: The shipped schema (`worker.evals.config.load.CONFIG_SCHEMA`), found without importing the
#: loader: ``llmgate --help`` imports this module and must stay free of the engine.
_SCHEMA = Path(__file__).resolve().parents[1] / "evals" / "config" / "llmgate.schema.json"
SCHEMA_MODELINE = f"# yaml-language-server: $schema={_SCHEMA.as_uri()}"
_CI_FILES = {"github": ".github/workflows/llmgate.yml", "gitlab": ".gitlab-ci.llmgate.yml"}


def _github(args: argparse.Namespace) -> str:
    """The GitHub workflow: the Action at `TAG`, with the model's key from the repository's
    secret of the same name for ``--target model``."""
    env = ""
    if args.target == "model":
        key = args.api_key_env
        env = f"        env: {{{key}: \"${{{{ secrets.{key} }}}}\"}}\n"
    return _GITHUB.format(action=ACTION, tag=TAG, env=env)


def add_init_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``llmgate init``."""
    init = sub.add_parser("init", help="write a working .llmgate.yml, a dataset and CI",
                          description="Write .llmgate.yml, a starter dataset, a starter target "
                                      "and a CI workflow in the current folder. On a terminal "
                                      "the options not given are asked. Exit 0 written, 2 a "
                                      "file exists (use --force) or an option is wrong.")
    init.add_argument("--target", choices=("command", "model"), default=None,
                      help="what answers the examples (default: command)")
    init.add_argument("--model", default=None,
                      help="the model of a model target (default: openai/gpt-4o-mini)")
    init.add_argument("--api-key-env", default=None,
                      help="the variable holding its key (default: OPENAI_API_KEY)")
    init.add_argument("--ci", choices=("github", "gitlab", "none"), default=None,
                      help="the CI workflow to write (default: github)")
    init.add_argument("--force", action="store_true", help="overwrite existing files")
    init.set_defaults(func=cmd_init)


def _ask(args: argparse.Namespace, ask: Callable[[str], str] | None) -> None:
    """Fill the options not given: asked when ``ask`` is given, else the defaults."""
    defaults = {"target": "command", "ci": "github", "model": "openai/gpt-4o-mini",
                "api_key_env": "OPENAI_API_KEY"}
    for name, default in defaults.items():
        if getattr(args, name) is None:
            if name in ("model", "api_key_env") and args.target != "model":
                setattr(args, name, default)
                continue
            answer = ask(f"{name.replace('_', ' ')} [{default}]: ").strip() if ask else ""
            setattr(args, name, answer or default)


def files_for(args: argparse.Namespace) -> dict[str, str]:
    """Return path -> text of every file ``llmgate init`` writes for ``args`` (pure)."""
    rows = [{"id": i, "input": q, "assert": [{"type": "contains", "value": w}]}
            for i, q, w in _EXAMPLES]
    files = {DATASET: "".join(json.dumps(r) + "\n" for r in rows)}
    if args.target == "model":
        target = (f"{{model: {json.dumps(args.model)}, api_key_env: {args.api_key_env}, "
                  "prompt: prompts/starter.txt}")
        files["prompts/starter.txt"] = _PROMPT
    else:
        target = '{command: "python3 evals/starter_bot.py {input_file} {output_file}"}'
        files["evals/starter_bot.py"] = _BOT
    files[".llmgate.yml"] = f"""{SCHEMA_MODELINE}
version: 1
suites:
  - name: starter
    dataset: {DATASET}
    target: {target}
    gate:
      pass_rate:
        min: 0.8        # head must pass at least 80% of the examples
        max_drop: 0.05  # and fall at most 5 points below base
"""
    if args.ci in _CI_FILES:
        files[_CI_FILES[args.ci]] = _github(args) if args.ci == "github" else _GITLAB
    return files


def cmd_init(args: argparse.Namespace) -> int:
    """Write the starter files in the current folder (module docstring); exit 0 or 2.

    The CI file goes to the root of the git repository holding the current folder (GitHub reads
    workflows, and GitLab ``include:`` paths, from the root only), the rest to the current
    folder (a config in a folder is gated through the root, docs/configuration.md). What to do
    next is printed: run it, commit, and the CI's own settings (secrets, variables).
    """
    if args.ci not in (None, *_CI_FILES, "none") or args.target not in (None, "command",
                                                                         "model"):
        print("llmgate: init: unknown --ci or --target", file=sys.stderr)
        return 2
    _ask(args, input if sys.stdin.isatty() else None)
    here = Path.cwd()
    root = _repository_root(here) or here
    targets = {path: (root if path in _CI_FILES.values() else here) / path
               for path in files_for(args)}
    existing = [_shown(target, here) for target in targets.values() if target.exists()]
    if existing and not args.force:
        print(f"llmgate: init: {', '.join(existing)} already exist; nothing written "
              "(--force overwrites)", file=sys.stderr)
        return 2
    for path, text in files_for(args).items():
        target = targets[path]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        where = "" if target.parent == here or here in target.parents else \
            " (at the repository's root: CI reads it only there)"
        print(f"llmgate: wrote {_shown(target, here)}{where}")
    for line in next_steps(args):
        print(f"llmgate: next: {line}")
    return 0


def next_steps(args: argparse.Namespace) -> list[str]:
    """What to do after ``llmgate init`` for ``args``, one line each (pure)."""
    key = args.api_key_env if args.target == "model" else None
    steps = ["`llmgate run` (then commit the files)"]
    if args.ci == "github":
        steps.append(f"in .github/workflows/llmgate.yml, OWNER is the GitHub owner of the "
                     f"llmgate repository to install from (the Action at {TAG})")
        if key:
            steps.append(f"add the repository secret {key} (Settings > Secrets and variables "
                         "> Actions): the workflow passes it to the model calls")
    elif args.ci == "gitlab":
        steps.append("include the job from your .gitlab-ci.yml: `include: [{local: "
                     f"{_CI_FILES['gitlab']}}}]`")
        steps.append("set LLMGATE_COMMIT (the commit of LLMGATE_TAG, 40 hex) and OWNER in "
                     "LLMGATE_REPOSITORY, in the file or as CI/CD variables")
        if key:
            steps.append(f"add the masked CI/CD variable {key} (Settings > CI/CD > Variables)")
    return steps


def _repository_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``.git`` (a folder, or a worktree's
    file), or None outside a repository."""
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), None)


def _shown(target: Path, here: Path) -> str:
    """``target`` relative to ``here`` (``../../x`` above it), as the user will type it."""
    return os.path.relpath(target, here)
