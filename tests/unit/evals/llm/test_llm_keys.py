"""The key of a provider call, on both paths: which variable is sent, and where it never goes.

The worker's key reaches the provider's ``Authorization`` header and nothing else: not an
error's message (masked as ``***`` when the provider quotes it), not a log record. Over real
HTTP against the fake provider, once through the direct client and once through litellm.
"""

from __future__ import annotations

import logging

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV
from worker.evals.llm import client as llm_client
from worker.evals.llm_types import Endpoint, ProviderError

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm_on_both_paths  # each test once per provider path

MESSAGES = [{"role": "user", "content": "ping number 1"}]
#: The value `llm_support.llm` gives ``KEY_ENV``.
NAMED_KEY = "sk-fake-test-key"
#: The worker's ``OPENAI_API_KEY``: sent for an ``openai/`` endpoint without ``api_key_env``.
DEFAULT_KEY = "sk-provider-env-key-1234"


async def test_the_key_sent_is_the_named_variable_else_openai_api_key_and_never_logged(
        llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DEFAULT_KEY)
    llm.setup({"default_reply": "ok"})
    with caplog.at_level(logging.INFO):
        for key_env in (KEY_ENV, None):
            endpoint = Endpoint("openai/test-model", {}, llm.url, key_env)
            assert (await llm_client.chat(endpoint, MESSAGES, 10)).text == "ok"
    assert [c["authorization"] for c in llm.calls("chat")] == [
        f"Bearer {NAMED_KEY}", f"Bearer {DEFAULT_KEY}"]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert NAMED_KEY not in logged and DEFAULT_KEY not in logged


async def test_the_key_is_masked_in_an_error_that_quotes_it(llm: FakeLLMServer) -> None:
    llm.setup({"faults": [{"status": 401, "body": {"error": {
        "message": f"Incorrect API key provided: {NAMED_KEY}"}}}]})
    with pytest.raises(ProviderError) as raised:
        await llm_client.chat(Endpoint("openai/test-model", {}, llm.url, KEY_ENV), MESSAGES, 10)
    err = raised.value
    assert (err.kind, err.status, err.retryable, err.field) == (
        "provider", 401, False, "api_key_env")
    assert NAMED_KEY not in err.message
    assert "Incorrect API key provided: ***" in err.message
