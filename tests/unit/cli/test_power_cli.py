"""``llmgate power``: examples needed for a drop, from a flip rate or a calibration record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.cli.main import main
from worker.evals.verdict import power


def test_power_from_a_given_flip_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--n", "300", "--drop", "0.05", "--flip-rate", "0.05"]) == 0
    out = capsys.readouterr().out
    assert f"detects drops >= {power.mdd_binary(300, 0.05, 0.05):.3f}" in out
    assert f"about {power.n_needed_binary(0.05, 0.05, 0.05)} paired examples" in out
    assert "about 369 paired examples" in out


def test_power_from_the_suites_measured_noise(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    record = {"runs": 5, "flip_rates": {"tickets": {"t1": 0.5, "t2": 0.25, "t3": 0.25}}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    assert main(["power", "--n", "300", "--calibration", str(path), "--examples", "20",
                 "--tests", "10"]) == 0
    out = capsys.readouterr().out
    assert "noise: 0.0250 flips per direction (measured: 3 of 20 examples flipped" in out
    assert f"about {power.n_needed_binary(0.05, 0.025, 0.005)} paired examples" in out


def test_power_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--n", "300"]) == 2
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    assert main(["power", "--n", "300", "--calibration", str(tmp_path / "bad.json")]) == 2
    assert main(["power", "--n", "0", "--flip-rate", "0.05"]) == 2
    assert "cannot read the calibration" in capsys.readouterr().err


def _record(tmp_path: Path, record: object) -> str:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return str(path)


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``llmgate power argv``, assert exit 2 and no output, return stderr's one line."""
    assert main(["power", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return err


TWO_SUITES = {"runs": 5, "flip_rates": {"tickets": {"t1": 0.5}},
              "history": {"tickets": {"t1": [1, 0, 1, 1, 1]}, "faq": {"f1": [1, 1, 1, 1, 1]}}}


def test_an_unknown_suite_is_refused_naming_the_suites_it_has(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 15 F5: --suite nosuch was ignored (exit 0 on the only suite)."""
    one = _record(tmp_path, {"runs": 5, "flip_rates": {"tickets": {"t1": 0.5}}})
    assert _refused(capsys, "--n", "300", "--calibration", one, "--suite", "nosuch") == (
        f"llmgate power: --suite nosuch: no such suite in the calibration {one} "
        "(its suites: tickets)\n")
    two = _record(tmp_path, TWO_SUITES)
    assert _refused(capsys, "--n", "300", "--calibration", two, "--suite", "nosuch") == (
        f"llmgate power: --suite nosuch: no such suite in the calibration {two} "
        "(its suites: tickets, faq)\n")
    assert _refused(capsys, "--n", "300", "--calibration", two) == (
        f"llmgate power: the calibration {two} has several suites (tickets, faq): give --suite\n")


def test_a_suite_measured_without_flips_has_no_noise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _record(tmp_path, TWO_SUITES)
    assert main(["power", "--n", "300", "--calibration", path, "--suite", "faq"]) == 0
    assert capsys.readouterr().out == (
        "noise: 0.0000 flips per direction (measured: 0 of 1 examples flipped in 5 identical "
        "runs)\n"
        "level per test: 0.05 (alpha 0.05 / 1 test)\n"
        f"at n = 300: detects drops >= {power.mdd_binary(300, 0.0, 0.05):.3f} with 80% power\n"
        f"to detect a drop of 0.05: about {power.n_needed_binary(0.05, 0.0, 0.05)} paired "
        "examples\n")


@pytest.mark.parametrize("record", [{}, {"runs": 5}])
def test_a_calibration_without_flip_rates_says_how_to_measure_them(
        record: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 15 F6a: the error was the KeyError's "'flip_rates'"."""
    path = _record(tmp_path, record)
    assert _refused(capsys, "--n", "300", "--calibration", path) == (
        f"llmgate power: the calibration {path} has no flip rates (no `flip_rates`): measure "
        f"them with `llmgate calibrate --format json --output {path}`\n")


def test_malformed_calibrations_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _record(tmp_path, [1])
    assert _refused(capsys, "--n", "300", "--calibration", path) == (
        f"llmgate power: cannot read the calibration {path}: not a record of "
        f"`llmgate calibrate --format json --output {path}` (a JSON object)\n")
    path = _record(tmp_path, {"flip_rates": {"tickets": {"t1": "half"}}})
    assert _refused(capsys, "--n", "300", "--calibration", path) == (
        f"llmgate power: the calibration {path}: `flip_rates` must map each suite to example "
        "ids and their flip rates from 0 to 1\n")
    missing = str(tmp_path / "missing.json")
    assert _refused(capsys, "--n", "300", "--calibration", missing) == (
        f"llmgate power: cannot read the calibration {missing}: No such file or directory\n")


@pytest.mark.parametrize(("argv", "line"), [
    (["--n", "1x"], "--n must be a whole number >= 2, got '1x'"),
    (["--n", "1"], "--n must be a whole number >= 2, got '1'"),
    (["--n", "-3"], "--n must be a whole number >= 2, got '-3'"),
    (["--n", "300", "--tests", "0"], "--tests must be a whole number >= 1, got '0'"),
    (["--n", "300", "--drop", "0"], "--drop must be a number above 0 and at most 1, got '0'"),
    (["--n", "300", "--drop", "5%"], "--drop must be a number above 0 and at most 1, got '5%'"),
    (["--n", "300", "--alpha", "1"], "--alpha must be a number between 0 and 1, got '1'"),
    (["--n", "300", "--power", "nan"], "--power must be a number between 0 and 1, got 'nan'"),
    (["--n", "300", "--flip-rate", "0.6"], None),
    (["--n", "300", "--calibration", "c.json", "--examples", "0"], None),
])
def test_each_bad_argument_is_named_with_its_value(
        argv: list[str], line: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 15 F6b: every bad argument got one catch-all message."""
    expected = {"--flip-rate": "--flip-rate must be a number from 0 to 0.5, got '0.6'",
                "--examples": "--examples must be a whole number >= 1, got '0'"}
    line = line or expected[argv[-2]]
    flips = [] if "--flip-rate" in argv or "--calibration" in argv else ["--flip-rate", "0.05"]
    assert _refused(capsys, *argv, *flips) == f"llmgate power: {line}\n"


def test_neither_flip_rate_nor_calibration_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _refused(capsys, "--n", "300") == (
        "llmgate power: give --flip-rate or --calibration (the file of "
        "`llmgate calibrate --format json`)\n")


def test_too_few_examples_for_any_drop_is_said_in_words(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 15 F6c: --n 1 printed "detects drops >= none up to 1"."""
    assert main(["power", "--n", "4", "--flip-rate", "0.05"]) == 0
    assert capsys.readouterr().out == (
        "noise: 0.0500 flips per direction (--flip-rate)\n"
        "level per test: 0.05 (alpha 0.05 / 1 test)\n"
        "at n = 4: no drop is detectable with 80% power (at level 0.05 a paired test needs at "
        "least 5 paired examples)\n"
        "to detect a drop of 0.05: about 369 paired examples\n")
    assert main(["power", "--n", "20", "--alpha", "1e-6", "--flip-rate", "0.05"]) == 0
    assert "at n = 20: no drop is detectable with 80% power\n" in capsys.readouterr().out


def test_help_states_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 15 F6d: --help did not say that --drop defaults to 0.05."""
    with pytest.raises(SystemExit):
        main(["power", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in ("(required)", "(default 0.05)", "one-sided alpha, between 0 and 1 (default "
                   "0.05)", "(default 1)", "(default 0.8)", "(default: none; give it or "
                   "--calibration)", "(default: none; give it or --flip-rate)",
                   "(default: its only suite)",
                   "(default: as many as the calibration lists, else --n)"):
        assert phrase in text
    assert "at most 1 (default 0.05)" in text


def test_the_examples_of_a_calibration_come_from_its_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Field case (tester, issue 15): --examples defaulted to --n, so 8 flips among a suite of
    120 read as 8 of 300 and understated the noise 2.5x; --examples 5 with 8 flipped passed."""
    history = {"s": {f"e{i}": [1, 1, 1] for i in range(120)}}
    rates = {"s": {f"e{i}": 0.5 for i in range(8)}}
    path = _record(tmp_path, {"runs": 3, "flip_rates": rates, "history": history})
    assert main(["power", "--n", "300", "--calibration", path]) == 0
    assert "noise: 0.0167 flips per direction (measured: 8 of 120 examples flipped in 3 " \
        "identical runs)" in capsys.readouterr().out
    assert _refused(capsys, "--n", "300", "--calibration", path, "--examples", "5") == (
        f"llmgate power: --examples 5: the calibration {path} has 8 examples of s that "
        "flipped, so the suite has at least as many\n")
    bare = _record(tmp_path, {"flip_rates": rates})
    assert main(["power", "--n", "300", "--calibration", bare]) == 0
    assert "(measured: 8 of 300 examples flipped between identical runs)" in \
        capsys.readouterr().out  # no run count: not "in ? identical runs"


def test_options_that_do_not_go_together_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Field case (tester, issue 15): --suite and --examples without --calibration were
    ignored, and --calibration beat --flip-rate without a word."""
    path = _record(tmp_path, TWO_SUITES)
    assert _refused(capsys, "--n", "300", "--flip-rate", "0.05", "--suite", "nosuch") == (
        "llmgate power: --suite needs --calibration (with --flip-rate there is no suite to "
        "measure)\n")
    assert _refused(capsys, "--n", "300", "--flip-rate", "0.05", "--examples", "10") == (
        "llmgate power: --examples needs --calibration (with --flip-rate there is no suite to "
        "measure)\n")
    assert _refused(capsys, "--n", "300", "--flip-rate", "0.01", "--calibration", path) == (
        "llmgate power: give --flip-rate or --calibration, not both\n")


def test_power_near_1_is_not_rounded_to_100_percent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--n", "300", "--flip-rate", "0.05", "--power", "0.999999"]) == 0
    assert "with 99.9999% power" in capsys.readouterr().out


def test_the_example_in_help_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Field case (tester, issue 15): the help's example lacked --flip-rate and exited 2."""
    with pytest.raises(SystemExit):
        main(["power", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    example = text.split("llmgate power ", 2)[2].split(" (or")[0]
    assert main(["power", *example.split()]) == 0


@pytest.mark.parametrize("argv", [["--alpha", "1e-17"], ["--tests", "100000000000000000"],
                                  ["--power", "0.9999999999999"]])
def test_a_level_too_small_to_compute_is_refused_not_a_traceback(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Field case (tester, issue 15): --alpha 1e-17 ended in a StatisticsError traceback."""
    err = _refused(capsys, "--n", "300", "--flip-rate", "0.02", *argv)
    assert "need a level per test and a miss rate of at least 1e-12" in err
