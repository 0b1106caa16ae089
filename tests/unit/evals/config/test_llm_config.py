"""Config of LLM suites: model targets, settings, traps, batch; errors at their line."""

from __future__ import annotations

import pytest

from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.llm_types import Endpoint, ModelTarget, Pricing, RetrySettings
from worker.evals.types import CommandTarget

FULL = """\
version: 1
settings:
  repeats: 3
  cache: false
  max_cost_usd: 2.5
  max_duration: 600
  retry: {max_retries: 4, backoff_base: 0.25, max_backoff: 30}
  max_provider_error_rate: 0.2
  max_judge_error_rate: 0
  judge: {model: openai/gpt-4o, params: {temperature: 0}}
  embedding: {model: openai/text-embedding-3-small}
  estimate_output_tokens: 100
suites:
  - name: support
    dataset: evals/t.jsonl
    target:
      model: openai/gpt-4o-mini
      prompt: prompts/support.txt
      params: {temperature: 0}
      base_url: http://127.0.0.1:8080/v1/
      api_key_env: OPENAI_API_KEY
      pricing: {input: 0.15, output: 0.6, cached_input: 0.075}
      version: 2
    assertions:
      - type: llm_judge
        rubric: Polite and correct.
    traps: evals/traps.jsonl
  - name: batch
    dataset: evals/t.jsonl
    target: {command: "run {input_file} {output_file}", batch: true}
"""


def test_everything_parses() -> None:
    config = parse_config(FULL)
    s = config.settings
    assert (s.repeats, s.cache, s.max_cost_usd, s.max_duration_s) == (3, False, 2.5, 600.0)
    assert s.retry == RetrySettings(4, 0.25, 30.0)
    assert (s.max_provider_error_rate, s.max_judge_error_rate) == (0.2, 0.0)
    assert s.judge == Endpoint("openai/gpt-4o", {"temperature": 0})
    assert s.embedding == Endpoint("openai/text-embedding-3-small")
    assert s.estimate_output_tokens == 100
    support, batch = config.suites
    assert support.target == ModelTarget(
        Endpoint("openai/gpt-4o-mini", {"temperature": 0}, "http://127.0.0.1:8080/v1",
                 "OPENAI_API_KEY", Pricing(0.15, 0.6, 0.075)), "prompts/support.txt", "2", 17)
    assert support.traps == "evals/traps.jsonl"
    assert isinstance(batch.target, CommandTarget) and batch.target.batch


def test_defaults() -> None:
    config = parse_config("version: 1\nsuites:\n  - name: s\n    dataset: d.jsonl\n"
                          "    target: {model: openai/x, prompt: p.txt}\n")
    s = config.settings
    assert (s.repeats, s.cache, s.max_cost_usd, s.max_duration_s) == (1, True, None, None)
    assert s.retry == RetrySettings(2, 0.5, 60.0) and s.judge is None
    assert config.suites[0].target == ModelTarget(Endpoint("openai/x"), "p.txt", "", 5)


def with_target(target: str, assertions: str = "", settings: str = "") -> str:
    return (f"version: 1\n{settings}suites:\n  - name: s\n    dataset: d.jsonl\n"
            f"    target: {target}\n{assertions}")


@pytest.mark.parametrize(("text", "line", "words"), [
    (with_target("{model: openai/x}"), 5, "needs `prompt`"),
    (with_target("{model: openai/x, prompt: ../p.txt}"), 5, "inside the repository"),
    (with_target("{model: openai/x, prompt: /etc/passwd}"), 5, "relative POSIX path"),
    (with_target("{model: '', prompt: p.txt}"), 5, "litellm model string"),
    (with_target("{model: m, prompt: p.txt, api_key: sk-123}"), 5, "unknown key 'api_key'"),
    (with_target("{model: m, prompt: p.txt, api_key_env: 'sk-live-123'}"), 5, "NAME"),
    (with_target("{model: m, prompt: p.txt, api_key_env: REDIS_URL}"), 5, "llmgate's own"),
    (with_target("{model: m, prompt: p.txt, api_base: 'ftp://x'}"), 5, r"http\(s\) URL"),
    (with_target("{model: m, prompt: p.txt, api_base: 'http://u:p@h/v1'}"), 5, "credentials"),
    (with_target("{model: m, prompt: p.txt, api_base: 'http://a', base_url: 'http://b'}"), 5,
     "not both"),
    (with_target("{model: m, prompt: p.txt, params: {timeout: 1}}"), 5, "may not set 'timeout'"),
    (with_target("{model: m, prompt: p.txt, params: {num_retries: 5}}"), 5, "num_retries"),
    (with_target("{model: m, prompt: p.txt, pricing: {input: 1}}"), 5, "`pricing` must be"),
    (with_target("{model: m, prompt: p.txt, pricing: {input: -1, output: 1}}"), 5,
     "non-negative"),
    (with_target("{command: 'x {input_file} {output_file}', batch: yes please}"), 5,
     "`batch` must be true or false"),
    (with_target("{model: m, prompt: p.txt}",
                 "    assertions:\n      - type: llm_judge\n        rubric: r\n"), 7,
     "has no model: set `model` or `settings.judge.model`"),
    (with_target("{model: m, prompt: p.txt}", "    assertions:\n      - type: similar\n"), 7,
     "settings.embedding.model"),
    (with_target("{model: m, prompt: p.txt}", settings="settings: {repeats: 0}\n"), 2,
     "`repeats` must be an integer >= 1"),
    (with_target("{model: m, prompt: p.txt}", settings="settings: {repeats: 1000}\n"), 2,
     "at most 100"),
    (with_target("{model: m, prompt: p.txt}", settings="settings: {max_cost_usd: 0}\n"), 2,
     "max_cost_usd"),
    (with_target("{model: m, prompt: p.txt}", settings="settings: {cache: 'no'}\n"), 2,
     "`cache` must be true or false"),
    (with_target("{model: m, prompt: p.txt}", settings="settings: {retry: {tries: 2}}\n"), 2,
     "unknown key 'tries'"),
    (with_target("{model: m, prompt: p.txt}",
                 settings="settings: {max_judge_error_rate: 1.5}\n"), 2, "from 0 to 1"),
    (with_target("{model: m, prompt: p.txt}", settings="settings: {judge: {params: {}}}\n"), 2,
     "`model` must be"),
    (with_target("{model: m, prompt: p.txt}") + "    traps: ../t.jsonl\n", 6,
     "inside the repository"),
])
def test_errors_name_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        parse_config(text)
    assert info.value.line == line
