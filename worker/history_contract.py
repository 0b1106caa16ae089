"""The quality history's contract: Redis keys, record shapes (version 1) and their readers.

Both processes import this module: the workers write the history (worker/baselines/timeline.py),
the web process's dashboard reads it. So it imports nothing else of ``worker`` (it stands in the
bottom layer beside ``contract.py``) and its readers are plain redis-py calls.

A **run** is one default-branch push (``kind`` ``branch``: the suites at the pushed commit, side
``base``) or one pull request gate (``kind`` ``pull_request``: both sides of each suite, the
rule verdicts, the conclusion). Keys (``repo`` is ``owner/name``, which holds no ``:``)::

    llmgate:history:repos              sorted set: repo -> Unix s of its last record
    llmgate:history:<repo>:branch      sorted set: run id -> push time (Unix s); the newest
                                       `HistoryRetention.branch_runs` are kept
    llmgate:history:<repo>:prs         sorted set: run id -> gate time (Unix s); trimmed to
                                       `HistoryRetention.pr_days` and `MAX_PR_RUNS`
    llmgate:history:<repo>:run:<id>    hash: ``meta`` -> `RunMeta` JSON, ``s|<side>|<suite>``
                                       -> `SuiteRecord` JSON, ``c|<folder>`` -> `ConfigRecord`
                                       JSON, ``accept`` -> `AcceptRecord` JSON
    llmgate:history:<repo>:ex:<id>     hash: ``<side>|<suite>`` -> the examples, compact
                                       (`encode_examples`); a pull request gate's
                                       ``o|["<suite>","<id>"]`` -> one example's base and
                                       head outputs (`OutputRecord`, `output_field`)

A pull request gate's run hash also holds ``j`` -> its judges' agreement with the labelled set
where the gate calibrated one (`JudgeRecord` list JSON).

Run ids: a branch run is its commit SHA (a retried push job rewrites the same run); a pull
request gate is ``pr<number>-<check run id>`` (a retried gate job reuses its check run). Branch
runs never expire; a pull request gate's two keys expire `HistoryRetention.pr_days` after it
was recorded. A suite in a config's folder is named ``<folder>: <suite>``, as the gate's report
names it.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from redis.asyncio import Redis

#: Version of every record below; a record of another version is skipped by the readers.
HISTORY_VERSION = 1
HISTORY_PREFIX = "llmgate:history:"
REPOS_KEY = HISTORY_PREFIX + "repos"
#: Defaults of the retention (``LLMGATE_HISTORY_RUNS``, ``LLMGATE_HISTORY_PR_DAYS``).
DEFAULT_BRANCH_RUNS = 500
DEFAULT_PR_DAYS = 90
#: Most pull request gates kept per repository whatever their age (bounds the index).
MAX_PR_RUNS = 10_000
#: Example status codes of `ExampleRows` rows.
PASSED, FAILED, ERRORED, UNSCORED = 1, 0, 2, 3
#: Bounds on a pull request gate's recorded outputs: characters kept of each output, and
#: examples per suite (regressed first, then failing, then fixed).
MAX_OUTPUT_CHARS = 2_000
MAX_OUTPUT_EXAMPLES = 50
#: The run hash field of a pull request gate's judge agreement (`JudgeRecord` list).
JUDGES_FIELD = "j"
#: Examples encoded as JSON above this many bytes are stored zlib-compressed.
COMPRESS_OVER_BYTES = 512
_JSON, _ZLIB = b"j", b"z"

RunKind = Literal["branch", "pull_request"]
Side = Literal["base", "head"]


@dataclass(frozen=True)
class HistoryRetention:
    """How much history a repository keeps (read once at worker start-up).

    Attributes:
        branch_runs: default-branch runs kept per repository, the newest by push time
            (``LLMGATE_HISTORY_RUNS``, default 500; 0 records none).
        pr_days: days a pull request gate is kept (``LLMGATE_HISTORY_PR_DAYS``, default 90;
            0 records none).
    """

    branch_runs: int = DEFAULT_BRANCH_RUNS
    pr_days: int = DEFAULT_PR_DAYS

    def __post_init__(self) -> None:
        """Refuse what Redis could not honour whole.

        Raises:
            ValueError: a negative value, or more than 100,000 runs or 36,500 days (Redis
                refuses an expiry past about 1e11 days, and a refused EXPIREAT after the
                script's writes would leave a record that never expires).
        """
        if not (0 <= self.branch_runs <= 100_000 and 0 <= self.pr_days <= 36_500):
            raise ValueError(f"history retention out of range: {self.branch_runs} runs, "
                             f"{self.pr_days} days (0-100,000 runs, 0-36,500 days)")


class MetricRecord(TypedDict):
    """One metric of one suite at one side (fractions 0-1 for rates).

    ``ci_low``/``ci_high``: 95% interval of the side's own mean (Wilson for pass/fail values,
    normal approximation for scores), where the metric has per-example values and n >= 2.
    ``delta``, ``delta_ci_low``/``delta_ci_high`` and ``p_adjusted``: head - base, its 95%
    paired bootstrap interval and the adjusted p-value, as the gate's report has them (head side
    of a pull request gate only).
    """

    value: float
    ci_low: NotRequired[float]
    ci_high: NotRequired[float]
    delta: NotRequired[float]
    delta_ci_low: NotRequired[float]
    delta_ci_high: NotRequired[float]
    p_adjusted: NotRequired[float]


class VerdictRecord(TypedDict):
    """One gate rule's outcome for a suite: ``status`` is ``pass``, ``fail``, ``regression``,
    ``inconclusive`` or ``skipped``; ``group`` "" for the whole suite."""

    metric: str
    rule: str
    status: str
    group: str
    reason: str


class SuiteRecord(TypedDict):
    """One suite at one side of a run.

    ``examples`` counts example results (repeats included), ``passed`` those passed;
    ``cost_usd`` and ``provider_calls`` are what producing this side cost now (0 for a base
    reused from the baseline store); ``stopped`` why the suite stopped early ("" if not);
    ``verdicts`` the rules of the suite (head side of a pull request gate, else []).
    """

    suite: str
    side: Side
    dataset: str
    examples: int
    passed: int
    metrics: dict[str, MetricRecord]
    verdicts: list[VerdictRecord]
    cost_usd: float
    provider_calls: int
    cache_hits: int
    stopped: str


class ConfigRecord(TypedDict):
    """One config's part of a run: ``folder`` ("" for the root config) and ``duration_s``,
    the wall-clock seconds it took (a pull request gate: the whole gate, one record);
    ``report_url`` its stored report (a branch run's config, only when one was stored: its
    run's `RunMeta` links the last config's, `RunRecord` ``reports`` each one's)."""

    folder: str
    duration_s: float
    report_url: NotRequired[str]


class ReportLink(TypedDict):
    """A config's stored report of a branch run: its ``folder`` ("" root) and ``report_url``."""

    folder: str
    report_url: str


class AcceptRecord(TypedDict):
    """Who passed a blocked pull request gate (Accept regression or Let through) and when
    (Unix s)."""

    by: str
    at: float


class RunMeta(TypedDict):
    """What a run is, whatever its suites.

    ``sha`` is the commit whose quality the run shows (the pushed commit, or a pull request's
    head); ``base_sha`` the commit compared with ("" for a branch run); ``branch`` the pushed
    branch or the pull request's base branch; ``pr_number`` 0 for a branch run;
    ``created_at`` when it was recorded and ``order_s`` what orders the index (a push's
    ``pushed_at``), Unix s; ``conclusion`` the check conclusion (``stored`` for a branch run)
    with ``why``, the report's Why sentence; ``report_url``/``report_id`` the stored report
    (GET /reports/<id>, "" without ``LLMGATE_PUBLIC_URL``); ``check_run_id`` 0 for a branch run.
    """

    v: int
    kind: RunKind
    repo: str
    run_id: str
    sha: str
    base_sha: str
    branch: str
    pr_number: int
    created_at: float
    order_s: float
    conclusion: str
    why: str
    base_source: str
    report_url: str
    report_id: str
    check_run_id: int


class JudgeRecord(TypedDict):
    """One judge's agreement with people, measured by a pull request gate whose head changed a
    suite's judge (worker/pipeline/judge_trust.py runs it on base's labelled set).

    ``criterion`` is the judge's criterion; ``agreement`` the share (0-1) of labelled answers
    the judge rated as the people did, None when it could not be measured (judge errors);
    ``reference`` the agreement compared with (base's snapshot or base's judge), None without
    one; ``kappa`` Cohen's kappa (-1 to 1; Cohen 1960) and ``n`` the labelled answers rated,
    None when the report did not say; ``status`` the worst of its rules' outcomes (``fail``,
    ``inconclusive``, ``pass``).
    """

    suite: str
    criterion: str
    agreement: float | None
    reference: float | None
    kappa: float | None
    n: int | None
    status: str


class OutputRecord(TypedDict):
    """One example's outputs at base and head in a pull request gate, as its report showed them
    (redacted), each cut to `MAX_OUTPUT_CHARS`.

    ``change``: ``regressed`` (passed at base, fails at head), ``fixed`` (the reverse) or
    ``failing`` (fails at both, or only at head with no base result); ``base_status`` and
    ``head_status`` are status codes (`PASSED` ...; None: no result on that side); ``base`` and
    ``head`` the outputs as text (JSON for non-strings; a target error as ``error: <text>``),
    "" with no result; ``base_chars``/``head_chars`` their lengths before the cut.
    """

    suite: str
    example_id: str
    change: str
    base_status: int | None
    head_status: int | None
    base: str
    head: str
    base_chars: int
    head_chars: int


class RunRecord(RunMeta):
    """A run as the readers return it: `RunMeta`, its suites (``s|`` fields, sorted by suite
    then side), ``duration_s`` (the sum of its configs'), ``accepted`` (or None), ``judges``
    (`JudgeRecord`, [] when none was calibrated; absent in a static export's records),
    ``reports`` (each config's stored report, by folder; [] none; absent in a static export's
    records) and, from `get_run` only, ``examples``: ``<side>|<suite>`` -> `ExampleRows`."""

    suites: list[SuiteRecord]
    duration_s: float
    accepted: AcceptRecord | None
    judges: NotRequired[list[JudgeRecord]]
    reports: NotRequired[list[ReportLink]]
    examples: NotRequired[dict[str, ExampleRows]]


class ExampleRows(TypedDict):
    """The examples of one suite at one side, compact.

    ``metrics`` names the value columns; each row is ``[id, line, status, *values]``: the
    example id, its 1-based line in ``dataset`` (0 unknown), its status (`PASSED`, `FAILED`,
    `ERRORED`: the target gave no answer, `UNSCORED`: a provider or judge error) and one value
    per metric (rounded to 4 places, None when it has none). With repeats an example is one row:
    its values the mean of its draws, passed only when every scored draw passed.
    """

    dataset: str
    metrics: list[str]
    rows: list[list[Any]]


class ExamplePoint(TypedDict):
    """One example in one run (`example_history`): the run, its commit and time, the row."""

    run_id: str
    sha: str
    pr_number: int
    order_s: float
    status: int
    values: dict[str, float | None]


class OutputPoint(TypedDict):
    """One example's outputs in one pull request gate (`example_outputs`): the gate, its
    commits and time, and the `OutputRecord`."""

    run_id: str
    pr_number: int
    sha: str
    base_sha: str
    order_s: float
    output: OutputRecord


class RepoEntry(TypedDict):
    """A repository with history: ``owner/name`` and when it last got a record (Unix s)."""

    repo: str
    last_s: float


def branch_key(repo: str) -> str:
    """Return the key of a repository's default-branch run index."""
    return f"{HISTORY_PREFIX}{repo}:branch"


def prs_key(repo: str) -> str:
    """Return the key of a repository's pull request gate index."""
    return f"{HISTORY_PREFIX}{repo}:prs"


def run_key(repo: str, run_id: str) -> str:
    """Return the key of one run's hash (meta, suites, configs, acceptance)."""
    return f"{HISTORY_PREFIX}{repo}:run:{run_id}"


def examples_key(repo: str, run_id: str) -> str:
    """Return the key of one run's examples hash."""
    return f"{HISTORY_PREFIX}{repo}:ex:{run_id}"


def pr_run_id(pr_number: int, check_run_id: int) -> str:
    """Return the run id of a pull request gate: ``pr<number>-<check run id>``."""
    return f"pr{pr_number}-{check_run_id}"


def suite_field(side: str, suite: str) -> str:
    """Return the run hash field of a suite's record: ``s|<side>|<suite>``."""
    return f"s|{side}|{suite}"


def example_field(side: str, suite: str) -> str:
    """Return the examples hash field of a suite at a side: ``<side>|<suite>``."""
    return f"{side}|{suite}"


def output_field(suite: str, example_id: str) -> str:
    """Return the examples hash field of one example's outputs: ``o|`` + JSON
    ``[suite, example id]`` (either may hold ``|``)."""
    return "o|" + dumps([suite, example_id])


def dumps(value: Any) -> str:
    """Return compact JSON (UTF-8 text kept as is; NaN and infinities become null)."""
    return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def encode_examples(rows: ExampleRows | OutputRecord) -> bytes:
    """Return the stored bytes of ``rows`` (or of an `OutputRecord`): ``j`` + JSON, or ``z`` +
    zlib(JSON) above `COMPRESS_OVER_BYTES` (lone surrogates become U+FFFD, never raised)."""
    data = dumps(rows).encode("utf-8", "replace")
    if len(data) > COMPRESS_OVER_BYTES:
        return _ZLIB + zlib.compress(data, 6)
    return _JSON + data


def _decode_blob(raw: bytes) -> Any:
    mark, body = raw[:1], raw[1:]
    try:
        data = zlib.decompress(body) if mark == _ZLIB else body if mark == _JSON else b""
        return json.loads(data)
    except (zlib.error, ValueError):
        return None


def decode_output(raw: bytes) -> OutputRecord | None:
    """Return an `OutputRecord` stored by `encode_examples`, or None for other bytes."""
    doc = _decode_blob(raw)
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in (
            "suite", "example_id", "change", "base", "head")):
        return None
    return doc  # type: ignore[return-value]  # checked above: the fields the pages read


def decode_examples(raw: bytes) -> ExampleRows | None:
    """Return `encode_examples`'s rows, or None for bytes that are not such a record."""
    doc = _decode_blob(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        return None
    return ExampleRows(dataset=str(doc.get("dataset", "")), metrics=list(doc.get("metrics", [])),
                       rows=[r for r in doc["rows"] if isinstance(r, list) and len(r) >= 3])


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _json(raw: Any) -> Any:
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return None


def decode_run(fields: Mapping[Any, Any]) -> RunRecord | None:
    """Return the run of a run hash's fields (HGETALL), or None: absent (expired, trimmed) or
    not of `HISTORY_VERSION`."""
    got = {_text(k): v for k, v in fields.items()}
    meta = _json(got.get("meta"))
    if not isinstance(meta, dict) or meta.get("v") != HISTORY_VERSION:
        return None
    suites = [s for name, raw in sorted(got.items()) if name.startswith("s|")
              if isinstance(s := _json(raw), dict)]
    suites.sort(key=lambda s: (str(s.get("suite")), str(s.get("side"))))
    configs = [c for name, raw in got.items() if name.startswith("c|")
               if isinstance(c := _json(raw), dict)]
    accepted = _json(got.get("accept")) if "accept" in got else None
    judges = _json(got.get(JUDGES_FIELD)) if JUDGES_FIELD in got else None
    record: dict[str, Any] = {**meta, "suites": suites,
                              "duration_s": sum(float(c.get("duration_s") or 0) for c in configs),
                              "accepted": accepted if isinstance(accepted, dict) else None,
                              "judges": [j for j in judges if isinstance(j, dict)]
                              if isinstance(judges, list) else [],
                              "reports": sorted(
                                  ({"folder": str(c.get("folder") or ""),
                                    "report_url": str(c["report_url"])}
                                   for c in configs if c.get("report_url")),
                                  key=lambda link: link["folder"])}
    return record  # type: ignore[return-value]  # checked above: a version-1 RunMeta


async def _runs(redis: Redis, repo: str, ids: Sequence[Any]) -> list[RunRecord]:
    async with redis.pipeline(transaction=False) as pipe:
        for run_id in ids:
            pipe.hgetall(run_key(repo, _text(run_id)))
        found = await pipe.execute()
    return [run for fields in found if (run := decode_run(fields or {})) is not None]


async def list_repositories(redis: Redis, limit: int = 1000) -> list[RepoEntry]:
    """Return the repositories with history, the most recently recorded first.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    pairs = await redis.zrevrange(REPOS_KEY, 0, max(limit, 1) - 1, withscores=True)
    return [RepoEntry(repo=_text(name), last_s=float(score)) for name, score in pairs]


async def list_branch_runs(redis: Redis, repo: str, limit: int = 50,
                           offset: int = 0) -> list[RunRecord]:
    """Return a repository's default-branch runs, newest push first, without examples.

    ``limit`` runs from ``offset``; a run whose hash is gone is skipped.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    ids = await redis.zrevrange(branch_key(repo), max(offset, 0), max(offset, 0) + limit - 1)
    return await _runs(redis, repo, ids) if limit > 0 else []


async def list_pr_gates(redis: Redis, repo: str, limit: int = 50, offset: int = 0,
                        pr_number: int = 0) -> list[RunRecord]:
    """Return a repository's pull request gates, newest first, without examples; with
    ``pr_number``, only that pull request's (``limit``/``offset`` count its gates).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    if limit <= 0:
        return []
    if not pr_number:
        ids = await redis.zrevrange(prs_key(repo), max(offset, 0), max(offset, 0) + limit - 1)
        return await _runs(redis, repo, ids)
    mine = [i for i in await redis.zrevrange(prs_key(repo), 0, -1)
            if _text(i).startswith(f"pr{pr_number}-")]
    return await _runs(redis, repo, mine[max(offset, 0):max(offset, 0) + limit])


async def count_runs(redis: Redis, repo: str) -> tuple[int, int]:
    """Return how many (default-branch runs, pull request gates) a repository's indexes hold.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zcard(branch_key(repo))
        pipe.zcard(prs_key(repo))
        branch, prs = await pipe.execute()
    return int(branch), int(prs)


async def get_run(redis: Redis, repo: str, run_id: str) -> RunRecord | None:
    """Return one run with its examples (``examples``: ``<side>|<suite>`` -> rows), or None.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(run_key(repo, run_id))
        pipe.hgetall(examples_key(repo, run_id))
        fields, blobs = await pipe.execute()
    run = decode_run(fields or {})
    if run is None:
        return None
    run["examples"] = {_text(k): rows for k, v in (blobs or {}).items()
                       if not _text(k).startswith("o|")
                       if (rows := decode_examples(v)) is not None}
    return run


async def example_outputs(redis: Redis, repo: str, suite: str, example_id: str,
                          limit: int = 100) -> list[OutputPoint]:
    """Return one example's recorded outputs (`OutputRecord`) in the newest ``limit`` pull
    request gates, newest first; gates that recorded none for it are left out.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    pairs = await redis.zrevrange(prs_key(repo), 0, max(limit, 1) - 1, withscores=True)
    async with redis.pipeline(transaction=False) as pipe:
        for run_id, _ in pairs:
            pipe.hget(examples_key(repo, _text(run_id)), output_field(suite, example_id))
            pipe.hget(run_key(repo, _text(run_id)), "meta")
        found = await pipe.execute()
    points: list[OutputPoint] = []
    for (run_id, score), blob, raw_meta in zip(pairs, found[::2], found[1::2], strict=True):
        output = decode_output(blob) if blob is not None else None
        meta = _json(raw_meta)
        if output is None or not isinstance(meta, dict):
            continue
        points.append(OutputPoint(
            run_id=_text(run_id), pr_number=int(meta.get("pr_number") or 0),
            sha=str(meta.get("sha", "")), base_sha=str(meta.get("base_sha", "")),
            order_s=float(score), output=output))
    return points


async def judge_history(redis: Redis, repo: str, limit: int = 500) -> list[RunRecord]:
    """Return the pull request gates among the newest ``limit`` that measured a judge's
    agreement with people (``judges`` not empty), newest first, without examples.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    ids = await redis.zrevrange(prs_key(repo), 0, max(limit, 1) - 1)
    async with redis.pipeline(transaction=False) as pipe:
        for run_id in ids:
            pipe.hexists(run_key(repo, _text(run_id)), JUDGES_FIELD)
        present = await pipe.execute()
    return await _runs(redis, repo, [i for i, has in zip(ids, present, strict=True) if has])


async def example_history(redis: Redis, repo: str, suite: str, example_id: str, *,
                          side: Side = "base", kind: RunKind = "branch",
                          limit: int = 100) -> list[ExamplePoint]:
    """Return one example across a repository's runs, newest first: at ``side`` of ``suite``
    in the last ``limit`` runs of ``kind`` (``branch``: the default branch; ``pull_request``
    with ``side`` ``head``: the pull requests that ran it). Runs without it are left out.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    index = branch_key(repo) if kind == "branch" else prs_key(repo)
    pairs = await redis.zrevrange(index, 0, max(limit, 1) - 1, withscores=True)
    async with redis.pipeline(transaction=False) as pipe:
        for run_id, _ in pairs:
            pipe.hget(examples_key(repo, _text(run_id)), example_field(side, suite))
            pipe.hget(run_key(repo, _text(run_id)), "meta")
        found = await pipe.execute()
    points: list[ExamplePoint] = []
    for (run_id, score), blob, raw_meta in zip(pairs, found[::2], found[1::2], strict=True):
        rows = decode_examples(blob) if blob is not None else None
        row = next((r for r in rows["rows"] if r[0] == example_id), None) if rows else None
        meta = _json(raw_meta)
        if row is None or rows is None or not isinstance(meta, dict):
            continue
        points.append(ExamplePoint(
            run_id=_text(run_id), sha=str(meta.get("sha", "")),
            pr_number=int(meta.get("pr_number") or 0), order_s=float(score),
            status=int(row[2]), values=dict(zip(rows["metrics"], row[3:], strict=False))))
    return points
