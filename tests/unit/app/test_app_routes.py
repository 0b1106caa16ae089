"""Pure parts of routing: the rerun command, bot detection, payload field reads."""

from __future__ import annotations

from typing import Any

import pytest
from gidgethub.sansio import Event

from app.routes import router
from app.routes.decision import Decision
from app.routes.issue_comment import is_bot, is_rerun_command
from app.routes.payload import PayloadError, get_id, get_str, installation_id, repo_ref
from tests.unit.app_support import fixture_json


@pytest.mark.parametrize("body, expected", [
    ("/llmgate rerun", True),
    ("  /llmgate rerun  ", True),
    ("/llmgate rerun\nthe judge timed out", True),
    ("/llmgate rerun please", False),  # unknown form: a help reply, never a silent run
    ("/llmgate rerun --no-cache", True),
    ("/llmgate rerunx", False),
    ("/llmgate rerun.", False),
    ("/llmgate", False),
    ("please /llmgate rerun", False),
    ("comment `/llmgate rerun` to retry", False),
    ("/LLMGATE RERUN", False),
    ("", False),
])
def test_is_rerun_command(body: str, expected: bool) -> None:
    assert is_rerun_command(body) is expected


@pytest.mark.parametrize("user_type, login, expected", [
    ("User", "octocat", False), ("Bot", "llmgate", True), ("User", "llmgate[bot]", True),
    ("Organization", "bot-fans", False)])
def test_is_bot(user_type: str, login: str, expected: bool) -> None:
    assert is_bot(user_type, login) is expected


def test_field_reads_name_the_path() -> None:
    data: dict[str, Any] = {"a": {"b": "x", "n": 3, "flag": True, "neg": -1}}
    assert get_str(data, "a.b") == "x"
    assert get_id(data, "a.n") == 3
    for path, reader, message in [
        ("a.missing", get_str, "payload field a.missing is missing"),
        ("a.b.c", get_str, "payload field a.b.c is missing"),
        ("a.n", get_str, "payload field a.n must be a string"),
        ("a.flag", get_id, "payload field a.flag must be a positive integer"),
        ("a.neg", get_id, "payload field a.neg must be a positive integer"),
    ]:
        with pytest.raises(PayloadError) as caught:
            reader(data, path)  # type: ignore[operator]
        assert str(caught.value) == message


@pytest.mark.parametrize("installation, expected", [
    ({"id": 42}, 42), (None, None), ({}, None), ({"id": None}, None), ("x", None)])
def test_installation_id(installation: Any, expected: int | None) -> None:
    assert installation_id({"installation": installation}) == expected


def test_repo_ref_from_fixture() -> None:
    assert repo_ref(fixture_json("pull_request.synchronize.json")) == {
        "owner": "Codertocat", "name": "Hello-World",
        "clone_url": "https://github.com/Codertocat/Hello-World.git"}


async def test_router_combines_every_family() -> None:
    decisions = []
    for event, data in [("ping", {"zen": "z"}), ("push", {}), ("pull_request", {"action": "x"}),
                        ("pull_request", fixture_json("pull_request.synchronize.json"))]:
        decision = Decision()
        await router.dispatch(Event(data, event=event, delivery_id="d-1"), decision)
        decisions.append(decision.status)
    assert decisions == ["pong", "ignored", "ignored", "queued"]
