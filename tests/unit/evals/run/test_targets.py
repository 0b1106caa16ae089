"""Tests of `worker.evals.run.targets` with real subprocesses (small python3 scripts)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
import time
from pathlib import Path

import pytest

from worker.evals.run.targets import MAX_OUTPUT_BYTES, run_command
from worker.evals.types import CommandTarget, Example, Settings, TargetOutput
from worker.security.process import MAX_LOG_BYTES

EXAMPLE = Example("ex-1", 3, {"question": "refund?"}, "SECRET-EXPECTED", {"lang": "en"})


def script(repo: Path, body: str) -> CommandTarget:
    """Write ``body`` as repo/target.py; return a target running it with the placeholders."""
    header = "import json, os, sys\ninp, out = sys.argv[1], sys.argv[2]\n"
    (repo / "target.py").write_text(header + textwrap.dedent(body))
    python = shlex.quote(sys.executable)
    return CommandTarget(f"{python} target.py {{input_file}} {{output_file}}")


async def run(
    repo: Path, body: str, timeout_s: float = 60.0, env: tuple[str, ...] = ()
) -> TargetOutput:
    target = script(repo, body)
    return await run_command(target, EXAMPLE, repo, Settings(timeout_s, 4, env))


#: Target code: start a sleeping child that writes its host PID to ``child.pid`` and wait for
#: it. /proc is the host's, so ``/proc/self`` names a process by its host PID even inside the
#: target's PID namespace (worker/security/pidns.py), where ``os.getpid()`` and ``Popen.pid``
#: are the namespace's.
SLEEPING_CHILD = """
import subprocess, time
subprocess.Popen([sys.executable, "-c", "import os, time; "
                  "open('child.tmp', 'w').write(os.readlink('/proc/self')); "
                  "os.replace('child.tmp', 'child.pid'); time.sleep(60)"],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not os.path.exists("child.pid"):
    time.sleep(0.01)
"""


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone, or exiting while it is read
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_success_reads_output_usage_and_cost(tmp_path: Path) -> None:
    out = await run(tmp_path, """
        doc = json.load(open(inp))
        json.dump({"output": {"seen": doc, "cwd": os.getcwd(), "inp": inp},
                   "usage": {"input": 12, "output": 3}, "cost": 0.0004}, open(out, "w"))
    """)
    assert out.error is None
    output = out.output
    assert output["seen"] == {"id": "ex-1", "input": {"question": "refund?"},
                              "vars": {"lang": "en"}}
    assert output["cwd"] == str(tmp_path)
    input_dir = Path(output["inp"]).parent
    assert not input_dir.is_relative_to(tmp_path)
    assert not input_dir.exists(), "the temporary directory is removed"
    assert out.usage == {"input": 12, "output": 3}
    assert out.cost_usd == pytest.approx(0.0004)
    assert out.latency_ms > 0


async def test_input_file_never_holds_expected(tmp_path: Path) -> None:
    out = await run(tmp_path, """
        json.dump({"output": open(inp).read()}, open(out, "w"))
    """)
    assert "SECRET-EXPECTED" not in out.output
    assert "expected" not in json.loads(out.output)


async def test_crash_reports_status_and_stderr_tail(tmp_path: Path) -> None:
    out = await run(tmp_path, """
        sys.stderr.write("x" * 100000 + "\\nboom: model unreachable\\n")
        sys.exit(3)
    """)
    assert out.output is None
    error = out.error or ""
    assert error.startswith("the command exited with status 3; last output:")
    assert error.endswith("boom: model unreachable")
    assert len(error) < MAX_LOG_BYTES + 100


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    started = time.monotonic()
    out = await run(tmp_path, textwrap.indent(SLEEPING_CHILD, " " * 8) + """
        open("pids.txt", "w").write(f"{os.readlink('/proc/self')} {open('child.pid').read()}")
        time.sleep(60)
    """, timeout_s=1.0)
    assert time.monotonic() - started < 5
    assert out.output is None
    assert out.error == "timed out after 1 s (its processes were killed)"
    pids = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
    deadline = time.monotonic() + 3
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(pid_alive(pid) for pid in pids)


async def test_children_left_behind_after_exit_are_killed(tmp_path: Path) -> None:
    out = await run(tmp_path, textwrap.indent(SLEEPING_CHILD, " " * 8) + """
        json.dump({"output": int(open("child.pid").read())}, open(out, "w"))
    """)
    deadline = time.monotonic() + 3
    while pid_alive(out.output) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(out.output)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("pass\n", "the command wrote no output file"),
        ("open(out, 'w').write('{not json')\n", "not valid UTF-8 JSON"),
        ("open(out, 'wb').write(b'\\xff\\xfe')\n", "not valid UTF-8 JSON"),
        ("json.dump([1], open(out, 'w'))\n", 'JSON object with an "output" key'),
        ("json.dump({'result': 1}, open(out, 'w'))\n", 'JSON object with an "output" key'),
        ("json.dump({'output': 1, 'usage': {'input': -1}}, open(out, 'w'))\n", '"usage" must be'),
        ("json.dump({'output': 1, 'usage': {'prompt': 1}}, open(out, 'w'))\n", '"usage" must be'),
        ("json.dump({'output': 1, 'cost': '1'}, open(out, 'w'))\n", '"cost" must be'),
        ("json.dump({'output': 1, 'cost': -0.1}, open(out, 'w'))\n", '"cost" must be'),
        ("os.mkfifo(out)\n", "not a regular file"),
        ("os.symlink('/etc/hostname', out)\n", "cannot open the output file"),
        (f"open(out, 'w').write('\"' + 'a' * {MAX_OUTPUT_BYTES} + '\"')\n", "larger than"),
    ],
)
async def test_bad_output_files_are_errors(tmp_path: Path, body: str, words: str) -> None:
    out = await run(tmp_path, body)
    assert out.output is None
    assert words in (out.error or "")


async def test_json_null_output_is_a_value_not_an_error(tmp_path: Path) -> None:
    out = await run(tmp_path, "json.dump({'output': None}, open(out, 'w'))\n")
    assert (out.output, out.error, out.usage) == (None, None, {})


async def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", "-----BEGIN")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("UNLISTED_SECRET", "nope")
    monkeypatch.setenv("MY_API_KEY", "sk-allowed")
    out = await run(tmp_path, "json.dump({'output': dict(os.environ)}, open(out, 'w'))\n",
                    env=("MY_API_KEY", "GITHUB_TOKEN", "REDIS_URL", "NOT_SET_ANYWHERE"))
    env = out.output
    assert env["MY_API_KEY"] == "sk-allowed"
    for name in ("GITHUB_TOKEN", "GITHUB_APP_PRIVATE_KEY", "REDIS_URL", "UNLISTED_SECRET",
                 "NOT_SET_ANYWHERE"):
        assert name not in env
    assert "ghs_secret" not in json.dumps(env)
    # LC_CTYPE may be added by Python's own C-locale coercion (PEP 538) in the child.
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "MY_API_KEY",
               "PYTHONDONTWRITEBYTECODE"}
    assert set(env) <= allowed
    assert env["HOME"] == env["TMPDIR"] != os.environ.get("HOME")
    assert env["PATH"] == os.environ["PATH"]


async def test_a_python_target_leaves_no_bytecode_in_the_checkout(tmp_path: Path) -> None:
    """Case from the field (fresh-clone tester): ``llmgate run`` on the working tree left
    ``__pycache__/`` in the user's repository (the target imports the repository's modules)."""
    (tmp_path / "helper.py").write_text("VALUE = 'from the checkout'\n")
    out = await run(tmp_path, "import helper\n"
                              "json.dump({'output': helper.VALUE}, open(out, 'w'))\n")
    assert out.output == "from the checkout"
    assert list(tmp_path.rglob("__pycache__")) == []


async def test_command_that_cannot_start(tmp_path: Path) -> None:
    target = CommandTarget("./no-such-program {input_file} {output_file}")
    out = await run_command(target, EXAMPLE, tmp_path, Settings())
    assert out.output is None
    assert out.error is not None and out.error.startswith("cannot start './no-such-program'")


async def test_placeholders_inside_words_and_quoted_args(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text(
        "import json, sys\n"
        "args = dict(a.split('=', 1) for a in sys.argv[1:])\n"
        "json.dump({'output': args['--label']}, open(args['--out'], 'w'))\n")
    python = shlex.quote(sys.executable)
    target = CommandTarget(f"{python} t.py --in={{input_file}} --out={{output_file}} "
                           "'--label=two words; rm -rf /'")
    out = await run_command(target, EXAMPLE, tmp_path, Settings())
    assert (out.output, out.error) == ("two words; rm -rf /", None)
