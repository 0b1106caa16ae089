"""Flakiness evidence from stored baselines (worker/baselines/history.py): never the base draw
under test, never a cached answer; the store's index of runs in a real Redis; and the
false-alarm rate of the sign-flip family with weights from stored runs, counted."""

from __future__ import annotations

import math

import numpy as np
from redis.asyncio import Redis

from worker.baselines.history import merged, stored_history
from worker.baselines.keys import BaselineKey
from worker.baselines.local import DirectoryStore
from worker.baselines.store import Baseline, BaselineSettings, BaselineStore
from worker.evals.types import ExampleResult, GateRule, StatisticsSettings, SuiteResult
from worker.evals.verdict.flakiness import history_weights
from worker.evals.verdict.paired import PairedSuite
from worker.evals.verdict.signflip import FamilySuite, example_history, family_p_values

REPO = "acme/bot"
KEY = BaselineKey("sim", "c" * 64, "d" * 64, "f" * 64)
METRICS = {"sim": ["pass_rate"]}


def run_of(passed: list[bool], cached: frozenset[int] = frozenset()) -> SuiteResult:
    examples = tuple(ExampleResult(f"e{i}", i + 1, p, False, "out", None, cached=i in cached)
                     for i, p in enumerate(passed))
    return SuiteResult("sim", "sim.jsonl", examples, {})


def record(sha: str, passed: list[bool], created_at: float, **kw: frozenset[int]) -> Baseline:
    return Baseline(REPO, sha, KEY, run_of(passed, **kw), "push", "main", 0, created_at)


def weights_of(history: dict[str, dict[str, dict[str, list[float]]]], n: int) -> np.ndarray:
    ids = tuple(f"e{i}" for i in range(n))
    empty = np.zeros((n, 1, 1))
    paired = PairedSuite(ids, ("pass_rate",), empty, empty, ("",) * n, (), ())
    suite = FamilySuite("sim", paired, {}, 5, history.get("sim"))
    return history_weights(example_history(suite))


def test_the_base_draw_under_test_never_changes_the_weights() -> None:
    earlier = [record("1" * 40, [True, True, False, True], 100.0),
               record("2" * 40, [True, False, False, True], 200.0),
               record("3" * 40, [True, True, False, False], 300.0)]
    base = record("b" * 40, [False, False, True, True], 400.0)  # the newest: this PR's base
    without = stored_history(earlier, METRICS, exclude_sha="b" * 40)
    with_base = stored_history([*earlier, base], METRICS, exclude_sha="b" * 40)
    assert with_base == without
    assert without["sim"]["pass_rate"]["e1"] == [1.0, 0.0, 1.0]  # newest first
    np.testing.assert_array_equal(weights_of(with_base, 4), weights_of(without, 4))
    # the base draw, if it were read, would change them: the exclusion is what keeps them
    assert not np.array_equal(weights_of(stored_history([*earlier, base], METRICS, "x"), 4),
                              weights_of(without, 4))
    # e0 passed in every earlier run, e1 flipped: e0 weighs more
    found = weights_of(without, 4)
    assert found[0, 0] > found[1, 0]


def test_cached_unscored_and_unknown_suites_are_no_evidence() -> None:
    earlier = [record("1" * 40, [True, False], 100.0, cached=frozenset({1})),
               record("2" * 40, [True, True], 200.0)]
    found = stored_history(earlier, METRICS, exclude_sha="b" * 40)
    assert found["sim"]["pass_rate"]["e0"] == [1.0, 1.0]
    second = found["sim"]["pass_rate"]["e1"]
    assert second[0] == 1.0 and math.isnan(second[1])
    assert stored_history(earlier, {"other": ["pass_rate"]}, exclude_sha="") == {}


def test_histories_merge_run_by_run() -> None:
    first = {"sim": {"pass_rate": {"e0": [1.0, 0.0], "e1": [1.0]}}}
    second = {"sim": {"pass_rate": {"e0": [1.0], "e2": [0.0]}}}
    found = merged(first, second)["sim"]["pass_rate"]
    assert found["e0"] == [1.0, 0.0, 1.0]
    assert found["e1"][0] == 1.0 and math.isnan(found["e1"][1])
    assert math.isnan(found["e2"][0]) and math.isnan(found["e2"][1]) and found["e2"][2] == 0.0


async def test_the_redis_store_lists_the_runs_of_a_key_newest_first(redis: Redis) -> None:
    store = BaselineStore(redis, BaselineSettings(ttl_s=3600))
    for sha, at in (("1" * 40, 100.0), ("3" * 40, 300.0), ("2" * 40, 200.0)):
        assert await store.put(record(sha, [True], at)) is None
    other = BaselineKey("sim", "c" * 64, "0" * 64, "f" * 64)  # another dataset: not the same runs
    await store.put(Baseline(REPO, "4" * 40, other, run_of([True]), "push", "main", 0, 400.0))
    assert [r.sha for r in await store.runs(REPO, KEY, 10)] == ["3" * 40, "2" * 40, "1" * 40]
    assert [r.sha for r in await store.runs(REPO, KEY, 2)] == ["3" * 40, "2" * 40]
    await redis.delete(f"llmgate:baseline:{REPO}:{'3' * 40}:{KEY.digest}")  # expired
    assert [r.sha for r in await store.runs(REPO, KEY, 10)] == ["2" * 40, "1" * 40]


async def test_the_directory_store_lists_the_runs_of_a_key(tmp_path) -> None:
    store = DirectoryStore(tmp_path)
    for sha, at in (("1" * 40, 100.0), ("2" * 40, 200.0)):
        assert await store.put(record(sha, [True], at)) is None
    assert [r.sha for r in await store.runs(REPO, KEY, 10)] == ["2" * 40, "1" * 40]
    assert await DirectoryStore(tmp_path / "none").runs(REPO, KEY, 10) == []


def test_false_alarms_with_weights_from_stored_runs_stay_under_alpha() -> None:
    """200 unchanged PRs (n = 100, flaky examples as in bench/gate_calibration.py), each
    weighted from 5 stored runs of earlier commits plus its own base record in the store
    (excluded): the sign-flip family fails at most as often as alpha allows. With p = 0.05
    the chance of 19 or more of 200 is 0.002, so the bound is a test that can fail."""
    rng = np.random.default_rng(15)
    options = StatisticsSettings(method="signflip", draws=500)
    rules = {"pass_rate": GateRule("pass_rate", regression_alpha=0.05)}
    n, alarms = 100, 0
    ids = tuple(f"e{i}" for i in range(n))
    for _ in range(200):
        p = rng.beta(0.4, 0.1, size=n)
        runs = rng.random((7, n)) < p  # 5 earlier stored runs, base, head
        records = [record(f"{k:040d}", runs[k].tolist(), float(k)) for k in range(6)]
        history = stored_history(records, METRICS, exclude_sha=f"{5:040d}")
        base, head = runs[5].astype(float), runs[6].astype(float)
        paired = PairedSuite(ids, ("pass_rate",), base[:, None, None], head[:, None, None],
                             ("",) * n, (), ())
        member = FamilySuite("sim", paired, rules, 5, history["sim"])
        alarms += any(a <= 0.05 for _, a in family_p_values([member], options).values())
    print(f"false alarms: {alarms}/200")
    assert alarms <= 18, alarms
