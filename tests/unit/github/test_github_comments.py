"""The sticky PR comment: one per PR, found across pages, edited in place."""

from __future__ import annotations

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import OWNER, REPO, requests_for
from worker.contract import COMMENT_MARKER
from worker.github.client import GitHubClient
from worker.github.comments import upsert_sticky_comment, with_marker
from worker.github.limits import MAX_COMMENT_BYTES

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh
PR = 7
#: The fake App's bot login (its default slug ``llmgate``).
BOT = "llmgate[bot]"


def _seed(n: int, **extra: str) -> list[dict[str, object]]:
    return [{"owner": OWNER, "repo": REPO, "issue_number": PR, "body": f"lgtm {i}", **extra}
            for i in range(n)]


def test_with_marker() -> None:
    assert with_marker("## Report") == f"{COMMENT_MARKER}\n## Report"
    assert with_marker(f"x\n{COMMENT_MARKER}") == f"x\n{COMMENT_MARKER}"
    long = with_marker("y" * (MAX_COMMENT_BYTES + 10) + COMMENT_MARKER)
    assert len(long.encode()) <= MAX_COMMENT_BYTES and long.startswith(COMMENT_MARKER)


async def test_create_then_edit_the_same_comment_after_100_others(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    # 120 earlier comments, one of them a person quoting the marker: never ours to edit
    seeds = _seed(119) + [{**_seed(1)[0], "body": f"{COMMENT_MARKER} quoted by a human"}]
    fake_gh.setup({"comments": seeds})
    first = await upsert_sticky_comment(client, OWNER, REPO, PR, "run 1", bot_login=BOT)
    second = await upsert_sticky_comment(client, OWNER, REPO, PR, "run 2", bot_login=BOT)
    state = fake_gh.state()
    assert first == second
    ours = [c for c in state["comments"] if c["user"]["type"] == "Bot"]
    assert [c["id"] for c in ours] == [first]
    assert ours[0]["history"] == [f"{COMMENT_MARKER}\nrun 1", f"{COMMENT_MARKER}\nrun 2"]
    assert len(state["comments"]) == 121
    assert state["comments"][119]["history"] == [f"{COMMENT_MARKER} quoted by a human"]
    # each upsert walked both pages before deciding (121 comments, 100 per page)
    assert len(requests_for(state, "issues/list-comments")) == 4
    assert state["violations"] == []


async def test_finds_the_sticky_comment_on_a_later_page(client: GitHubClient,
                                                        fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"comments": _seed(130) + [{**_seed(1)[0], "body": f"{COMMENT_MARKER}\nold",
                                              "user_login": "llmgate[bot]",
                                              "user_type": "Bot"}] + _seed(20)})
    comment_id = await upsert_sticky_comment(client, OWNER, REPO, PR, "new", bot_login=BOT)
    state = fake_gh.state()
    assert state["comments"][130]["id"] == comment_id
    assert state["comments"][130]["body"] == f"{COMMENT_MARKER}\nnew"
    assert requests_for(state, "issues/create-comment") == []


async def test_identical_body_is_not_sent_again(client: GitHubClient,
                                                fake_gh: FakeGitHubServer) -> None:
    first = await upsert_sticky_comment(client, OWNER, REPO, PR, "same", bot_login=BOT)
    assert await upsert_sticky_comment(client, OWNER, REPO, PR, "same", bot_login=BOT) == first
    assert requests_for(fake_gh.state(), "issues/update-comment") == []


async def test_another_bots_marker_is_never_ours(
        client: GitHubClient, fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"comments": [{**_seed(1)[0], "body": COMMENT_MARKER,
                                 "user_login": "other[bot]", "user_type": "Bot"}]})
    comment_id = await upsert_sticky_comment(client, OWNER, REPO, PR, "mine", bot_login=BOT)
    state = fake_gh.state()
    assert [c["id"] for c in state["comments"]][-1] == comment_id
    assert state["comments"][0]["history"] == [COMMENT_MARKER]
