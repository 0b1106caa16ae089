"""``llmgate perturbations list``."""

from __future__ import annotations

import pytest

from worker.cli.main import main
from worker.evals.config import perturbations


def test_lists_builtins_and_entry_points(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    class Point:
        value = "acme.perturb:shout"

        def load(self) -> object:
            def shout(question: object, n: int, seed: int) -> list[object]:
                """Shout the stem."""
                return []
            return shout

    monkeypatch.setattr(perturbations, "installed", lambda: {"shout": Point()})
    assert main(["perturbations", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "option_reorder", "format_change", "separator_change", "shout"]
    assert "entry point acme.perturb:shout  Shout the stem." in lines[3]
    assert "built-in  The options in another order" in lines[0]


def test_without_an_action_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perturbations"]) == 2
    assert "list" in capsys.readouterr().out
