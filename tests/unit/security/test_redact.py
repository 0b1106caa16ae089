"""Tests of `worker.security.redact`: known secrets leave no trace in reports, comments or log
lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from tests.fakes.fake_github import generate_app_keypair
from worker.errors import ConfigError
from worker.evals.types import GateReport, Regression, RuleOutcome
from worker.report import render as report
from worker.security.redact import (
    REDACTED,
    Redactor,
    install_log_redaction,
    secrets_from_environ,
    variants,
)

PROVIDER_KEY = "sk-proj-Zx81QmPq2LrT7vWb9"
TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"


@pytest.fixture()
def restore_logging() -> Iterator[None]:
    factory = logging.getLogRecordFactory()
    yield
    logging.setLogRecordFactory(factory)
    from worker.security import redact

    redact._installed.clear()


def test_exact_json_escaped_and_url_encoded_forms_are_redacted() -> None:
    secret = 'p@ss "word"/1234'
    redactor = Redactor([secret])
    for text in (f"x {secret} y", json.dumps({"k": secret}), "u=p%40ss%20%22word%22%2F1234"):
        assert secret not in redactor.redact(text)
        assert REDACTED in redactor.redact(text)
    assert redactor.redact(json.dumps({"k": secret})) == '{"k": "[redacted]"}'


def test_short_values_are_not_registered_and_repr_hides_secrets() -> None:
    redactor = Redactor(["abc", "", PROVIDER_KEY])
    assert redactor.redact("abc def") == "abc def"
    assert PROVIDER_KEY not in repr(redactor) and "Redactor(" in repr(redactor)
    assert len(redactor) == len(variants(PROVIDER_KEY))


def test_longest_form_wins_and_token_shapes_are_redacted_unknown() -> None:
    redactor = Redactor(["abcdefgh", "abcdefgh-ijkl"])
    assert redactor.redact("abcdefgh-ijkl!") == "[redacted]!"
    unknown = "gho_" + "A" * 36
    assert redactor.redact(f"token {unknown} end") == "token [redacted] end"
    assert redactor.redact("github_pat_" + "a1_" * 10) == "[redacted]"


def test_pem_key_whole_and_each_line() -> None:
    private_pem, _ = generate_app_keypair()
    redactor = Redactor([private_pem])
    assert redactor.redact(f"key:\n{private_pem}\nend") == "key:\n[redacted]\nend"
    body_line = private_pem.splitlines()[5]
    assert redactor.redact(f"model said {body_line}!") == "model said [redacted]!"
    assert Redactor().redact(private_pem) == "[redacted]\n"  # the PEM shape, unknown key


def test_secrets_from_environ() -> None:
    found = secrets_from_environ({
        "OPENAI_API_KEY": PROVIDER_KEY, "GITHUB_WEBHOOK_SECRET": "whsec-12345678",
        "LLMGATE_ENCRYPTION_KEYS": "key-one-aaaaaaaa,key-two-bbbbbbbb",
        "REDIS_URL": "redis://:redispass99@localhost:6379/0", "PATH": "/usr/bin:/bin",
        "HOME": "/root", "SHORT_TOKEN": "abc", "MY_PASSWORD": "hunter2hunter2"})
    assert set(found) >= {PROVIDER_KEY, "whsec-12345678", "key-one-aaaaaaaa", "key-two-bbbbbbbb",
                          "redispass99", "hunter2hunter2"}
    assert "/usr/bin:/bin" not in found and "abc" not in found and "/root" not in found


def _report() -> GateReport:
    regression = Regression("tickets", "evals/t.jsonl", 3, "t3", "billing",
                            "billing", f"Sure! The key is {PROVIDER_KEY}.", "not equal")
    outcome = RuleOutcome("tickets", "pass_rate", "min 0.80", 1.0, 0.5, -0.5, "fail",
                          f"token {TOKEN} leaked")
    return GateReport("failure", (outcome,), (regression,), None, None,
                      notes=(f"note with {PROVIDER_KEY}",))


def test_a_whole_report_is_redacted_before_rendering() -> None:
    redactor = Redactor([PROVIDER_KEY])
    redactor.add(TOKEN)
    clean = redactor.redact_value(_report())
    rendered = [report.check_title(clean), report.check_summary(clean), report.check_text(clean),
                json.dumps(report.annotations(clean)), report.render_json(clean),
                report.comment_body(clean, head_sha="a" * 40, base_sha="b" * 40)]
    for text in rendered:
        assert PROVIDER_KEY not in text and TOKEN not in text
    assert "The key is [redacted]." in report.check_text(clean)
    assert clean.regressions[0].expected == "billing"  # untouched where there is no secret


def test_config_error_and_deep_values() -> None:
    redactor = Redactor([PROVIDER_KEY])
    err = redactor.redact_value(ConfigError("a.yml", 2, f"bad {PROVIDER_KEY}"))
    assert isinstance(err, ConfigError) and (err.line, err.message) == (2, "bad [redacted]")
    deep: object = PROVIDER_KEY
    for _ in range(200):
        deep = [deep]
    flat = json.dumps(redactor.redact_value(deep))
    assert PROVIDER_KEY not in flat and REDACTED in flat
    assert redactor.redact_value({PROVIDER_KEY: (1, None, 2.5)}) == {REDACTED: (1, None, 2.5)}


def test_every_log_record_is_redacted(restore_logging: None,
                                      caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor([PROVIDER_KEY])
    undo = install_log_redaction(redactor)
    logger = logging.getLogger("llmgate.test.redact")
    with caplog.at_level(logging.INFO, logger="llmgate.test.redact"):
        logger.info("calling with key=%s", PROVIDER_KEY)
        redactor.add(TOKEN)  # a token minted later is redacted from then on
        logger.warning("git said %r", {"auth": TOKEN})
        try:
            raise RuntimeError(f"boom {PROVIDER_KEY}")
        except RuntimeError:
            logger.exception("failed")
    undo()
    assert PROVIDER_KEY not in caplog.text and TOKEN not in caplog.text
    assert [r.getMessage() for r in caplog.records] == [
        "calling with key=[redacted]", "git said {'auth': '[redacted]'}", "failed"]
    assert "RuntimeError: boom [redacted]" in caplog.text
    logger.info("after undo %s", PROVIDER_KEY)  # the factory is gone again
    assert logging.getLogRecordFactory() is not None
