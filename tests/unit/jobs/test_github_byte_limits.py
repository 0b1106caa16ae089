"""Issue 31, part 1: GitHub's length limits are bytes of UTF-8, not characters.

Field case: GitHub refuses a check run's ``output.summary`` over 65535 bytes ("summary exceeds
a maximum bytesize of 65535", github/docs#35252) though its docs say characters. A report rich
in non-ASCII text (CJK example inputs, emoji verdict marks) was fitted to 65535 *characters*,
about three times as many bytes, so GitHub refused the completion and the sticky comment. The
gate runs from a signed delivery through the App and the worker against the fake GitHub,
which counts as GitHub does.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import events_support
from tests.unit.github_real_support import TicketsPullRequest, only_run, only_sticky, refusals

github = events_support.github  # fixture

#: 40 examples, each about 1200 characters (CJK and emoji) and 4 KB of UTF-8.
ROWS = [{"id": f"q{i:02d}", "input": f"{i}: " + "検証の質問🚦" * 200, "expected": None}
        for i in range(40)]
for row in ROWS:
    row["expected"] = row["input"]


async def test_a_report_of_non_ascii_text_completes_its_check_run_and_comment(
        github: FakeGitHubServer, redis_url: str, tmp_path: Path) -> None:
    pull = TicketsPullRequest(tmp_path, ROWS)
    state = await pull.gate(github, redis_url)

    run = only_run(state)
    assert (run["head_sha"], run["status"], run["conclusion"]) == (
        pull.head_sha, "completed", "failure")
    assert run["output"]["title"] == "llmgate: fail, 40 regressions - tickets pass_rate 0.000 " \
                                     "(-1.000)"
    summary, text = run["output"]["summary"], run["output"]["text"]
    assert 0 < len(summary.encode()) <= 65535 and 60000 < len(text.encode()) <= 65535
    assert "q00" in text and "検証の質問🚦" in text  # the regressed examples, cut to whole ones
    assert text.rstrip().endswith("more regressed examples not shown (GitHub limits this text "
                                  "to 65535 bytes)")
    comment = only_sticky(state)
    assert len(comment["body"].encode()) <= 65535 and "llmgate: fail" in comment["body"]
    assert refusals(state) == [] and state["violations"] == []
