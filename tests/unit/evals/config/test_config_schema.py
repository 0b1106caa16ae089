"""The JSON Schema of ``.llmgate.yml`` agrees with the loader (worker/evals/config/load.py).

Every config the loader accepts (the examples, the docs' complete configs, a config using every
section) must be valid under the schema, and every broken config below is refused by both. The
schema's key sets are checked against the loader's, so a key added to one and not the other
fails here. The schema is shipped in the package and copied, byte for byte, to docs/.
"""

from __future__ import annotations

import json
import re
import tomllib
from fnmatch import fnmatch
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from worker.errors import ConfigError
from worker.evals.config import load
from worker.evals.config.load import CONFIG_SCHEMA, parse_config
from worker.evals.score.assertions import KNOWN_ASSERTIONS, validate_spec
from worker.evals.score.metrics import KNOWN_METRICS
from worker.evals.types import AssertionSpec

REPO = Path(__file__).resolve().parents[4]


@cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(CONFIG_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def loader_accepts(text: str) -> str | None:
    """Return None when the loader accepts ``text``, else its error."""
    try:
        parse_config(text)
    except ConfigError as err:
        return str(err)
    return None


def schema_errors(text: str) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator().iter_errors(yaml.safe_load(text))]


def doc_configs() -> list[tuple[str, str]]:
    """Return (place, text) of every complete config in a ```yaml block of the docs."""
    found = []
    for path in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        markdown = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^```ya?ml[^\n]*\n(.*?)^```", markdown, re.S | re.M):
            text = match.group(1)
            # a complete config starts with `version:`; `...` marks a fragment
            if re.search(r"^version:", text, re.M) and "..." not in text:
                line = markdown[:match.start()].count("\n") + 1
                found.append((f"{path.name}:{line}", text))
    return found


def example_configs() -> list[tuple[str, str]]:
    return [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8"))
            for p in sorted((REPO / "examples").glob("*/.llmgate.yml"))]


FULL = """\
version: 1
untrusted: approve
settings:
  timeout: 60
  concurrency: 4
  env: [OPENAI_API_KEY]
  repeats: 2
  cache: true
  max_cost_usd: 5
  max_duration: 1800
  retry: {max_retries: 2, backoff_base: 0.5, max_backoff: 60}
  max_provider_error_rate: 0.1
  max_judge_error_rate: 0.1
  judge: {model: openai/gpt-4o-mini, params: {temperature: 0}}
  embedding: {model: openai/text-embedding-3-small}
  estimate_output_tokens: 256
  base: tip
  on_paths_conclusion: skipped
  drafts: skip
  undecided: neutral
  checks: per_config
  statistics: {method: holm, primary_share: 0.8, group_share: 0.5, draws: 2000,
               confirm_flips: 0.25}
  sequential: {looks: 4, spending: pocock}
configs: [services/a]
suites:
  - name: bot
    dataset: evals/bot.csv
    columns: {input: question, expected: answer}
    target: {command: "python3 bot.py {input_file} {output_file}", batch: false}
    on_paths: ["prompts/**", "!prompts/README.md"]
    traps: evals/traps.jsonl
    judge: {labels: evals/labels.jsonl, min_agreement: 0.8, max_drift: 0.05}
    metrics:
      - {name: polite, type: python, function: evals/metrics.py:polite, per_example: true}
    assertions:
      - {type: contains, value: refund, case_sensitive: false}
      - {type: regex, pattern: "^ok", ignore_case: true}
      - {type: json_schema, schema: {type: object}}
      - {type: llm_judge, rubric: "Is it polite?", scale: pass_fail}
      - {type: recall_at_k, k: 5, min: 0.5}
      - {type: pii, categories: [email]}
    gate:
      pass_rate:
        min: 0.8
        max_drop: 0.05
        regression: {alpha: 0.05}
        primary: true
        min_detectable: {drop: 0.05, action: warn}
        max_new_failures: 2
        non_inferiority_margin: 0.03
      latency_p90: {max: 1500, max_increase: 200, max_increase_pct: 20}
      error_rate: {max: 0.1}
      mean_score: {max_example_drop: {by: 0.05, count: 0}}
      custom.polite: {min: 0.5}
      precision_refund: {min: 0.5}
      critical: {tag: must_pass, max_failures: 1}
      groups: {by: category, min_items: 5}
      on_inconclusive: neutral
      quarantine: [t17, 33]
  - name: agent
    dataset: evals/agent.jsonl
    target:
      model: openai/gpt-4o-mini
      prompt: prompts/agent.txt
      api_base: http://127.0.0.1:8080/v1
      api_key_env: MY_KEY
      pricing: {input: 0.15, output: 0.6}
      version: 2
      max_steps: 4
      tools:
        - name: lookup_order
          parameters: {type: object, properties: {order_id: {type: string}}}
          results: [{arguments: {order_id: A1}, result: {status: shipped}}]
          result: {status: unknown}
        - {name: refund, command: "python tools/refund.py {input_file} {output_file}"}
    assertions:
      - {type: tools_called, tools: [lookup_order]}
      - {type: max_tool_calls, max: 3}
  - name: quiz
    type: consistency
    dataset: evals/quiz.jsonl
    target: {model: openai/gpt-4o-mini, prompt: prompts/quiz.txt}
    consistency:
      perturbations: [{type: option_reorder, num_variants: 3}]
      seed: 0
      mca_threshold: 1.0
      agreement: 1.0
    gate:
      rc_agree: {min: 0.9}
"""

MINIMAL = """\
version: 1
suites:
  - name: s
    dataset: d.jsonl
    target: {command: "python3 b.py {input_file} {output_file}"}
"""

#: Configs the loader refuses, each a change of `MINIMAL` or of one of its lines.
BROKEN = {
    "unknown top key": MINIMAL + "extra: 1\n",
    "missing version": MINIMAL.replace("version: 1\n", ""),
    "version 2": MINIMAL.replace("version: 1", "version: 2"),
    "no suites": "version: 1\n",
    "empty suites": "version: 1\nsuites: []\n",
    "unknown settings key": MINIMAL + "settings: {timout: 60}\n",
    "timeout a word": MINIMAL + "settings: {timeout: fast}\n",
    "timeout too long": MINIMAL + "settings: {timeout: 7200}\n",
    "concurrency 0": MINIMAL + "settings: {concurrency: 0}\n",
    "repeats a boolean": MINIMAL + "settings: {repeats: true}\n",
    "env of llmgate's own": MINIMAL + "settings: {env: [LLMGATE_TOKEN]}\n",
    "unknown statistics key": MINIMAL + "settings: {statistics: {alpha: 0.1}}\n",
    "draws too few": MINIMAL + "settings: {statistics: {draws: 10}}\n",
    "sequential looks": MINIMAL + "settings: {sequential: {looks: 20}}\n",
    "untrusted unknown": MINIMAL + "untrusted: maybe\n",
    "forbidden judge param": MINIMAL + "settings: {judge: {model: m/x, params: {api_key: k}}}\n",
    "judge without model": MINIMAL + "settings: {judge: {params: {temperature: 0}}}\n",
    "retry too many": MINIMAL + "settings: {retry: {max_retries: 11}}\n",
    "unknown suite key": MINIMAL + "    datasets: e.jsonl\n",
    "suite without name": MINIMAL.replace("  - name: s\n    dataset", "  - dataset"),
    "suite without dataset": MINIMAL.replace("    dataset: d.jsonl\n", ""),
    "suite without target": MINIMAL.replace(
        '    target: {command: "python3 b.py {input_file} {output_file}"}\n', ""),
    "dataset absolute": MINIMAL.replace("d.jsonl", "/etc/d.jsonl"),
    "command without output_file": MINIMAL.replace(" {output_file}", ""),
    "unknown target key": MINIMAL.replace("target: {", "target: {shell: true, "),
    "batch a word": MINIMAL.replace("target: {", "target: {batch: yes please, "),
    "model target without prompt": MINIMAL.replace(
        'target: {command: "python3 b.py {input_file} {output_file}"}', "target: {model: m/x}"),
    "max_steps without tools": MINIMAL.replace(
        'target: {command: "python3 b.py {input_file} {output_file}"}',
        "target: {model: m/x, prompt: p.txt, max_steps: 3}"),
    "tool with command and result": MINIMAL.replace(
        'target: {command: "python3 b.py {input_file} {output_file}"}',
        "target: {model: m/x, prompt: p.txt, tools: [{name: t, command: x, result: 1}]}"),
    "api_key_env not a name": MINIMAL.replace(
        'target: {command: "python3 b.py {input_file} {output_file}"}',
        "target: {model: m/x, prompt: p.txt, api_key_env: my-key}"),
    "pricing without output": MINIMAL.replace(
        'target: {command: "python3 b.py {input_file} {output_file}"}',
        "target: {model: m/x, prompt: p.txt, pricing: {input: 1}}"),
    "unknown assertion type": MINIMAL + "    assertions: [{type: containz, value: a}]\n",
    "assertion without type": MINIMAL + "    assertions: [{value: a}]\n",
    "unknown assertion option": MINIMAL + "    assertions: [{type: contains, pattern: a}]\n",
    "assertion option wrong type": MINIMAL + "    assertions: [{type: equals, ignore_case: 1}]\n",
    "regex without pattern": MINIMAL + "    assertions: [{type: regex}]\n",
    "retrieval without k": MINIMAL + "    assertions: [{type: recall_at_k}]\n",
    "mc_answer outside consistency": MINIMAL + "    assertions: [{type: mc_answer}]\n",
    "unknown gate metric": MINIMAL + "    gate: {pass_rat: {min: 0.8}}\n",
    "unknown rule key": MINIMAL + "    gate: {pass_rate: {minimum: 0.8}}\n",
    "empty rule": MINIMAL + "    gate: {pass_rate: {}}\n",
    "min above 1": MINIMAL + "    gate: {pass_rate: {min: 80}}\n",
    "min on a lower-is-better metric": MINIMAL + "    gate: {latency_p90: {min: 100}}\n",
    "max on a higher-is-better metric": MINIMAL + "    gate: {pass_rate: {max: 0.9}}\n",
    "percent on a rate": MINIMAL + "    gate: {error_rate: {max_increase_pct: 10}}\n",
    "regression without alpha": MINIMAL + "    gate: {pass_rate: {regression: {}}}\n",
    "primary without regression": MINIMAL + "    gate: {pass_rate: {min: 0.8, primary: true}}\n",
    "on_inconclusive unknown": MINIMAL + "    gate: {on_inconclusive: maybe}\n",
    "critical without tag": MINIMAL + "    gate: {critical: {max_failures: 1}}\n",
    "empty on_paths": MINIMAL + "    on_paths: []\n",
    "judge without labels": MINIMAL + "    judge: {min_agreement: 0.8}\n",
    "metric without type": MINIMAL + "    metrics: [{name: m, function: m.py:f}]\n",
    "metric with two sources": MINIMAL
    + "    metrics: [{name: m, type: python, function: m.py:f, entry_point: e}]\n",
    "unknown suite type": MINIMAL + "    type: quiz\n",
    "consistency on an examples suite": MINIMAL + "    consistency: {seed: 1}\n",
    "consistency suite with assertions": MINIMAL
    + "    type: consistency\n    assertions: [{type: contains, value: a}]\n",
    "columns on a jsonl dataset": MINIMAL + "    columns: {input: q}\n",
    "configs empty": "version: 1\nconfigs: []\n",
    "discover a word": "version: 1\ndiscover: sure\n",
}


@pytest.mark.parametrize(("place", "text"), doc_configs() + example_configs()
                         + [("FULL", FULL), ("MINIMAL", MINIMAL),
                            ("a root of configs", "version: 1\ndiscover: true\n")])
def test_every_config_the_loader_accepts_is_schema_valid(place: str, text: str) -> None:
    assert loader_accepts(text) is None, place
    assert schema_errors(text) == [], place


def test_the_docs_and_examples_hold_configs_to_check() -> None:
    assert len(doc_configs()) >= 10
    assert len(example_configs()) >= 5


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_config_is_refused_by_loader_and_schema(case: str) -> None:
    text = BROKEN[case]
    assert loader_accepts(text) is not None, f"{case}: the loader accepts it"
    assert schema_errors(text), f"{case}: the schema accepts it"


def _props(schema: dict[str, Any], name: str) -> set[str]:
    return set(schema["$defs"][name]["properties"])


def test_the_schema_knows_the_loaders_keys() -> None:
    schema = validator().schema
    assert set(schema["properties"]) == set(load.TOP_KEYS)
    assert _props(schema, "settings") == set(load.SETTINGS_KEYS)
    assert _props(schema, "suite") == set(load.SUITE_KEYS)
    assert _props(schema, "command_target") == set(load.TARGET_KEYS)
    names = schema["$defs"]["gate"]["propertyNames"]["anyOf"][0]["enum"]
    assert set(KNOWN_METRICS) <= set(names)


def _loader_options(kind: str) -> set[str]:
    """Return the options the loader knows for assertion ``kind`` (from its error message)."""
    with pytest.raises(ConfigError) as err:
        validate_spec(AssertionSpec(kind, {"zz_unknown": 1}, 1), ".llmgate.yml")
    known = re.search(r"known options: (.*)\)", err.value.message)
    assert known is not None, err.value.message
    return set() if known[1] == "none" else set(known[1].split(", "))


def test_the_schema_knows_every_assertion_and_its_options() -> None:
    assertion = validator().schema["$defs"]["assertion"]
    kinds = assertion["properties"]["type"]["enum"]
    assert set(kinds) == set(KNOWN_ASSERTIONS) - {"mc_answer"}  # only consistency suites' own
    options = {branch["if"]["properties"]["type"]["const"]:
               set(branch["then"]["properties"]) - {"type"} for branch in assertion["allOf"]}
    assert options == {kind: _loader_options(kind) for kind in kinds}


def test_the_schema_is_shipped_in_the_package_and_copied_to_docs() -> None:
    assert (REPO / "docs" / "llmgate.schema.json").read_bytes() == CONFIG_SCHEMA.read_bytes()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    assert any(fnmatch(CONFIG_SCHEMA.name, pattern)
               for pattern in package_data.get("worker.evals.config", []))
    assert CONFIG_SCHEMA.parent == REPO / "worker" / "evals" / "config"


@pytest.mark.parametrize("target", ["command", "model"])
def test_init_writes_the_schema_modeline_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               target: str) -> None:
    from urllib.parse import unquote, urlsplit

    from worker.cli.main import EXIT_PASS, main

    monkeypatch.chdir(tmp_path)
    assert main(["init", "--target", target, "--ci", "none"]) == EXIT_PASS
    text = (tmp_path / ".llmgate.yml").read_text(encoding="utf-8")
    modeline = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", text.splitlines()[0])
    assert modeline is not None, text.splitlines()[0]
    url = urlsplit(modeline[1])
    assert url.scheme == "file" and Path(unquote(url.path)) == CONFIG_SCHEMA
    assert CONFIG_SCHEMA.is_file()
    assert loader_accepts(text) is None
    assert schema_errors(text) == []
