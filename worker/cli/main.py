"""The ``llmgate`` command line: ``run`` (gate locally), ``serve``, ``worker``, ``demo``,
``setup`` (register the GitHub App), ``healthcheck`` (the container's health check) and
``calibrate`` (A/A runs: the gate's false-alarm rate and unstable examples), ``power``
(examples needed to detect a drop), ``redteam`` (an adversarial dataset) and ``judge calibrate``
(judges against human labels).

The engine, numpy and scipy are imported only by the commands that run them, so ``--help`` and
the container's ``healthcheck`` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import posixpath
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from worker.cli.action import add_action_command
from worker.cli.baseline import add_baseline_command, add_store_option
from worker.cli.calibrate import add_calibrate_command
from worker.cli.dataset import add_dataset_command
from worker.cli.formats import FORMATS, format_paths, format_refusal, parse_format, write_reports
from worker.cli.healthcheck import add_healthcheck_command
from worker.cli.history import add_history_command
from worker.cli.init import add_init_command
from worker.cli.judge import add_judge_command
from worker.cli.migrate import add_migrate_command
from worker.cli.named_args import add_named_arguments, named_refusal
from worker.cli.parsing import Parser, add_output_levels, apply_output_level
from worker.cli.perturbations import add_perturbations_command
from worker.cli.power import add_power_command
from worker.cli.promptfoo import add_import_command
from worker.cli.redteam import add_redteam_command
from worker.cli.repository import is_repository, repo_root
from worker.cli.run_options import add_selection_options
from worker.cli.setup import add_setup_command
from worker.cli.version_text import version_text
from worker.errors import ConfigError, ExecutionError
from worker.evals.filenames import CONFIG_FILENAME
from worker.security import Redactor, secrets_from_environ

if TYPE_CHECKING:
    import asyncio
    from contextlib import AsyncExitStack

    from worker.evals.context import EvalContext, Observers
    from worker.evals.types import GateReport
    from worker.pipeline import BaseRunner, MultiReport, Plan

T = TypeVar("T")

#: What ``llmgate run --help`` says above its options.
RUN_DESCRIPTION = ("Gate locally, as the worker does, and print the report. Inside a git "
                   "repository: with --base, the base compared (--base itself; a head behind it "
                   "is merged into it first, as the App gates a pull request; --base-tip "
                   "compares the head itself) and --head if given, else the working tree, are "
                   "checked out in temporary worktrees, run and compared. Command targets "
                   "run as on the worker: in a copy of the checkout without .git and the eval "
                   "data, confined by Landlock where the kernel has it (docs/security-model.md). "
                   "With --base, suites are skipped by on_paths as on the App (the diff from "
                   "the merge base to head; --all-suites runs them all). Exit codes: 0 the gate "
                   "passed (or is neutral by the base config's choice, or there is no llmgate "
                   "config at base nor head), 1 the gate failed, 2 configuration error or a "
                   "misuse of the command line, 3 execution error (git or "
                   "the run failed), 4 undecided (over budget or time, provider errors outside "
                   "the change, base could not run, an inconclusive rule; 0 with "
                   "--allow-undecided).")
#: What ``llmgate --help`` says above the commands (plain text: argparse shows it verbatim).
DESCRIPTION = ("Gate LLM quality regressions: run the eval suites at a base and a head, compare "
               "them with paired statistics and report. `llmgate COMMAND --help` explains each "
               "command; docs/local-run.md has the exit codes.")

#: On SIGTERM the web process stops accepting connections and lets requests in flight finish
#: for up to this many seconds (GitHub itself waits 10 s for a delivery's answer).
WEB_DRAIN_S = 20
#: Exit codes of ``llmgate run``; `EXIT_UNDECIDED` is the check's ``action_required``.
EXIT_PASS, EXIT_GATE_FAILED, EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR = 0, 1, 2, 3
EXIT_UNDECIDED = 4
#: Exit code after Ctrl-C: 128 + SIGINT, the shell's convention for a process it interrupted.
EXIT_INTERRUPTED = 130
#: Exit code after SIGTERM (a CI job cancelled or timed out): 128 + SIGTERM.
EXIT_TERMINATED = 143


#: Seconds between SIGTERM's cancellation of the run and the next one, while the run has not
#: ended (`_on_sigterm`): a cancellation that lands where it is absorbed let the run go on.
TERM_GRACE_S = 2.0
#: Set when SIGTERM arrived (`_on_sigterm`): the interrupt that follows exits `EXIT_TERMINATED`.
_TERMINATED: list[int] = []
#: The event loop and main task of the `_run_main` under way (one at most), for `_on_sigterm`.
_MAIN_TASK: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []


def _on_sigterm(signum: int, frame: object) -> None:
    """The CLI's SIGTERM handler (not the web process's nor the worker's: they drain): the
    run unwinds as after Ctrl-C, and every temporary worktree and view is removed from the
    user's repository (fresh user, issue 30: a CI runner's SIGTERM left them registered there).

    While a `_run_main` runs, its main task is cancelled from the event loop (as asyncio's
    own Ctrl-C handler does), again every `TERM_GRACE_S` seconds until it has ended, and
    `_run_main` raises KeyboardInterrupt. A KeyboardInterrupt raised here instead lands at
    whatever bytecode runs: in the parent half of a ``fork`` (a child nobody waits for), or out
    of the loop, after which asyncio.run cancels every task, its own ``_connect_pipes`` of a
    subprocess just started too, and that subprocess's ``wait()`` then never returns (issue 33:
    a run in the background of a script, SIGINT ignored, did not end; another one left a
    worktree registered). Outside a `_run_main` (no loop, nothing to clean up) it raises
    KeyboardInterrupt at once."""
    _TERMINATED.append(signum)
    if not _MAIN_TASK or _MAIN_TASK[-1][1].done():
        raise KeyboardInterrupt
    running = _MAIN_TASK[-1]
    loop, task = running

    def cancel() -> None:
        if running in _MAIN_TASK:  # not once it is settling (`_run_main`)
            task.cancel()
            again = threading.Timer(TERM_GRACE_S, threadsafe_cancel)
            again.daemon = True
            again.start()

    def threadsafe_cancel() -> None:
        if running in _MAIN_TASK:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(cancel)

    threadsafe_cancel()  # not task.cancel() here: this frame may be inside the loop's code


#: Rounds of `_settle` (each cancels what is left and waits up to `TERM_GRACE_S` seconds).
_SETTLE_ROUNDS = 5


def _run_main(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` that SIGTERM cancels (`_on_sigterm`); once cancelled by it, the
    tasks ``coro`` left pending are ended (`_settle`) before ``asyncio.run`` ends.

    Raises:
        KeyboardInterrupt: SIGTERM cancelled it (or as ``asyncio.run``: Ctrl-C did).
        BaseException: whatever ``coro`` raised.
    """
    import asyncio  # the engine's imports wait until a command needs them (fast --help)

    async def main_task() -> T:
        task = asyncio.current_task()
        assert task is not None
        running = (asyncio.get_running_loop(), task)
        _MAIN_TASK.append(running)
        try:
            return await coro
        except BaseException:
            _MAIN_TASK.remove(running)
            if _TERMINATED:
                await _settle(task)
            raise
        finally:
            if running in _MAIN_TASK:
                _MAIN_TASK.remove(running)

    try:
        return asyncio.run(main_task())
    except asyncio.CancelledError:
        if not _TERMINATED:
            raise
        raise KeyboardInterrupt from None


async def _settle(own: asyncio.Task[Any]) -> None:
    """Cancel the tasks other than ``own`` still pending, and wait until they have ended,
    cancelling again every `TERM_GRACE_S` seconds (at most `_SETTLE_ROUNDS` times).

    A side cut short by a second cancellation (`_on_sigterm`) may leave tasks behind, and
    asyncio.run's own cancellation of them would cancel asyncio's ``_connect_pipes`` of a
    subprocess just started too: that subprocess's ``wait()`` then never returns (CPython
    3.11's base_subprocess), and neither does asyncio.run. Those are left to finish.
    """
    import asyncio

    for _ in range(_SETTLE_ROUNDS):
        others = asyncio.all_tasks() - {own}
        if not others:
            return
        for other in others:
            if getattr(other.get_coro(), "__name__", "") != "_connect_pipes":
                other.cancel()
        await asyncio.wait(others, timeout=TERM_GRACE_S)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``llmgate`` command line; returns the process exit code (`EXIT_INTERRUPTED`
    after Ctrl-C, `EXIT_TERMINATED` after SIGTERM, once temporary worktrees are removed)."""
    parser = _parser()
    args = parser.parse_args(argv)
    apply_output_level(args)
    logging.getLogger("asyncio").addFilter(_reaped_child_warning)
    if not hasattr(args, "func"):
        parser.print_help()
        return EXIT_CONFIG_ERROR
    previous = None
    if args.func not in (cmd_serve, cmd_worker) and \
            threading.current_thread() is threading.main_thread():  # those two drain themselves
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        if _TERMINATED:
            print("llmgate: terminated", file=sys.stderr)
            return EXIT_TERMINATED
        print("llmgate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return code


def _reaped_child_warning(record: logging.LogRecord) -> bool:
    """Drop asyncio's "Unknown child process pid N, will report returncode 255" (False).

    After Ctrl-C, asyncio closes a cancelled subprocess's transport, which kills the child and
    reaps it (``Popen.poll``) while asyncio's child-watcher thread is still waiting for it; the
    thread then logs that warning about a child that was in fact killed and reaped (a CPython
    race, seen with target commands). Every other record passes (True).
    """
    return not str(record.msg).startswith("Unknown child process pid")


class _Version(argparse.Action):
    """``--version``: print `version_text` (worker/cli/version_text.py) and exit 0, reading
    the installed version only when asked (argparse's own version action needs the text up
    front, which would read the distribution's metadata on every ``--help``)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest, nargs=0, default=default,
                         help=help or "show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(version_text())  # stdout, as argparse's own version action
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="llmgate", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    # each command's parser is a `Parser` too (argparse makes them of the parent's class)
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(metavar="COMMAND"))
    run = sub.add_parser("run", help="gate the working tree or a commit against a base, locally",
                         description=RUN_DESCRIPTION)
    run.add_argument("--config", default=None,
                     help="one config file (or a folder: its .llmgate.yml), relative to the "
                          "current folder; a .llmgate.yml in a folder runs in its folder. "
                          "Default, as for the root .llmgate.yml: every config of the "
                          "repository")
    run.add_argument("--base", help="base ref or SHA; a head behind it is gated merged into it, "
                                    "as the App gates a pull request (a conflicting head: "
                                    "against the merge base); without it only absolute rules "
                                    "apply")
    run.add_argument("--base-tip", action="store_true",
                     help="compare the head itself with --base (never merged, never the "
                          "merge base)")
    run.add_argument("--head", help="head ref or SHA (default: the working tree)")
    run.add_argument("--format", action="append", type=parse_format, metavar="NAME[:PATH]",
                     help=f"a report to write: one of {', '.join(FORMATS)}; NAME:PATH writes "
                          "it to PATH; repeat for several. Default: markdown to --output, or "
                          "plain text on a terminal (docs/local-run.md)")
    run.add_argument("--output", type=Path, help="write the report here instead of stdout")
    run.add_argument("--repo", type=Path, default=None, help=argparse.SUPPRESS)
    run.add_argument("--calibration", type=Path, default=None,
                     help="a calibration record (llmgate calibrate --format json): its A/A "
                          "runs weigh flaky examples less in the regression tests")
    add_selection_options(run)
    add_store_option(run)
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan (configs, suites, calls) and the estimate (calls, "
                          "USD) and stop: no model call is sent, no command target runs "
                          "(--format json: as JSON)")
    run.add_argument("--all-suites", action="store_true",
                     help="run every suite, even one whose on_paths no changed file matches "
                          "(with --base, suites are skipped by on_paths as on the App)")
    run.add_argument("--allow-undecided", action="store_true",
                     help="exit 0, not 4, when the gate could not decide (over budget or "
                          "time, provider errors outside the change, base could not run)")
    cache = run.add_mutually_exclusive_group()
    cache.add_argument("--no-cache", action="store_true",
                       help="neither read nor write the model response cache")
    cache.add_argument("--refresh-cache", action="store_true",
                       help="send every model call again and store the new answers")
    add_named_arguments(run)
    run.set_defaults(func=cmd_run)
    serve = sub.add_parser("serve", help="start the webhook receiver (uvicorn app.main:app)",
                           description="Start the web process: verifies GitHub's deliveries, "
                                       "de-duplicates and queues them in Redis (REDIS_URL). "
                                       "docs/operations.md lists its settings.")
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"),
                       help="address to listen on (default: $HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=os.environ.get("PORT", "8000"),
                       help="TCP port to listen on (default: $PORT or 8000)")
    serve.set_defaults(func=cmd_serve)
    worker = sub.add_parser("worker", help="start an arq worker (arq worker.main.WorkerSettings)",
                            description="Start a worker: takes gate jobs from Redis (REDIS_URL), "
                                        "checks out, runs the suites and publishes to GitHub. "
                                        "docs/operations.md lists its settings.")
    worker.set_defaults(func=cmd_worker)
    demo = sub.add_parser("demo", help="gate the example PR end to end on this machine",
                          description="Gate examples/support-bot's pull request on this machine: "
                                      "starts redis-server, the web process, a worker, a fake "
                                      "GitHub and a fake model provider on loopback, and prints "
                                      "the check run and the PR comment. No account or key.")
    demo.set_defaults(func=cmd_demo)
    add_setup_command(sub)
    add_healthcheck_command(sub)
    add_history_command(sub)
    add_calibrate_command(sub)
    add_power_command(sub)
    add_perturbations_command(sub)
    add_redteam_command(sub)
    add_judge_command(sub)
    add_migrate_command(sub)
    add_baseline_command(sub)
    add_init_command(sub)
    add_dataset_command(sub)
    add_action_command(sub, main)
    add_import_command(sub)
    add_output_levels(parser)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    """Gate locally, as the worker does, and print the report.

    Inside a git repository: with ``--base``, the base compared (`_base_side`: ``--base``, with a
    head behind it merged into it, as on the App) and ``--head`` if given, else the
    working tree, are checked out in temporary worktrees, run and compared; without ``--config``,
    every config of the repository is gated as the worker gates them (worker/pipeline/plan.py).
    Exit codes (`exit_code`): 0 the gate passed (or is neutral, as the base config chose:
    ``on_inconclusive: neutral`` or ``settings.undecided: neutral``; or there is no llmgate
    config at ``--base`` nor at head, as the App's ``neutral`` "no llmgate config" check), 1 the
    gate failed, 2 configuration error (a head without a config and no ``--base`` included) or
    a misuse of the options (one line on stderr), 3 execution error (git or the run failed), 4
    undecided (the check would be ``action_required``; 0 with ``--allow-undecided``). With
    ``--base``, suites are skipped by ``on_paths`` as on the App (`_changed`; not with
    ``--all-suites``); ``--dry-run`` prints the plan and the estimate and sends nothing
    (worker/cli/dry_run.py).
    """
    from worker.checkout import GitError

    refused = refusal(args)
    if refused is not None:
        code, message = refused
        print(f"llmgate: {message}", file=sys.stderr)
        return code
    if args.promote is not None:
        return _promote(args)
    try:
        multi, head_sha, base_sha = gate_locally(args)
    except (GitError, ExecutionError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    gate_report = multi.merged()
    if args.dry_run:  # the plan is printed; no report is written
        if gate_report.config_error is not None:
            print(f"llmgate: configuration error: {gate_report.config_error}", file=sys.stderr)
        return run_exit_code(gate_report)
    unwritten = write_reports(args.format, multi, head_sha=head_sha, base_sha=base_sha or None,
                              output=args.output, environ=os.environ)
    if unwritten is not None:
        print(f"llmgate: {unwritten}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    if gate_report.config_error is not None:
        print(f"llmgate: configuration error: {gate_report.config_error}", file=sys.stderr)
    return run_exit_code(gate_report, allow_undecided=args.allow_undecided)


def run_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the options of ``llmgate run`` (``argv`` without the word ``run``), as the
    command line does; the Python API (llmgate/api.py) builds its runs with it.

    Raises:
        SystemExit: an option is unknown or malformed (argparse's usage error, code 2).
    """
    args: argparse.Namespace = _parser().parse_args(["run", *argv])
    return args


def refusal(args: argparse.Namespace) -> tuple[int, str] | None:
    """Return ``(exit code, one line)`` when ``llmgate run`` with ``args`` cannot start (before
    anything runs: `_refusal`, then the named-baseline options); else None."""
    refused = _refusal(args)
    named = named_refusal(args) if refused is None else None
    if refused is None and named is not None:  # a misuse of the options: 2, as argparse's
        return EXIT_CONFIG_ERROR, str(named)
    return refused


def gate_locally(args: argparse.Namespace) -> tuple[MultiReport, str, str]:
    """Gate as ``llmgate run`` does (`_run_local`) and return ``(reports, head SHA, base SHA)``
    with every provider key of the environment and what a ``pii`` assertion found redacted
    (CI logs are often public). The SHAs are "" for the working tree or no ``--base``.

    Raises:
        GitError, ExecutionError, OSError: the run could not happen (exit code 3).
    """
    # scipy via the statistics: only when a gate runs
    from worker.report import redact_report

    multi, head_sha, base_sha = _run_main(_run_local(args))
    return redact_report(multi, Redactor(secrets_from_environ(os.environ))), head_sha, base_sha


def run_exit_code(report: GateReport, *, allow_undecided: bool = False) -> int:
    """Return ``llmgate run``'s exit code for a merged report: 2 for a configuration error,
    else `exit_code` of its conclusion."""
    if report.config_error is not None:
        return EXIT_CONFIG_ERROR
    return exit_code(report.conclusion, allow_undecided=allow_undecided)


def _promote(args: argparse.Namespace) -> int:
    """``llmgate run --promote NAME`` (worker/cli/named.py): 0 promoted, 2 configuration
    error at the head commit, 3 execution error (not on the default branch, git, the run)."""
    from worker.checkout import GitError
    from worker.cli.named import run_promote
    from worker.evals.llm import eval_context

    async def promoted() -> str:
        repo = args.repo or repo_root(Path.cwd())
        async with eval_context(args, repo) as evals:
            return await run_promote(args, repo, evals)

    try:
        line = _run_main(promoted())
    except ConfigError as err:
        print(f"llmgate: configuration error: {err}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except (GitError, ExecutionError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    print(f"llmgate: {line}", file=sys.stderr)
    return EXIT_PASS


def exit_code(conclusion: str, *, allow_undecided: bool = False) -> int:
    """Return ``llmgate run``'s exit code for a report's check conclusion (no config error).

    ``success``, ``neutral`` and ``skipped`` pass (0); ``action_required`` is undecided (4,
    or 0 with ``allow_undecided``); anything else failed (1).
    """
    if conclusion in ("success", "neutral", "skipped"):
        return EXIT_PASS
    if conclusion == "action_required":
        return EXIT_PASS if allow_undecided else EXIT_UNDECIDED
    return EXIT_GATE_FAILED


def _dry_run_formats(args: argparse.Namespace) -> str | None:
    """Why ``--dry-run`` cannot write the ``--format`` asked (it prints text or JSON), or None."""
    others = sorted({spec.name for spec in args.format or () if spec.name != "json"})
    if not args.dry_run or not others:
        return None
    return (f"--dry-run writes no {', '.join(others)} report: it prints its plan as text, or "
            "as JSON with --format json")


def _refusal(args: argparse.Namespace) -> tuple[int, str] | None:
    """Return ``(exit code, one line)`` when ``llmgate run`` cannot start, before anything
    runs; else None, with ``args.config`` made relative to the repository root.

    Outside a git repository (no ``--repo``) only the current folder's own config is gated,
    never every config found below it, and ``--base``/``--head`` are a misuse (2). An
    ``--output`` whose folder does not exist gets it made (as ``mkdir -p``); one that cannot be
    written is refused now (3), not after a run that may have spent money on model calls.
    """
    clash = format_refusal(args.format, args.output) or _dry_run_formats(args)
    if clash is not None:
        return EXIT_CONFIG_ERROR, clash
    for output in format_paths(args.format, args.output):
        if output.is_dir():
            return EXIT_CONFIG_ERROR, f"cannot write {output}: it is a folder"
        try:
            output.absolute().parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            return EXIT_EXECUTION_ERROR, (f"cannot make the folder of {output}: "
                                          f"{err.strerror or err}")
        unwritable = _unwritable(output)
        if unwritable is not None:
            return EXIT_EXECUTION_ERROR, f"cannot write {output}: {unwritable}"
    here = Path.cwd().absolute()
    root = repo_root(here)
    inside = args.repo is not None or is_repository(root)
    if not inside and (args.base or args.head):
        return EXIT_CONFIG_ERROR, (f"--base and --head need a git repository; {here} is "
                                   "not inside one")
    if args.config is None:
        args.config = CONFIG_FILENAME
    elif args.repo is None:
        args.config = _from_root(args.config, here, root)
    if not inside and not (here / in_folder(here, args.config)).is_file():
        return EXIT_CONFIG_ERROR, (f"no {args.config} in {here}, which is not inside a git "
                                   "repository: run llmgate in your repository, or name a "
                                   "config file with --config")
    return None


def _unwritable(output: Path) -> str | None:
    """Return why ``output`` cannot be written (the OS's words), or None after opening it to
    append, as the report will (a file this creates is removed again: the file a symbolic link
    points to, never the link itself)."""
    existed = output.exists()
    try:
        with output.open("a", encoding="utf-8"):
            pass
    except OSError as err:
        return err.strerror or str(err)
    if not existed:
        output.resolve().unlink(missing_ok=True)
    return None


def _from_root(config: str, here: Path, root: Path) -> str:
    """``--config`` (relative to ``here``, or absolute) as a path relative to ``root``. Left
    as given when it points outside ``root`` (the pipeline refuses it, naming it)."""
    full = Path(os.path.normpath(here / config))
    try:
        return full.relative_to(root).as_posix()
    except ValueError:
        return config


def in_folder(root: Path, config: str) -> str:
    """Return ``config`` (relative to ``root``, the tree gated as head), or, when it names a
    folder of that tree, the folder's ``.llmgate.yml``, as a ``configs:`` entry means it."""
    if (root / config).is_dir():
        return posixpath.normpath(posixpath.join(config, CONFIG_FILENAME))
    return config


async def _resolve(repo: Path, ref: str, option: str) -> str:
    from worker.checkout import resolve_ref

    try:
        return await resolve_ref(repo, ref)
    except ValueError as err:  # e.g. --base=-x: never hand git an option
        raise ExecutionError(f"{option}: {err}") from None


async def _run_local(args: argparse.Namespace) -> tuple[MultiReport, str, str]:
    """Gate the configs ``args`` name; return the reports and the head and base SHAs compared
    ("" for the working tree, or for no ``--base``), which the report names even when the
    config is broken."""
    from contextlib import AsyncExitStack

    from worker.checkout import local_worktree
    from worker.cli.baseline import runner_for as store_runner_for
    from worker.cli.run_options import run_overrides
    from worker.evals.llm import eval_context
    from worker.pipeline import (
        ConfigReport,
        MultiReport,
        folder_plan,
        gate_plan,
        gate_trees,
        nothing_to_gate,
        plan_configs,
        unconfigured_report,
    )

    repo: Path = args.repo or repo_root(Path.cwd())
    async with AsyncExitStack() as stack:
        evals = await stack.enter_async_context(eval_context(args, repo))
        head_root, head_sha = repo, ""
        if args.head:
            head_sha = await _resolve(repo, args.head, "--head")
            head_root = await stack.enter_async_context(local_worktree(repo, head_sha))
        base_root, base_sha, base_note, conflicted = None, "", "", False
        runner_for: Callable[[str], BaseRunner] = _run_base_now
        changed = await _changed(repo, args, head_sha)  # before a merge: the head as given
        if args.base:
            base_root, base_sha, base_note, merged, conflicted = await _base_side(
                stack, repo, args, head_sha)
            if merged is not None:  # a head behind --base: gated merged into it
                head_root, head_sha = merged
        elif args.compare_to:  # a named baseline (worker/cli/named.py)
            from worker.cli.named import compare_to_side
            base_root, base_sha, base_note, runner_for = await compare_to_side(
                stack, repo, args.compare_to)
        if args.calibration is not None:
            evals.history = _calibration_history(args.calibration)
        evals.overrides = run_overrides(args)
        evals.observers = _show_progress(stack, evals.observers, quiet=args.quiet)
        stored = await stack.enter_async_context(store_runner_for(args, repo))
        if stored is not None and not args.compare_to:  # a named baseline comes first
            runner_for = stored
        args.config = in_folder(head_root, args.config)  # a folder: at head, not the tree
        if args.config == CONFIG_FILENAME and nothing_to_gate(head_root, base_root):
            return unconfigured_report(), head_sha, base_sha  # neutral, as the App's check
        plan = plan_configs(head_root, base_root) if args.config == CONFIG_FILENAME \
            else folder_plan(args.config, head_root, base_root)  # a folder's: as the worker
        if args.dry_run:
            return await _dry_run(plan, args, (head_root, head_sha), (base_root, base_sha),
                                  changed, evals), head_sha, base_sha
        if plan is not None:  # every config of the repository, or one folder's
            multi = await gate_plan(plan, head_root, base_root, head_sha=head_sha,
                                    base_sha=base_sha, evals=evals, changed_files=changed,
                                    base_runner_for=runner_for)
        else:
            report = await gate_trees(head_root, base_root, head_sha=head_sha,
                                      base_sha=base_sha, config_path=args.config, evals=evals,
                                      changed_files=changed, base_runner=runner_for(""))
            multi = MultiReport((ConfigReport(args.config, "", report),))
        return _finished(multi, base_note, conflicted), head_sha, base_sha


async def _changed(repo: Path, args: argparse.Namespace, head_sha: str) -> list[str] | None:
    """Return the files ``on_paths`` is applied to, as the App's "Files changed": the diff from
    the merge base of ``--base`` and head to head (``head_sha``, or the working tree when "":
    worker/cli/changed.py); None (every suite runs) without ``--base``, with ``--all-suites``
    or when they share no history.

    Raises:
        ExecutionError: ``--base`` names no commit.
        GitError: git failed.
    """
    from worker.cli.changed import changed_files

    if not args.base or args.all_suites:
        return None
    return await changed_files(repo, await _resolve(repo, args.base, "--base"), head_sha)


def _show_progress(stack: AsyncExitStack, observers: Observers, *, quiet: bool) -> Observers:
    """Return ``observers`` printing the run's estimate and progress lines on stderr
    (worker/cli/progress.py), the last ones when ``stack`` closes; with ``quiet``
    (``--quiet``: only errors), neither."""
    from worker.cli.progress import Progress

    if quiet:
        return replace(observers, say=_silent)
    progress = Progress()
    stack.callback(progress.finish)
    return replace(observers, on_plan=progress.plan, on_call=progress.call)


def _silent(line: str) -> None:
    """Say nothing (``--quiet``)."""


async def _dry_run(plan: Plan | None, args: argparse.Namespace, head: tuple[Path, str],
                   base: tuple[Path | None, str], changed: Sequence[str] | None,
                   evals: EvalContext) -> MultiReport:
    """Print the plan and the estimate of ``llmgate run --dry-run`` (worker/cli/dry_run.py):
    as text on stdout, or as JSON with ``--format json`` (to its path, ``--output`` or stdout);
    return a report that holds only its head config error, if any.

    Raises:
        OSError: the JSON file cannot be written (`_refusal` checked its folder first).
    """
    from worker.cli.dry_run import dry_run
    from worker.evals.types import GateReport
    from worker.evals.verdict import config_error_report
    from worker.pipeline import ConfigReport, MultiReport

    found = await dry_run(plan, args.config, head, base, changed, evals)
    as_json = next((spec for spec in args.format or () if spec.name == "json"), None)
    if as_json is None:
        print("\n".join(found.lines))
    else:
        text = json.dumps(found.document(), indent=2, ensure_ascii=False) + "\n"
        path = as_json.path or args.output
        if path is None:
            sys.stdout.write(text)
        else:
            path.write_text(text, encoding="utf-8")
    report = config_error_report(found.config_error) if found.config_error is not None \
        else GateReport("neutral", (), (), None, None, headline="dry run: nothing ran")
    return MultiReport((ConfigReport(args.config, "", report),))


def _run_base_now(folder: str) -> BaseRunner:
    """The base runner of every config without a named baseline: run base now."""
    from worker.pipeline import run_base_now

    return run_base_now


def _calibration_history(path: Path) -> dict[str, Any]:
    """Read ``--calibration``: the examples' pass shares of its A/A runs.

    Raises:
        ExecutionError: the file cannot be read or is not a calibration record.
    """
    from worker.pipeline import history_of

    try:
        return history_of(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, AttributeError) as err:
        raise ExecutionError(f"--calibration {path}: not a calibration record ({err})") from None


def _finished(multi: MultiReport, base_note: str, conflicted: bool) -> MultiReport:
    """``multi`` with the note of the base compared; undecided unless it failed when the head
    conflicts with ``--base``, as on the App (`worker.pipeline.plan.conflict_note`)."""
    from worker.pipeline import CONFLICT_UNDECIDED

    if conflicted:
        multi = multi.undecided_unless_failed(CONFLICT_UNDECIDED)
    return multi.with_notes([base_note]) if base_note else multi


async def _base_side(stack: AsyncExitStack, repo: Path, args: argparse.Namespace,
                     head_sha: str) -> tuple[Path, str, str, tuple[Path, str] | None, bool]:
    """Check out the base commit compared; return ``(its worktree, its SHA, a note, merged,
    conflicted)``.

    As the App compares a pull request (worker/gate/evaluate.py): a head (``--head``, else the
    working tree's ``HEAD`` commit) that contains ``--base`` is compared with it; a head behind
    ``--base`` is gated as merging it would land, ``merged`` = (a worktree, the SHA) of the head
    merged into ``--base`` (`worker.checkout.local_merge_result`), against ``--base``. The head
    itself is compared with the merge base when it conflicts with ``--base``, or when the working
    tree has changes not committed (a merge holds commits only; noted), unless ``--base`` says
    ``settings.base: tip`` (the head itself, never merged) or its configs differ from the merge
    base's (`worker.pipeline.plan.tip_reason`); then with ``--base`` itself. ``--base-tip`` compares
    the head itself with ``--base``; commits without a common history are compared with
    ``--base`` too (noted). The note ("" when the merge base is ``--base``) says which was
    compared, for the report; ``merged`` is None unless a merge is gated; ``conflicted`` says
    the head conflicts with ``--base`` (its run is then undecided unless it fails, as on the App:
    `worker.pipeline.plan.conflict_note`).

    Raises:
        ExecutionError: ``--base`` or ``HEAD`` names no commit, or git failed.
    """
    from worker.checkout import (
        local_is_clean,
        local_merge_base,
        local_merge_result,
        local_worktree,
    )
    from worker.pipeline import base_mode, conflict_note, merged_note, tip_reason

    tip = await _resolve(repo, args.base, "--base")
    if args.base_tip:
        return await stack.enter_async_context(local_worktree(repo, tip)), tip, "", None, False
    head = head_sha or await _resolve(repo, "HEAD", "the working tree's HEAD")
    found = await local_merge_base(repo, tip, head)
    if found is None:
        return await stack.enter_async_context(local_worktree(repo, tip)), tip, (
            f"{tip[:7]} and {head[:7]} share no history: compared with --base as given"), None, \
            False
    if found == tip:
        return await stack.enter_async_context(local_worktree(repo, found)), tip, "", None, False
    tip_root = await stack.enter_async_context(local_worktree(repo, tip))
    strict = base_mode(tip_root) == "tip"  # the head itself against the tip, as it says
    clean = bool(head_sha) or await local_is_clean(repo)
    merged = await local_merge_result(repo, tip, head) if clean and not strict else None
    if merged is not None:
        merged_root = await stack.enter_async_context(local_worktree(repo, merged))
        return tip_root, tip, merged_note(tip, head, merged), (merged_root, merged), False
    conflicted = clean and not strict
    why_not = "" if strict else conflict_note(tip) if clean else (
        f"the working tree has changes not committed, so it cannot be gated merged into "
        f"{args.base} ({tip[:7]}) as the App gates a head behind its base branch: commit them "
        "(or pass --head) to gate the merge result")
    root = await stack.enter_async_context(local_worktree(repo, found))
    why = tip_reason(root, tip_root)
    if why is not None:
        return tip_root, tip, (f"{why_not}. " * bool(why_not) + f"Compared with {args.base} "
                               f"({tip[:7]}) itself, not the merge base ({found[:7]}): {why}"), \
            None, conflicted
    return root, found, (f"{why_not}. Compared with {found[:7]}, the merge base of {args.base} "
                         f"({tip[:7]}) and head (--base-tip compares with --base itself)"), None, \
        conflicted


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the web process (the webhook receiver) with uvicorn."""
    import uvicorn

    # No access log: the receiver writes its own short line per delivery (and aggregates
    # rejections), so a flood of unsigned deliveries cannot flood the log.
    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level="info",
                access_log=False, timeout_graceful_shutdown=WEB_DRAIN_S)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Start an arq worker that runs gate jobs from Redis.

    A missing or malformed setting, or a queue Redis that can evict or runs in cluster mode,
    prints one line and exits 2; a Redis that does not answer is waited for, at start-up and
    afterwards (`worker.runtime.redis_checks`), so the worker exits only on a configuration error.
    """
    import logging.config

    from arq.logs import default_log_config
    from arq.worker import run_worker
    from redis.exceptions import ConnectionError as RedisConnectionError

    from worker.main import WorkerSettings  # checks every setting first (PEP 562 __getattr__)

    logging.config.dictConfig(default_log_config(verbose=False))
    try:
        run_worker(WorkerSettings)
    except RedisConnectionError as err:
        print(f"llmgate worker: cannot reach Redis: {err}", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Gate the example support-bot PR end to end on loopback and print what the PR shows.

    Starts redis-server, a local GitHub emulator, the web process and a worker; needs a source
    checkout of llmgate (it uses ``examples/`` and ``tests/fakes``). Exit 0 when the pipeline ran
    end to end, whatever verdict it shows.
    """
    from worker.cli.demo import run_demo

    return run_demo()


if __name__ == "__main__":
    raise SystemExit(main())
