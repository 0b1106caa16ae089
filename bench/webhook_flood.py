"""Flood the web process with unsigned and mis-signed deliveries: how much log, how much memory?

Anyone on the internet can POST to ``/webhook``. A reference receiver logged each refused
delivery with its payload: 95 KiB of log per bad delivery, 546 MiB in a 3 s flood, and it grew
to 1.2 GiB of memory. This benchmark runs our web process exactly as ``llmgate serve`` does
(uvicorn, log level info, access log on; its stdout and stderr go to a file), sends a 3 s flood
of bad deliveries from several keep-alive connections (real ``pull_request`` payloads, ~28 KB,
unsigned or signed with the wrong secret, plus some 1 MiB bodies), and reports:

- log bytes written per rejected delivery (uvicorn's access line included), against ~200 bytes
  allowed and 95 KiB for the reference;
- the web process's resident memory (VmRSS) before and after, against 1.2 GiB.

It starts its own ``redis-server`` on a free loopback port and sends traffic only to loopback.
The last line is ``log_bytes_per_rejection=<n>``.

    python bench/webhook_flood.py [--seconds 3] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.webhooks import sign  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "github" / "webhooks" / "pull_request.synchronize.json"
SECRET = "flood-bench-secret"
HOST = "127.0.0.1"
#: The reference receiver's figures (see the module doc).
REFERENCE_LOG_BYTES_PER_REJECTION = 95 * 1024
REFERENCE_RSS_BYTES = int(1.2 * 1024**3)


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    """Return a process's resident set size (VmRSS), bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_for(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """Wait until ``url`` answers 200, or raise (showing nothing: the caller prints the log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the web process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout_s} s")


@contextmanager
def web_process(workdir: Path) -> Iterator[tuple[int, int, Path]]:
    """Run redis-server and ``llmgate serve``; yield (web port, web pid, log file)."""
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    redis_port, web_port = free_port(), free_port()
    log_path = workdir / "web.log"
    procs: list[subprocess.Popen[bytes]] = []
    with open(log_path, "wb") as log:
        try:
            procs.append(subprocess.Popen(
                [binary, "--port", str(redis_port), "--bind", HOST, "--save", "",
                 "--appendonly", "no", "--dir", str(workdir)], stdout=subprocess.DEVNULL))
            env = os.environ | {"GITHUB_WEBHOOK_SECRET": SECRET,
                                "REDIS_URL": f"redis://{HOST}:{redis_port}/0", "HOST": HOST,
                                "PORT": str(web_port)}
            serve = [sys.executable, "-m", "worker.cli", "serve", "--host", HOST, "--port",
                     str(web_port)]
            procs.append(subprocess.Popen(serve, cwd=ROOT, env=env, stdout=log, stderr=log))
            try:
                wait_for(f"http://{HOST}:{web_port}/healthz", procs[1])
            except (RuntimeError, TimeoutError):
                sys.stderr.write(log_path.read_text(errors="replace")[-3000:])
                raise
            yield web_port, procs[1].pid, log_path
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(timeout=15)


def bad_requests(port: int) -> list[bytes]:
    """Return raw HTTP requests: unsigned, mis-signed, and a 1 MiB mis-signed body."""
    body = json.dumps(json.loads(FIXTURE.read_bytes()), indent=2).encode()
    big = body + b" " * (1024 * 1024 - len(body))

    def request(payload: bytes, signature: str | None, number: int) -> bytes:
        lines = ["POST /webhook HTTP/1.1", f"Host: {HOST}:{port}",
                 f"Content-Length: {len(payload)}", "Content-Type: application/json",
                 "X-GitHub-Event: pull_request", f"X-GitHub-Delivery: flood-{number:06d}",
                 "User-Agent: flood"]
        if signature is not None:
            lines.append(f"X-Hub-Signature-256: {signature}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload

    wrong = sign("not-the-secret", body)
    return [request(body, None, 1), request(body, wrong, 2), request(body, "sha256=zz", 3),
            request(big, sign("nope", big), 4)]


async def _one_connection(port: int, requests: list[bytes], stop_at: float,
                          counts: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    i = 0
    try:
        while time.monotonic() < stop_at:
            # mostly ~28 KB bodies; one in 16 is the 1 MiB one
            raw = requests[3] if i % 16 == 15 else requests[i % 3]
            i += 1
            writer.write(raw)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            counts[status] = counts.get(status, 0) + 1
    finally:
        writer.close()


async def flood(port: int, seconds: float, connections: int) -> dict[int, int]:
    """Send bad deliveries for ``seconds`` from ``connections`` connections; count statuses."""
    requests = bad_requests(port)
    counts: dict[int, int] = {}
    stop_at = time.monotonic() + seconds
    await asyncio.gather(*(_one_connection(port, requests, stop_at, counts)
                           for _ in range(connections)))
    return counts


def main() -> None:
    """Run the flood and print the figures; the last line is ``log_bytes_per_rejection=<n>``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, web_process(Path(tmp)) as (port, pid, log_path):
        asyncio.run(flood(port, 0.5, 4))  # warm up: imports, buffers, first log lines
        time.sleep(0.5)
        log_before, rss_before = log_path.stat().st_size, rss_bytes(pid)
        started = time.monotonic()
        counts = asyncio.run(flood(port, args.seconds, args.connections))
        elapsed = time.monotonic() - started
        time.sleep(0.5)  # let the last log lines reach the file
        log_bytes, rss_after = log_path.stat().st_size - log_before, rss_bytes(pid)
        tail = log_path.read_text(errors="replace").splitlines()[-3:]
    rejected = sum(n for code, n in counts.items() if code in (400, 401, 413))
    if rejected == 0 or set(counts) - {400, 401, 413}:
        sys.exit(f"unexpected answers: {counts}")
    per = log_bytes / rejected
    print(f"flood: {rejected} bad deliveries in {elapsed:.1f} s ({rejected / elapsed:.0f}/s), "
          f"answers {dict(sorted(counts.items()))}")
    print(f"log: {log_bytes} bytes in all, {per:.1f} bytes per rejection "
          f"(reference {REFERENCE_LOG_BYTES_PER_REJECTION} bytes, "
          f"{REFERENCE_LOG_BYTES_PER_REJECTION / max(per, 0.001):.0f}x more)")
    print(f"memory: RSS {rss_before / 2**20:.1f} MiB before, {rss_after / 2**20:.1f} MiB after "
          f"({(rss_after - rss_before) / 2**20:+.1f} MiB; reference grew to "
          f"{REFERENCE_RSS_BYTES / 2**30:.1f} GiB)")
    print("last log lines:", *tail, sep="\n  ")
    print(f"log_bytes_per_rejection={per:.1f}")


if __name__ == "__main__":
    main()
