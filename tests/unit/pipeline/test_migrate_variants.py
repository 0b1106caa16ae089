"""The pure parts of ``llmgate migrate``: splits, variants, rewrites, diffs, folder names."""

from __future__ import annotations

import pytest

from worker.pipeline import migrate_variants as mv

ROWS = [{"id": f"r{i}", "input": f"q{i}", "expected": f"a{i}"} for i in range(10)]


def test_splits_are_seeded_disjoint_and_cover_every_row() -> None:
    one, again, other = mv.split_rows(ROWS, 7), mv.split_rows(ROWS, 7), mv.split_rows(ROWS, 8)
    assert one == again and one != other
    assert (len(one.train), len(one.validation), len(one.holdout)) == (5, 2, 3)
    ids = [r["id"] for part in (one.train, one.validation, one.holdout) for r in part]
    assert sorted(ids) == sorted(r["id"] for r in ROWS)
    assert [len(p) for p in (mv.split_rows(ROWS[:3], 0).train,)] == [1]
    with pytest.raises(ValueError, match="at least 3"):
        mv.split_rows(ROWS[:2], 0)


def test_rewrites_that_lose_a_variable_are_dropped() -> None:
    reply = (f"{mv.SEPARATOR}\nA {{{{ input }}}}\n{mv.SEPARATOR}\nno variable\n"
             f"{mv.SEPARATOR}\nB {{{{input}}}}\n")
    found, dropped = mv.parse_rewrites(reply, "Say {{ input }}", 3)
    assert [v.text for v in found] == ["A {{ input }}\n", "B {{input}}\n"] and dropped == 1
    assert mv.parse_rewrites(reply, "Say {{ input }}", 1)[1] == 2  # beyond the count too


def test_few_shot_uses_train_rows_with_a_reference() -> None:
    shots = mv.few_shot("P", ROWS[:3], 1)
    assert [v.name for v in shots] == ["few-shot 2"]
    assert shots[0].text.startswith("P\n\nExamples:\n\nInput: q")


def test_the_diff_applies_to_the_named_line_only() -> None:
    config = "a: openai/x\ntarget: {model: openai/x}\n"
    assert mv.with_model(config, 2, "openai/x", "openai/y") == \
        "a: openai/x\ntarget: {model: openai/y}\n"
    with pytest.raises(ValueError):
        mv.with_model(config, 3, "openai/x", "openai/y")
    assert mv.unified("p.txt", "same", "same") == ""
    assert mv.unified("p.txt", "a\n", "b\n").startswith("diff --git a/p.txt b/p.txt\n--- a/p.txt")


@pytest.mark.parametrize(("suite", "folder"), [("support", "support"), ("../../etc", "etc"),
                                               ("a/b c", "a-b-c"), ("..", "suite")])
def test_a_suite_name_cannot_leave_the_migrate_folder(suite: str, folder: str) -> None:
    assert mv.folder_name(suite) == folder
