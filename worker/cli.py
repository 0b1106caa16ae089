"""The ``llmgate`` command line: ``run`` (gate locally), ``serve``, ``worker`` and ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from worker import report
from worker.checkout import GitError, local_worktree, resolve_ref
from worker.evals.types import CONFIG_FILENAME, ExecutionError, GateReport
from worker.pipeline import gate_trees

#: Exit codes of ``llmgate run``.
EXIT_PASS, EXIT_GATE_FAILED, EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR = 0, 1, 2, 3


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``llmgate`` command line; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return EXIT_CONFIG_ERROR
    code: int = args.func(args)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmgate", description=__doc__)
    sub = parser.add_subparsers(metavar="COMMAND")
    run = sub.add_parser("run", help="gate the working tree or a commit against a base, locally",
                         description=cmd_run.__doc__)
    run.add_argument("--config", default=CONFIG_FILENAME, help="config path in the repository")
    run.add_argument("--base", help="base ref or SHA; without it only absolute rules apply")
    run.add_argument("--head", help="head ref or SHA (default: the working tree)")
    run.add_argument("--format", choices=("markdown", "json"), default="markdown")
    run.add_argument("--output", type=Path, help="write the report here instead of stdout")
    run.add_argument("--repo", type=Path, default=Path.cwd(), help=argparse.SUPPRESS)
    run.set_defaults(func=cmd_run)
    serve = sub.add_parser("serve", help="start the webhook receiver (uvicorn app.main:app)")
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    serve.set_defaults(func=cmd_serve)
    worker = sub.add_parser("worker", help="start an arq worker (arq worker.main.WorkerSettings)")
    worker.set_defaults(func=cmd_worker)
    demo = sub.add_parser("demo", help="gate the example PR end to end on this machine")
    demo.set_defaults(func=cmd_demo)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    """Gate locally, as the worker does, and print the report.

    Inside a git repository: with ``--base``, base (and ``--head`` if given, else the working
    tree) are checked out in temporary worktrees, run and compared. Exit codes: 0 the gate
    passed, 1 the gate failed, 2 configuration error, 3 execution error (git or the run failed).
    """
    try:
        gate_report = asyncio.run(_run_local(args))
    except (GitError, ExecutionError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_EXECUTION_ERROR
    rendered = (report.render_json(gate_report) if args.format == "json"
                else report.render_markdown(gate_report))
    if args.output:
        args.output.write_text(rendered, encoding="utf-8")
    else:
        print(rendered)
    if gate_report.config_error is not None:
        print(f"llmgate: configuration error: {gate_report.config_error}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    return EXIT_PASS if gate_report.conclusion == "success" else EXIT_GATE_FAILED


async def _run_local(args: argparse.Namespace) -> GateReport:
    repo: Path = args.repo
    async with AsyncExitStack() as stack:
        head_root, head_sha = repo, ""
        if args.head:
            head_sha = await resolve_ref(repo, args.head)
            head_root = await stack.enter_async_context(local_worktree(repo, head_sha))
        base_root, base_sha = None, ""
        if args.base:
            base_sha = await resolve_ref(repo, args.base)
            base_root = await stack.enter_async_context(local_worktree(repo, base_sha))
        return await gate_trees(head_root, base_root, head_sha=head_sha, base_sha=base_sha,
                                config_path=args.config)


def cmd_serve(args: argparse.Namespace) -> int:
    """Start the web process (the webhook receiver) with uvicorn."""
    import uvicorn

    uvicorn.run("app.main:app", host=args.host, port=args.port, log_level="info")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Start an arq worker that runs gate jobs from Redis."""
    from arq.worker import run_worker

    from worker.main import WorkerSettings

    run_worker(WorkerSettings)  # type: ignore[arg-type]
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Gate the example support-bot PR end to end on loopback and print what the PR shows.

    Starts redis-server, a local GitHub emulator, the web process and a worker; needs a source
    checkout of llmgate (it uses ``examples/`` and ``tests/fakes``). Exit 0 when the pipeline ran
    end to end, whatever verdict it shows.
    """
    from worker.demo import run_demo

    return run_demo()


if __name__ == "__main__":
    raise SystemExit(main())
