"""A provider process: send the model calls the run's process hands it (``python -m`` this).

Started by worker/evals/llm/pool.py, whose docstring has the protocol. In order, it:

1. makes itself non-dumpable like the worker (`worker.security.sandbox.harden_worker`): a target
   command of the same user cannot read its memory or ``/proc/<pid>/environ``;
2. reads the provider environment (the first line on stdin) into ``os.environ``: it was started
   with `worker.evals.llm.pool.start_environ` only, so no key sits in its
   ``/proc/<pid>/environ``; its log records are redacted like the worker's
   (`worker.security.redact`);
3. imports litellm (worker/evals/llm/client.py), says ``{"ready": true}``, then answers calls
   concurrently until stdin closes; a ``cancel`` cancels a call in flight.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from typing import Any

import orjson

from worker.evals.llm.pool import MAX_LINE_BYTES
from worker.evals.llm.retry import ProviderError
from worker.security import sandbox
from worker.security.redact import Redactor, install_log_redaction, secrets_from_environ


def main() -> None:
    """Serve calls on stdin until it closes (the provider process's entry point)."""
    sandbox.harden_worker()
    channel = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the answers
    asyncio.run(_serve(channel))


async def _serve(channel: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(channel, "wb"))
    environ = orjson.loads(await reader.readline() or b"{}").get("environ", {})
    os.environ.update(environ)
    install_log_redaction(Redactor(secrets_from_environ(os.environ)))
    from worker.evals.llm import client as llm

    llm.litellm_module()
    writer.write(b'{"ready":true}\n')
    tasks: dict[int, asyncio.Task[None]] = {}
    while line := await reader.readline():
        message = orjson.loads(line)
        if "cancel" in message:
            if (task := tasks.get(message["cancel"])) is not None:
                task.cancel()
            continue
        call_id: int = message["id"]
        task = loop.create_task(_answer(call_id, message["op"], message["args"], writer))
        tasks[call_id] = task
        task.add_done_callback(functools.partial(_forget, tasks, call_id))
    for task in tasks.values():
        task.cancel()


def _forget(tasks: dict[int, asyncio.Task[None]], call_id: int, _: object) -> None:
    tasks.pop(call_id, None)


async def _answer(call_id: int, op: str, args: dict[str, Any],
                  writer: asyncio.WriteTransport) -> None:
    from worker.evals.llm import client as llm

    try:
        out: dict[str, Any] = {"id": call_id, "ok": await _send(op, args)}
    except ProviderError as err:
        out = {"id": call_id, "error": {"kind": err.kind, "message": err.message,
                                        "status": err.status, "retryable": err.retryable,
                                        "retry_after_s": err.retry_after_s,
                                        "field": err.field, "headers": err.headers}}
    except Exception as exc:  # a bug here must still answer, without the key
        mapped = llm.to_provider_error(exc, args.get("kwargs", {}).get("api_key"))
        out = {"id": call_id, "error": {"kind": "provider", "message": mapped.message,
                                        "retryable": False}}
    writer.write(orjson.dumps(out) + b"\n")


async def _send(op: str, args: dict[str, Any]) -> dict[str, Any]:
    from worker.evals.llm import client as llm

    if op == "chat":
        reply = await llm.send_chat(args["kwargs"], args["messages"])
        return {"text": reply.text, "usage": _usage(reply.usage), "latency_ms": reply.latency_ms,
                "problem": reply.problem,
                "tool_calls": [[c.id, c.name, c.arguments] for c in reply.tool_calls],
                "headers": dict(reply.headers), "replaced": reply.replaced}
    if op == "embed":
        vectors = await llm.send_embed(args["kwargs"], args["texts"])
        return {"vectors": vectors.vectors, "usage": _usage(vectors.usage),
                "latency_ms": vectors.latency_ms, "headers": dict(vectors.headers)}
    raise ProviderError("provider", f"unknown provider operation {op!r}")


def _usage(usage: Any) -> list[int] | None:
    return None if usage is None else [usage.input, usage.output, usage.cached_input,
                                       usage.cache_write]


if __name__ == "__main__":
    main()
