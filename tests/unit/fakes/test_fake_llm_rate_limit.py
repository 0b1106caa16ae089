"""The fake LLM provider's rate limit (``rate_limit`` setup), through real HTTP: token buckets
per API key, OpenAI's 429 body, and the retry-after and ``x-ratelimit-*`` headers."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLMServer, main, running_fake_llm
from tests.fakes.fake_rate_limit import go_duration

KEY = "Bearer sk-one"
UNITS_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
Served = tuple[FakeLLMServer, httpx.Client]


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """One fake for the module (a start and stop costs about 0.2 s); `limited` resets it."""
    with running_fake_llm() as llm, httpx.Client(base_url=llm.url, timeout=5) as client:
        yield llm, client


def limited(served: Served, rate_limit: dict[str, Any] | None) -> Served:
    llm, client = served
    llm.reset()
    llm.setup({"rate_limit": rate_limit, "latency_ms": 0})
    return llm, client


def chat(client: httpx.Client, text: str = "hi", key: str | None = KEY,
         **params: Any) -> httpx.Response:
    headers = {"authorization": key} if key else {}
    return client.post("/chat/completions", headers=headers, json={
        "model": "m", "messages": [{"role": "user", "content": text}], **params})


def embed(client: httpx.Client, texts: str | list[str], key: str = KEY) -> httpx.Response:
    return client.post("/embeddings", headers={"authorization": key},
                       json={"model": "e", "input": texts})


def parse_go_duration(text: str) -> float:
    """Seconds of a Go-style duration (``250ms``, ``1.5s``, ``6m0s``)."""
    assert re.fullmatch(r"(\d+(\.\d+)?(h|ms|m|s))+", text), text
    return sum(float(n) * UNITS_S[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", text))


def test_a_burst_is_admitted_then_refused_at_once_with_openai_body_and_retry_after(
        served: Served) -> None:
    llm, client = limited(served, {"requests_per_s": 2})
    assert [chat(client).status_code for _ in range(2)] == [200, 200]
    llm.setup({"latency_ms": 300})
    start = time.monotonic()
    refused = chat(client)
    assert time.monotonic() - start < 0.25  # a 429 waits no latency_ms
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("requests", None,
                                                              "rate_limit_exceeded")
    wait_ms = int(refused.headers["retry-after-ms"])
    assert 250 <= wait_ms <= 500  # a slow machine refills some between the requests
    assert re.fullmatch(r"Rate limit reached for requests per second \(RPS\): Limit 2, Used "
                        rf"[12], Requested 1\. Please try again in {wait_ms}ms\.",
                        error["message"]), error["message"]
    assert refused.headers["retry-after"] == "1"
    assert not any(h.startswith("x-ratelimit") for h in refused.headers)
    llm.setup({"latency_ms": 0})
    assert not any(h.startswith("x-ratelimit") for h in chat(client, key="other").headers)
    assert [(c["status"], c["fault"]) for c in llm.calls("chat")] == [
        (200, None), (200, None), (429, "rate_limited"), (200, None)]
    assert llm.fake.state()["rate_limit"] == {"admitted": 3, "refused": 1}


def test_the_bucket_refills_over_time(served: Served) -> None:
    _, client = limited(served, {"requests_per_s": 20, "request_burst": 1,
                                 "announce": "retry_after"})
    assert chat(client).status_code == 200
    refused = chat(client)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1" and "retry-after-ms" not in refused.headers
    [wait_ms] = re.findall(r"try again in (\d+)ms", refused.json()["error"]["message"])
    assert 0 < int(wait_ms) <= 50
    time.sleep(int(wait_ms) / 1000 + 0.005)
    assert chat(client).status_code == 200


def test_each_api_key_has_its_own_bucket(served: Served) -> None:
    llm, client = limited(served, {"requests_per_s": 1})
    assert chat(client, key="Bearer a").status_code == 200
    assert chat(client, key="Bearer a").status_code == 429
    assert chat(client, key="Bearer b").status_code == 200
    assert chat(client, key=None).status_code == 200
    assert embed(client, "x", key="Bearer b").status_code == 429
    assert [(c["authorization"], c["status"]) for c in llm.calls()] == [
        ("Bearer a", 200), ("Bearer a", 429), ("Bearer b", 200), (None, 200), ("Bearer b", 429)]


def test_the_token_bucket_counts_prompt_and_max_tokens(served: Served) -> None:
    llm, client = limited(served, {"requests_per_s": 100, "tokens_per_min": 6000,
                                   "token_burst": 100})
    assert chat(client, "one two three", max_tokens=90).status_code == 200  # 93 tokens
    refused = chat(client, "one two three", max_completion_tokens=90)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["type"] == "tokens"
    assert re.match(r"Rate limit reached for tokens per min \(TPM\): Limit 6000, Used "
                    r"(9[0-3]|8\d), Requested 93\. Please try again in \d+ms\.",
                    error["message"]), error
    assert 700 <= int(refused.headers["retry-after-ms"]) <= 860  # 86 tokens at 100/s
    assert chat(client, "one two three").status_code == 200  # 3 tokens fit
    refused = embed(client, ["a b c d", "e f g h"] * 5)  # 40 tokens
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "tokens"
    too_large = chat(client, "hi", key="Bearer fresh", max_tokens=100)
    assert too_large.status_code == 429
    assert too_large.json()["error"]["message"].startswith("Request too large for tokens")
    assert "retry-after" not in too_large.headers
    assert llm.fake.state()["rate_limit"] == {"admitted": 2, "refused": 3}


def _check_headers(headers: httpx.Headers, kind: str, rate_per_s: float) -> tuple[int, int]:
    limit = int(headers[f"x-ratelimit-limit-{kind}"])
    remaining = int(headers[f"x-ratelimit-remaining-{kind}"])
    reset_s = parse_go_duration(headers[f"x-ratelimit-reset-{kind}"])
    assert (limit - remaining) / reset_s == pytest.approx(rate_per_s, rel=0.05)
    return limit, remaining


def test_announce_headers_sends_openai_ratelimit_headers_on_every_answer(
        served: Served) -> None:
    _, client = limited(served, {"requests_per_s": 2, "request_burst": 4, "tokens_per_min": 6000,
                                 "token_burst": 500, "announce": "headers"})
    first = chat(client, "one two three four five", max_tokens=45)  # 50 tokens
    assert first.status_code == 200
    assert _check_headers(first.headers, "requests", 2) == (4, 3)
    assert _check_headers(first.headers, "tokens", 100) == (500, 450)
    assert _check_headers(embed(client, "x y").headers, "requests", 2) == (4, 2)
    assert [chat(client).status_code for _ in range(2)] == [200, 200]
    refused = chat(client)
    assert refused.status_code == 429 and refused.json()["error"]["type"] == "requests"
    assert "retry-after" not in refused.headers and "retry-after-ms" not in refused.headers
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert 1.8 < parse_go_duration(refused.headers["x-ratelimit-reset-requests"]) <= 2.0
    assert "x-ratelimit-limit-tokens" in refused.headers


def test_reset_refills_the_buckets_and_keeps_the_limit(served: Served) -> None:
    llm, client = limited(served, {"requests_per_s": 1})
    assert [chat(client).status_code for _ in range(2)] == [200, 429]
    llm.reset()
    assert llm.fake.state()["rate_limit"] == {"admitted": 0, "refused": 0}
    assert [chat(client).status_code for _ in range(2)] == [200, 429]
    control = f"http://127.0.0.1:{llm.port}/_fake"
    assert httpx.post(f"{control}/reset").status_code == 200
    assert chat(client).status_code == 200
    assert llm.fake.state()["config"]["rate_limit"]["requests_per_s"] == 1
    assert httpx.post(f"{control}/setup", json={"rate_limit": None}).status_code == 200
    assert [chat(client).status_code for _ in range(3)] == [200] * 3


def test_a_bad_rate_limit_is_refused(served: Served) -> None:
    llm, _ = limited(served, None)
    for bad in ({"request_burst": 2}, {"requests_per_s": 0}, {"requests_per_s": 1, "x": 1},
                {"requests_per_s": 1, "announce": "loud"}):
        answer = httpx.post(f"http://127.0.0.1:{llm.port}/_fake/setup",
                            json={"rate_limit": bad, "latency_ms": 5})
        assert answer.status_code == 400, bad
    assert llm.fake.state()["config"]["latency_ms"] == 0  # nothing merged
    with pytest.raises(SystemExit):
        main(["--rate-limit-announce", "headers"])


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.0501, "51ms"), (0.25, "250ms"), (1.5, "1.5s"), (12.04, "12.04s"),
    (360, "6m0s"), (3723.5, "1h2m3.5s")])
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
    assert parse_go_duration(text) == pytest.approx(seconds, abs=0.001)
