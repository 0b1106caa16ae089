"""``on_paths`` globs, the suites a change needs, and the config keys (pure)."""

from __future__ import annotations

import pytest

from tests.unit.baseline_support import config
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.pipeline.on_paths import matches, select_suites

TWO_SUITES = """version: 1
settings:
  on_paths_conclusion: skipped
  base: tip
suites:
  - name: support
    dataset: evals/support.jsonl
    on_paths: ["prompts/**", "!prompts/README.md", "bot.py"]
    target:
      command: python3 bot.py {input_file} {output_file}
  - name: always
    dataset: evals/always.jsonl
    target:
      command: python3 other.py {input_file} {output_file}
"""


@pytest.mark.parametrize(("patterns", "path", "expected"), [
    (["prompts/**"], "prompts/support.txt", True),
    (["prompts/**"], "prompts/a/b/c.j2", True),
    (["prompts/**"], "prompts", False),
    (["prompts/**"], "prompts2/x.txt", False),
    (["*.py"], "bot.py", True),
    (["*.py"], "src/bot.py", False),
    (["**/*.py"], "src/deep/bot.py", True),
    (["**/*.py"], "bot.py", True),
    (["src/**/test_*.py"], "src/test_a.py", True),
    (["src/**/test_*.py"], "src/x/y/test_a.py", True),
    (["evals/?.jsonl"], "evals/a.jsonl", True),
    (["evals/?.jsonl"], "evals/ab.jsonl", False),
    (["evals/[ab].jsonl"], "evals/b.jsonl", True),
    (["evals/[!ab].jsonl"], "evals/b.jsonl", False),
    (["evals/[!ab].jsonl"], "evals/c.jsonl", True),
    (["prompts/**", "!prompts/README.md"], "prompts/README.md", False),
    (["prompts/**", "!prompts/README.md", "prompts/README.md"], "prompts/README.md", True),
    (["a.b"], "axb", False),
    ([], "anything", False),
])
def test_globs(patterns: list[str], path: str, expected: bool) -> None:
    assert matches(patterns, path) is expected


def test_the_keys_parse_and_default() -> None:
    parsed = parse_config(TWO_SUITES)
    assert parsed.suites[0].on_paths == ("prompts/**", "!prompts/README.md", "bot.py")
    assert parsed.suites[1].on_paths == ()
    assert (parsed.settings.base, parsed.settings.on_paths_conclusion) == ("tip", "skipped")
    plain = parse_config(config())
    assert (plain.settings.base, plain.settings.on_paths_conclusion) == ("merge_base", "success")


@pytest.mark.parametrize(("text", "line", "message"), [
    (config("  base: newest\n"), 4, "`base` must be one of merge_base, tip, got 'newest'"),
    (config("  on_paths_conclusion: neutral\n"), 4,
     "`on_paths_conclusion` must be one of success, skipped, got 'neutral'"),
    (config(on_paths="    on_paths: prompts/**\n"), 7,
     "`on_paths` must be a list of path globs"),
    (config(on_paths="    on_paths: []\n"), 7, "`on_paths` is empty"),
    (config(on_paths="    on_paths:\n      - ok/**\n      - 3\n"), 9,
     "`on_paths` entries must be non-empty strings, got 3"),
    (config(on_paths="    on_paths:\n      - /etc/**\n"), 8,
     "a glob must be a non-empty path relative to the root"),
    (config(on_paths="    on_paths:\n      - 'a\\\\b'\n"), 8, "use / in globs"),
    (config(on_paths="    on_paths:\n      - 'evals/[ab.jsonl'\n"), 8, "unclosed '['"),
])
def test_bad_values_name_their_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert caught.value.line == line
    assert message in caught.value.message


def test_base_globs_decide_and_named_files_always_run() -> None:
    base = parse_config(TWO_SUITES)
    head_without_globs = parse_config(TWO_SUITES.replace(
        '    on_paths: ["prompts/**", "!prompts/README.md", "bot.py"]\n', ""))
    cases = {
        ("README.md",): ("always",),
        ("prompts/README.md",): ("always",),
        ("prompts/support.txt",): ("support", "always"),
        ("bot.py",): ("support", "always"),  # on the command line and in the globs
        ("evals/support.jsonl",): ("support", "always"),  # the suite's own dataset
        (".llmgate.yml",): ("support", "always"),  # the config changed: every suite runs
        (): ("always",),
    }
    for changed, expected in cases.items():
        assert select_suites(head_without_globs, base, list(changed)).run == expected, changed
    selection = select_suites(base, base, ["README.md", "docs/a.md", "docs/b.md", "docs/c.md"])
    assert selection.skipped == {"support": (
        "suite support skipped: none of the 4 changed files (README.md, docs/a.md, docs/b.md "
        "and 1 more) matches its on_paths (prompts/**, !prompts/README.md, bot.py)")}
    one = select_suites(base, base, ["README.md"]).skipped["support"]
    assert one.startswith("suite support skipped: the changed file (README.md) matches none of")


def test_head_globs_are_ignored_and_new_suites_run() -> None:
    head = parse_config(TWO_SUITES)
    base_without_globs = parse_config(TWO_SUITES.replace(
        '    on_paths: ["prompts/**", "!prompts/README.md", "bot.py"]\n', ""))
    assert select_suites(head, base_without_globs, ["README.md"]).run == ("support", "always")
    assert select_suites(head, None, ["README.md"]).run == ("support", "always")
    renamed = parse_config(TWO_SUITES.replace("name: support", "name: fresh"))
    assert select_suites(renamed, head, ["README.md"]).run == ("fresh", "always")


def test_a_module_a_command_target_may_import_first_runs_the_suite() -> None:
    """Issue 30, found by a tester: a new ``json.py`` at the root shadowed the standard library
    of the Python target; ``on_paths`` named only its folders, every suite was skipped and the
    App concluded ``success``. Any code file anywhere now runs a command target's suite; other
    files stay with ``on_paths``. Model targets load no code: their suites stay skipped."""
    base = parse_config(TWO_SUITES.replace("python3 bot.py", "python3 -m bot.main"))
    for path in ("json.py", "json/__init__.py", "re.so", "lib/sitecustomize.py", "x/y.pth",
                 "node_modules/left-pad/index.js", "tools/node_modules/a/b.js", "docs/json.py",
                 "deep/a/b/c.mjs", "web/package.json", "lib/usercustomize.pyc",
                 "vendor/node_modules/a/LICENSE"):
        assert select_suites(base, base, [path]).run == ("support", "always"), path
    for path in ("README.md", "json/README.md", "prompts/README.md", "data/fixture.json",
                 "docs/a.md", "tsconfig.json"):
        assert select_suites(base, base, [path]).run == ("always",), path
    scripted = parse_config(TWO_SUITES.replace("python3 bot.py", "python3 evals/route.py"))
    assert select_suites(scripted, scripted, ["evals/json.py"]).run == ("support", "always")
    assert select_suites(scripted, scripted, ["evals/notes.md"]).run == ("always",)
    model = parse_config(TWO_SUITES.replace(
        "    target:\n      command: python3 bot.py {input_file} {output_file}\n",
        "    target: {model: openai/gpt-4o-mini, prompt: prompts/p.txt}\n"))
    assert select_suites(model, model, ["json.py"]).run == ("always",)


@pytest.mark.parametrize(("command", "path"), [
    # the tester's five misses of the earlier rule (root or beside a script, one level deep)
    ("python3 -m app", "__pycache__/app.cpython-311.pyc"),  # bytecode of an unchanged app.py
    ("python3 -m bot.main", "json/__init__.abi3.so"),
    ("python -m src.app.main", "src/__init__.abi3.so"),
    ("env PYTHONPATH=src python3 -m app", "src/json.py"),
    ("cd svc && python3 main.py", "svc/json.py"),
])
def test_code_anywhere_runs_a_command_target(command: str, path: str) -> None:
    suites = parse_config(TWO_SUITES.replace("python3 bot.py", command))
    assert select_suites(suites, suites, [path]).run == ("support", "always")


def test_only_a_negated_glob_of_base_leaves_code_out() -> None:
    """A monorepo: the last matching glob of base's ``on_paths`` being a ``!`` glob is the
    owner's statement that those files cannot change the suite, code included."""
    base = parse_config(TWO_SUITES.replace(
        '["prompts/**", "!prompts/README.md", "bot.py"]',
        '["services/bot/**", "!services/other/**", "services/other/shared/**"]').replace(
        "python3 bot.py", "cd services/bot && python3 main.py"))
    cases = {
        "services/other/json.py": ("always",),
        "services/other/__pycache__/json.cpython-311.pyc": ("always",),
        "services/other/node_modules/a/index.js": ("always",),
        "services/other/README.md": ("always",),
        "services/other/shared/json.py": ("support", "always"),  # a later glob selects it
        "services/bot2/json.py": ("support", "always"),  # matched by no glob: code runs
        "lib/json.py": ("support", "always"),
        "services/bot/notes.md": ("support", "always"),
        "docs/index.md": ("always",),
    }
    for path, expected in cases.items():
        assert select_suites(base, base, [path]).run == expected, path
