"""Tests of `worker.gate.trust`: who is trusted, the policy, approvals in a real Redis."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis

from worker.gate.trust import (
    APPROVE_DESCRIPTION,
    APPROVE_LABEL,
    Approval,
    ApprovalStore,
    PullFacts,
    Verdict,
    decide,
    evaluate,
    policy_from_config,
    untrusted_reason,
    waiting_output,
)

BASE = "acme/bot"
SHA = "1a2b3c4d5e6f" + "0" * 28


@pytest.mark.parametrize(("facts", "permission", "reason"), [
    (PullFacts(BASE, BASE, "ann"), "write", ""),
    (PullFacts(BASE, "ACME/Bot", "ann"), "admin", ""),
    (PullFacts(BASE, BASE, "ann"), "maintain", ""),
    (PullFacts(BASE, BASE, "bob"), "read", "its author `bob` does not have write access "
                                           "(permission: read)"),
    (PullFacts(BASE, BASE, "eve"), "none", "its author `eve` does not have write access "
                                           "(permission: none)"),
    (PullFacts(BASE, BASE, "dependabot[bot]"), "none",
     "its author `dependabot[bot]` does not have write access (permission: none)"),
    (PullFacts(BASE, "mallory/bot", "mallory"), None, "it comes from the fork `mallory/bot`"),
    (PullFacts(BASE, "mallory/bot", "ann"), "admin", "it comes from the fork `mallory/bot`"),
    (PullFacts(BASE, None, "mallory"), None, "its head repository (a fork) has been deleted"),
])
def test_untrusted_reason(facts: PullFacts, permission: str | None, reason: str) -> None:
    assert untrusted_reason(facts, permission) == reason


def test_decide() -> None:
    approval = Approval("ann", "button", 1.0)
    assert decide("", "never", None) == Verdict("run", True)
    assert decide("fork", "run", None) == Verdict("run", False, "fork", "run")
    assert decide("fork", "never", approval) == Verdict("refuse", False, "fork", "never")
    assert decide("fork", "approve", None) == Verdict("wait", False, "fork", "approve")
    assert decide("fork", "approve", approval) == Verdict("run", False, "fork", "approve",
                                                          approval)


async def test_evaluate_calls_only_what_it_needs() -> None:
    calls: list[str] = []

    async def permission_of(login: str) -> str:
        calls.append(f"permission {login}")
        return {"ann": "write"}.get(login, "read")

    async def base_policy() -> str:
        calls.append("policy")
        return "approve"

    async def approval_of() -> Approval | None:
        calls.append("approval")
        return None

    trusted = await evaluate(PullFacts(BASE, BASE, "ann"), permission_of, base_policy,
                             approval_of)
    assert trusted == Verdict("run", True) and calls == ["permission ann"]
    calls.clear()
    fork = await evaluate(PullFacts(BASE, "m/bot", "ann"), permission_of, base_policy,
                          approval_of)
    assert fork.decision == "wait" and calls == ["policy", "approval"]  # no permission lookup


@pytest.mark.parametrize(("text", "policy"), [
    (None, "approve"),
    ("", "approve"),
    ("version: 1\nuntrusted: run\nsuites: []\n", "run"),
    ("version: 1\nuntrusted: never\n", "never"),
    ("version: 1\nuntrusted: always\n", "approve"),
    ("version: 1\nuntrusted: [run]\n", "approve"),
    ("settings: {untrusted: run}\n", "approve"),
    ("- untrusted: run\n", "approve"),
    ("untrusted: run\n: :\n", "approve"),
    ("a: &a [x, x]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}, "
                                f"*{'a' if i == 0 else f'b{i - 1}'}]\n" for i in range(30))
     + "untrusted: run\n", "approve"),
])
def test_policy_comes_from_the_base_config_and_falls_back_to_approve(text: str | None,
                                                                     policy: str) -> None:
    assert policy_from_config(text) == policy


def test_waiting_output_has_a_one_line_reason_and_a_valid_button() -> None:
    verdict = Verdict("wait", False, "it comes from the fork `mallory/bot`", "approve")
    output, actions = waiting_output(verdict, SHA)
    assert output["title"] == "llmgate: approval needed to run 1a2b3c4"
    first_line = output["summary"].split("\n")[0]
    assert first_line == "Not run: it comes from the fork `mallory/bot`, so its code is untrusted."
    assert "`/llmgate approve 1a2b3c4`" in output["summary"] and "@" not in output["summary"]
    assert actions == [{"label": "Approve and run", "description": APPROVE_DESCRIPTION,
                        "identifier": "approve"}]
    assert len(APPROVE_LABEL) <= 20 and len(APPROVE_DESCRIPTION) <= 40
    refused, none = waiting_output(Verdict("refuse", False, "it comes from the fork `m/b`",
                                           "never"), SHA)
    assert none == [] and "`untrusted: never`" in refused["summary"]


async def test_approvals_are_per_exact_head_sha_and_first_one_wins(redis_url: str) -> None:
    client = Redis.from_url(redis_url)
    raw = redis.Redis.from_url(redis_url)
    try:
        store = ApprovalStore(client)
        assert await store.get("acme/bot", 7, SHA) is None
        assert await store.approve("acme/bot", 7, SHA, "ann", "comment") is True
        assert await store.approve("acme/bot", 7, SHA, "bob", "button") is False
        approval = await store.get("acme/bot", 7, SHA)
        assert approval is not None and (approval.approver, approval.source) == ("ann", "comment")
        assert await store.get("acme/bot", 7, "f" * 40) is None  # a later push
        assert await store.get("acme/bot", 8, SHA) is None
        key = ApprovalStore.key("acme/bot", 7, SHA)
        assert key == f"llmgate:approval:acme/bot#7@{SHA}"
        assert 29 * 24 * 3600 < raw.ttl(key) <= 30 * 24 * 3600
        raw.set(key, b"{not json")
        assert await store.get("acme/bot", 7, SHA) is None
    finally:
        await client.aclose()
        raw.close()
