"""Options checked by membership (``in`` a tuple, set or dict) are type-checked first.

A list or mapping where a name is expected used to reach ``value in CRITERIA`` and crash
``llmgate run`` with ``TypeError: unhashable type``; each must be a config error on its line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.worker_support import ASSERTION_LINE, CONFIG, build_tiny_repo, commit
from worker.cli.main import EXIT_CONFIG_ERROR, main
from worker.errors import ConfigError
from worker.evals.score.assertions import validate_spec
from worker.evals.types import AssertionSpec

JUDGE = {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize(("kind", "params", "error"), [
    ("llm_judge", {"criterion": ["faithfulness"]},
     "`criterion` must be a string naming one built-in rubric (built in: faithfulness, "
     "answer_relevance, context_relevance, context_recall), got list ['faithfulness']; give "
     "one assertion per criterion"),
    ("llm_judge", {"criterion": {"faithfulness": True}},
     "`criterion` must be a string naming one built-in rubric (built in: faithfulness, "
     "answer_relevance, context_relevance, context_recall), got dict {'faithfulness': True}; "
     "give one assertion per criterion"),
    ("llm_judge", {"rubric": "polite", "scale": ["1-5"]}, "`scale` must be one of pass_fail, 1-5"),
    ("llm_judge", {"rubric": "polite", "scale": {"1-5": 1}},
     "`scale` must be one of pass_fail, 1-5"),
    ("refusal", {"expect": ["refuse"]}, "`expect` must be `refuse` (the default) or `comply`"),
    ("refusal", {"expect": {"refuse": 1}}, "`expect` must be `refuse` (the default) or `comply`"),
])
def test_a_list_or_mapping_where_a_name_belongs_is_a_config_error(
        kind: str, params: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        endpoint = JUDGE if kind == "llm_judge" else {}
        validate_spec(AssertionSpec(kind, {**params, **endpoint}, 9), ".llmgate.yml")
    assert caught.value.line == 9
    assert caught.value.message == f"assertion `{kind}`: {error}"


def test_llmgate_run_reports_a_listed_criterion_on_its_line_and_exits_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    build_tiny_repo(repo)
    judge = ("settings:\n  judge: {model: openai/m, api_base: 'http://127.0.0.1:9/v1'}\n"
             "  concurrency: 4\n")
    config = CONFIG.replace("settings:\n  concurrency: 4\n", judge).replace(
        "      - type: equals", "      - {type: llm_judge, criterion: [faithfulness]}")
    commit(repo, "pr/criterion", {".llmgate.yml": config}, "criterion as a list")
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--head", "pr/criterion"])
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG_ERROR
    assert err == (f"llmgate: configuration error: .llmgate.yml:{ASSERTION_LINE + 1}: assertion "
                   "`llm_judge`: `criterion` must be a string naming one built-in rubric (built "
                   "in: faithfulness, answer_relevance, context_relevance, context_recall), got "
                   "list ['faithfulness']; give one assertion per criterion\n")


@pytest.mark.parametrize(("kind", "error"), [
    ("llm_judge", "needs exactly one of `rubric` or `criteria` (what a good answer does), or "
     "`criterion` (built in: faithfulness, answer_relevance, context_relevance, context_recall)"),
    ("trajectory_judge", "needs exactly one of `rubric` or `criteria` (what a good answer does) "
     "(a built-in `criterion` is for `llm_judge` only)"),
    ("pairwise", "needs exactly one of `rubric` or `criteria` (what a good answer does) (a "
     "built-in `criterion` is for `llm_judge` only)"),
])
def test_a_judge_without_a_rubric_is_told_what_it_accepts(kind: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_spec(AssertionSpec(kind, dict(JUDGE), 4), ".llmgate.yml")
    assert (caught.value.line, caught.value.message) == (4, f"assertion `{kind}`: {error}")
