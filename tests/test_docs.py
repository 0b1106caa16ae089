"""The manual: README.md is the doorway and docs/ the pages (a mkdocs site).

Every relative link and heading anchor of the markdown files resolves, as GitHub renders them;
the site builds with ``mkdocs build --strict``; and the README's walkthrough does what it says,
run on a real git repository by ``llmgate run`` (its main, with real target processes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from worker.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
#: Every markdown file whose links are checked.
DOCS = [README, ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md", ROOT / "worker" / "README.md",
        ROOT / "deploy" / "README.md", *PAGES]
#: The two commands on a fresh machine, kept verbatim (the CEO's and CI's entry points).
TWO_COMMANDS = (
    "apt-get install -y redis-server git && python3 -m venv .venv && . .venv/bin/activate && "
    "pip install -e '.[test]' && llmgate demo",
    "apt-get install -y redis-server git && python3 -m venv .venv && . .venv/bin/activate && "
    "pip install -e '.[test]' && pytest",
)
MD = MarkdownIt("commonmark").enable("table")


def github_slug(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-`` (the rendered text: code spans without their backticks)."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _text(inline: Token) -> str:
    return "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))


def anchors(path: Path) -> set[str]:
    """The heading anchors of a markdown file (a repeated heading gets ``-1``, ``-2`` ...)."""
    tokens = MD.parse(path.read_text())
    seen: dict[str, int] = {}
    found = set()
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type == "heading_open":
            base = github_slug(_text(inline))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """Every link and image target of a markdown file."""
    out = []
    for token in MD.parse(path.read_text()):
        for child in token.children or []:
            target = child.attrs.get("href") if child.type == "link_open" else \
                child.attrs.get("src") if child.type == "image" else None
            if isinstance(target, str):
                out.append(target)
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file or anchor does not exist."""
    broken = []
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{name}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{name}: {target} (no such heading)")
    return broken


def test_every_relative_link_and_anchor_resolves() -> None:
    assert len(PAGES) >= 10
    assert [b for path in DOCS for b in broken_links(path)] == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A `code` heading: yes\n")
    page.write_text("# Page\n\n[ok](other.md#a-code-heading-yes) [self](#page) "
                    "[gone](missing.md) [bad](other.md#nope) [web](https://example.com/x)\n")
    found = broken_links(page)
    assert [f.split(": ", 1)[1] for f in found] == ["missing.md (no such file)",
                                                    "other.md#nope (no such heading)"]


def test_readme_is_the_doorway() -> None:
    text = README.read_text()
    assert text.count("\n") <= 200
    for command in TWO_COMMANDS:
        assert f"```sh\n{command}\n```" in text
    for page in PAGES:
        if page.name != "index.md":
            assert f"(docs/{page.name})" in text, f"README.md does not point at {page.name}"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    result = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "statistics" / "index.html").is_file()


def _files(title: str) -> list[str]:
    """The contents of the README's code blocks titled ``title``, in order."""
    return [t.content for t in MD.parse(README.read_text())
            if t.type == "fence" and f'title="{title}"' in t.info]


def _gate(repo: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict]:
    """``llmgate run --base main`` in ``repo`` (the command's own main, in this process)."""
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--format", "json", "--output", str(out)])
    return code, json.loads(out.read_text())


def _commit(repo: Path, message: str) -> None:
    for cmd in (["git", "add", "-A"], ["git", "-c", "user.name=t", "-c", "user.email=t@t",
                                       "commit", "-q", "-m", message]):
        subprocess.run(cmd, cwd=repo, check=True)


@pytest.mark.slow
def test_the_walkthrough_gates_as_the_readme_says(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    keywords = _files("prompts/keywords.txt")
    assert len(keywords) == 3  # main, the pull request, the fix
    for title in ("bot.py", "evals/route.py", "evals/tickets.jsonl", ".llmgate.yml"):
        [content] = _files(title)
        (repo / title).parent.mkdir(parents=True, exist_ok=True)
        (repo / title).write_text(content)
    (repo / "prompts").mkdir()
    (repo / "prompts" / "keywords.txt").write_text(keywords[0])
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    _commit(repo, "Gate ticket routing")
    code, report = _gate(repo, tmp_path / "main.json", monkeypatch)  # step 4
    assert (code, report["conclusion"]) == (0, "success")
    text = README.read_text()
    assert "exits 0: pass_rate 1.000 at both" in text

    subprocess.run(["git", "switch", "-q", "-c", "orders"], cwd=repo, check=True)
    (repo / "prompts" / "keywords.txt").write_text(keywords[1])  # step 6
    _commit(repo, "Route order questions to shipping")
    code, report = _gate(repo, tmp_path / "pr.json", monkeypatch)
    assert (code, report["conclusion"]) == (1, "failure")
    [rule] = [o for o in report["outcomes"] if o["status"] == "fail"]
    assert (rule["metric"], rule["base"], rule["head"]) == ("pass_rate", 1.0, 0.875)
    assert [(r["example_id"], r["dataset"], r["line"], r["reason"]) for r in
            report["regressions"]] == [("t1", "evals/tickets.jsonl", 1,
                                        'equals: expected "billing", got "shipping"')]
    assert "pass_rate 0.875 at head against 1.000 at base" in text
    assert 'one annotation, on line 1 of `evals/tickets.jsonl`' in text

    (repo / "prompts" / "keywords.txt").write_text(keywords[2])  # step 7
    _commit(repo, "Put the new keyword last")
    code, report = _gate(repo, tmp_path / "fix.json", monkeypatch)
    assert (code, report["conclusion"], report["regressions"]) == (0, "success", [])
