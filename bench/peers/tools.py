"""The tools compared, how each is installed, and the commands of each kind of run.

- **llmgate**: the ``llmgate`` console script beside the running Python (its venv), response
  cache in the bench's redis-server (``REDIS_URL``), flushed for a cold run.
- **llmci** (PyPI, `LLMCI_VERSION`): its own venv ``bench/.peers/llmci-venv``; its response
  cache is ``.llmci/`` in its folder, removed for a cold run. litellm is told to read its
  bundled price table instead of fetching one (``LITELLM_LOCAL_MODEL_COST_MAP``), as llmgate
  does for itself: this machine reaches no network.
- **promptfoo** (npm, `PROMPTFOO_VERSION`, the newest that supports this machine's Node 20):
  ``bench/.peers/promptfoo``; ``openai:chat:<model>`` with ``apiBaseUrl`` pointing at the
  fake; telemetry, the update check and sharing off by its documented variables, and its
  per-run debug and error log files off (with them on, 0.121.20 crashed at exit after most
  runs here: a winston "write after end"). Its cache and config folders are in its folder.

Every command gets a small environment (`PASS_THROUGH` plus its own), a private ``HOME`` and
no GitHub variables, so none of them can post anywhere or read the user's settings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.peers.jobs import KEY_ENV

#: Where the peers are installed (git-ignored).
PEERS_DIR = Path(__file__).resolve().parents[1] / ".peers"
LLMCI_VERSION = "0.4.1"
PROMPTFOO_VERSION = "0.121.20"
#: Variables of the bench's environment every command sees as they are.
PASS_THROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: The fake provider accepts any key.
FAKE_KEY = "bench-key"


@dataclass(frozen=True)
class Invocation:
    """One command of a run: ``argv`` in ``cwd`` with exactly ``env``."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]


@dataclass
class Tool:
    """One tool under test: its commands for a cold (and warm) run and for a gate.

    Attributes:
        name: how the table names it.
        version: its version, or why it is not there.
        folder: its job's folder (see bench/peers/jobs.py).
        cold: the command of one side (200 calls cold, none warm).
        gate: the commands of a base + head gate, run one after the other.
        clear: empties its response cache (and a peer's stored baselines).
    """

    name: str
    version: str
    folder: Path
    cold: Invocation
    gate: tuple[Invocation, ...]
    clear: Callable[[], None] = field(repr=False)


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """Return the environment of a command: `PASS_THROUGH`, ``HOME`` and ``extra``."""
    env = {name: os.environ[name] for name in PASS_THROUGH if name in os.environ}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home), "LANG": env.get("LANG", "C.UTF-8"), **extra}


def llmgate_bin() -> Path:
    """Return the ``llmgate`` console script of the running venv (or the one on PATH).

    Raises:
        SystemExit: llmgate is not installed.
    """
    beside = Path(sys.executable).parent / "llmgate"
    found = str(beside) if beside.exists() else shutil.which("llmgate")
    if found is None:
        raise SystemExit("llmgate is not installed: pip install -e '.[bench]'")
    return Path(found)


def llmci_bin() -> Path:
    """Return where llmci's console script is installed (it may be missing)."""
    return PEERS_DIR / "llmci-venv" / "bin" / "llmci"


def promptfoo_bin() -> Path:
    """Return where promptfoo's command is installed (it may be missing)."""
    return PEERS_DIR / "promptfoo" / "node_modules" / ".bin" / "promptfoo"


def version_of(argv: list[str], env: dict[str, str]) -> str:
    """Return the last line ``argv --version`` prints, or ``"not installed"``."""
    if not Path(argv[0]).exists():
        return "not installed"
    done = subprocess.run([*argv, "--version"], capture_output=True, text=True, env=env,
                          timeout=120)
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else "not installed (--version failed)"


def install_peers() -> None:
    """Install llmci (PyPI, own venv) and promptfoo (npm) under `PEERS_DIR`.

    Raises:
        subprocess.CalledProcessError: pip or npm failed.
    """
    venv = PEERS_DIR / "llmci-venv"
    if not llmci_bin().exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"llmci=={LLMCI_VERSION}"],
                       check=True)
    if not promptfoo_bin().exists():
        folder = PEERS_DIR / "promptfoo"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"private": true}\n', encoding="utf-8")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund",
                        f"promptfoo@{PROMPTFOO_VERSION}"], cwd=folder, check=True)


def llmgate_tool(folder: Path, base_sha: str, redis_url: str, flush: Callable[[], None],
                 command: Sequence[str] = (), **extra: str) -> Tool:
    """Return llmgate over its repository ``folder``; ``extra`` joins its environment.

    ``command`` is the argv that starts the CLI (default: the venv's ``llmgate`` script).
    """
    env = base_env(folder.parent / "home-llmgate", **{KEY_ENV: FAKE_KEY}, REDIS_URL=redis_url,
                   **extra)
    llmgate = tuple(command) or (str(llmgate_bin()),)
    run = Invocation((*llmgate, "run"), folder, env)
    gate = Invocation((*llmgate, "run", "--base", base_sha), folder, env)
    version = version_of(list(llmgate), env)
    name = "llmgate" + "".join(f" {k}={v}" for k, v in extra.items())
    return Tool(name, version, folder, run, (gate,), flush)


def llmci_tool(folder: Path) -> Tool:
    """Return llmci over its ``folder`` (see bench/peers/jobs.py)."""
    env = base_env(folder.parent / "home-llmci", **{KEY_ENV: FAKE_KEY},
                   LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False")
    llmci = str(llmci_bin())

    def run(config: str, *more: str) -> Invocation:
        return Invocation((llmci, "run", "--config", config, *more), folder, env)

    def clear() -> None:
        shutil.rmtree(folder / ".llmci", ignore_errors=True)

    gate = (run("base.yaml", "--update-baseline"), run("head.yaml"))
    return Tool("llmci", version_of([llmci], env), folder, run("head.yaml"), gate, clear)


def promptfoo_tool(folder: Path) -> Tool:
    """Return promptfoo over its ``folder`` (see bench/peers/jobs.py)."""
    cache = folder / ".cache"
    env = base_env(folder.parent / "home-promptfoo", **{KEY_ENV: FAKE_KEY},
                   PROMPTFOO_DISABLE_TELEMETRY="1", PROMPTFOO_DISABLE_UPDATE="1",
                   PROMPTFOO_DISABLE_SHARING="1", PROMPTFOO_DISABLE_DEBUG_LOG="1",
                   PROMPTFOO_DISABLE_ERROR_LOG="1", PROMPTFOO_CONFIG_DIR=str(folder / ".config"),
                   PROMPTFOO_CACHE_PATH=str(cache))
    promptfoo = str(promptfoo_bin())

    def run(config: str) -> Invocation:
        return Invocation((promptfoo, "eval", "--config", config), folder, env)

    def clear() -> None:
        shutil.rmtree(cache, ignore_errors=True)

    gate = (run("base.yaml"), run("head.yaml"))
    return Tool("promptfoo", version_of([promptfoo], env), folder, run("head.yaml"), gate,
                clear)
