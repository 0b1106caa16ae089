"""``type: consistency`` suites: their config section, and their questions as examples.

Config (every key of ``consistency`` optional; see docs/consistency.md)::

    suites:
      - name: quiz
        type: consistency
        dataset: evals/quiz.jsonl        # multiple-choice: worker/evals/config/mc_dataset.py
        target: {model: openai/gpt-4o-mini, prompt: prompts/quiz.txt}
        consistency:
          perturbations:                 # default: the three built-ins, 2 variants each
            - {type: option_reorder, num_variants: 3}
            - {type: format_change, num_variants: 2}
          seed: 0
          mca_threshold: 1.0             # c of the `mca` metric
          agreement: 1.0                 # tau of the `aga` metric
        gate:
          rc_agree: {min: 0.9, regression: {alpha: 0.05}}

Each question becomes one example per variant (worker/evals/config/perturbations.py), the
original first: id ``<question id>#v<n>``, ``input`` the question as shown (stem and options),
``expected`` the right option's label in that variant, and ``vars`` for a prompt template:
``question`` (= ``input``), ``stem``, ``options`` (``[{label, text}]`` as shown), ``labels``
(``"A, B, C"``), ``perturbation``, ``variant`` and ``question_id``. A command target gets the
same ``input`` and ``vars``. The suite's only assertion is ``mc_answer``
(worker/evals/score/mc_answer.py), which reads the option the answer names; ``assertions`` and
``traps`` are refused. So the run, the estimate (variants x questions calls), the cache and the
budget treat the variants as the examples they are.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from yaml.nodes import Node

from worker.errors import ConfigError
from worker.evals.config import perturbations
from worker.evals.config.dataset_formats import load_any, parse_any
from worker.evals.config.files import MAX_EXAMPLES
from worker.evals.config.mc_dataset import MCQuestion, load_questions, parse_questions
from worker.evals.config.reader import Entries, Reader
from worker.evals.config.spelling import as_written
from worker.evals.score import check_tool_names
from worker.evals.types import (
    AssertionSpec,
    ConsistencySpec,
    Example,
    PerturbationSpec,
    SuiteConfig,
)

SUITE_TYPES = ("examples", "consistency")
CONSISTENCY_KEYS = ("perturbations", "seed", "mca_threshold", "agreement")
PERTURBATION_KEYS = ("type", "num_variants")
#: Most variants one perturbation may add per question.
MAX_VARIANTS = 50
DEFAULT = ConsistencySpec(tuple(PerturbationSpec(name, 2) for name in perturbations.BUILTIN))


def suite_type(reader: Reader, entries: Entries, suite: SuiteConfig) -> SuiteConfig:
    """Apply a suite's ``type`` (and ``consistency``) keys to the parsed ``suite``.

    Raises:
        ConfigError: an unknown type, ``consistency`` on another type, ``assertions`` or
            ``traps`` on a consistency suite, or a malformed ``consistency`` section.
    """
    kind = reader.value(entries["type"][1]) if "type" in entries else "examples"
    if kind not in SUITE_TYPES:
        raise reader.error(entries["type"][1], f"suite `type` must be one of "
                           f"{', '.join(SUITE_TYPES)}, got {as_written(entries['type'][1])}")
    if kind != "consistency":
        if "consistency" in entries:
            raise reader.error(entries["consistency"][0], "`consistency` belongs to a suite "
                               "with `type: consistency`")
        if any(spec.type == "mc_answer" for spec in suite.assertions):
            raise reader.error(entries["assertions"][1], "`mc_answer` is the assertion of "
                               "`type: consistency` suites, which give it its options")
        return suite
    for key in ("assertions", "traps"):
        if key in entries:
            raise reader.error(entries[key][0], f"a consistency suite takes no `{key}`: each "
                               "answer is scored by the option it names (`mc_answer`)")
    spec = _spec(reader, entries["consistency"][1]) if "consistency" in entries else DEFAULT
    return replace(suite, consistency=spec,
                   assertions=(AssertionSpec("mc_answer", {}, suite.line),))


def _spec(reader: Reader, node: Node) -> ConsistencySpec:
    entries = reader.mapping(node, "`consistency`", CONSISTENCY_KEYS)
    spec = DEFAULT
    if "perturbations" in entries:
        items = reader.sequence(entries["perturbations"][1], "`consistency.perturbations`")
        if not items:
            raise reader.error(entries["perturbations"][1], "`perturbations` is empty")
        spec = replace(spec, perturbations=tuple(_perturbation(reader, i) for i in items))
    if "seed" in entries:
        seed = reader.value(entries["seed"][1])
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise reader.error(entries["seed"][1], "`seed` must be an integer, got "
                               f"{as_written(entries['seed'][1])}")
        spec = replace(spec, seed=seed)
    if "mca_threshold" in entries:
        spec = replace(spec, mca_threshold=reader.fraction(entries["mca_threshold"][1],
                                                           "`consistency.mca_threshold`"))
    if "agreement" in entries:
        spec = replace(spec, agreement=reader.fraction(entries["agreement"][1],
                                                       "`consistency.agreement`"))
    return spec


def _perturbation(reader: Reader, node: Node) -> PerturbationSpec:
    entries = reader.mapping(node, "a perturbation", PERTURBATION_KEYS)
    name = reader.string(entries["type"][1], "perturbation `type`") if "type" in entries \
        else None
    if name is None:
        raise reader.error(node, "a perturbation needs `type` (built-in: "
                           f"{', '.join(perturbations.BUILTIN)})")
    if not perturbations.is_known(name):
        raise reader.error(entries["type"][1], f"unknown perturbation {name!r} (built-in: "
                           f"{', '.join(perturbations.BUILTIN)}; custom ones are entry points "
                           f"of {perturbations.ENTRY_POINT_GROUP}: `llmgate perturbations list`)")
    count = reader.value(entries["num_variants"][1]) if "num_variants" in entries else 2
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_VARIANTS:
        raise reader.error(node, f"`num_variants` must be an integer from 1 to {MAX_VARIANTS}, "
                           f"got {as_written(entries['num_variants'][1])}")
    return PerturbationSpec(name, count)


def load_suite_dataset(root: Path, suite: SuiteConfig) -> tuple[Example, ...]:
    """Return the examples of ``suite`` at ``root``: its JSONL dataset, or for a consistency
    suite every variant of every question (module docstring); only the first ``suite.smoke``
    examples (questions) when it is set.

    Raises:
        ConfigError: the dataset is missing or invalid, or a perturbation fails.
    """
    if suite.consistency is None:
        return _offered(load_any(root, suite.dataset, dict(suite.columns))[:suite.smoke], suite)
    return expand(load_questions(root, suite.dataset)[:suite.smoke], suite.consistency,
                  suite.dataset)


def parse_suite_dataset(text: str, suite: SuiteConfig) -> tuple[Example, ...]:
    """Parse the text of ``suite``'s dataset into its examples (pure; see `load_suite_dataset`)."""
    if suite.consistency is None:
        return _offered(parse_any(text, suite.dataset, dict(suite.columns))[:suite.smoke], suite)
    return expand(parse_questions(text, suite.dataset)[:suite.smoke], suite.consistency,
                  suite.dataset)


def _offered(examples: tuple[Example, ...], suite: SuiteConfig) -> tuple[Example, ...]:
    """Return ``examples``, once their agent assertions name only the target's tools."""
    offered = [tool.name for tool in getattr(suite.target, "tools", ())]
    for example in examples if offered else ():
        for spec in example.assertions:
            def fail(message: str, spec: AssertionSpec = spec) -> ConfigError:
                return ConfigError(suite.dataset, spec.line, f"assertion `{spec.type}`: {message}")

            check_tool_names(spec, offered, fail)
    return examples


def expand(questions: tuple[MCQuestion, ...], spec: ConsistencySpec,
           path: str) -> tuple[Example, ...]:
    """Return the examples of every variant of every question, each question's original first.

    Raises:
        ConfigError: in ``path``, a perturbation fails or gives a malformed variant.
    """
    examples: list[Example] = []
    for question in questions:
        shown = [(perturbations.ORIGINAL, perturbations.original(question))]
        for p in spec.perturbations:
            try:
                made = perturbations.variants(question, p.name, p.num_variants, spec.seed)
            except ConfigError as err:
                raise ConfigError(path, err.line or question.line, err.message) from None
            shown.extend((p.name, v) for v in made)
        examples.extend(_example(question, index, name, variant, spec)
                        for index, (name, variant) in enumerate(shown))
        if len(examples) > MAX_EXAMPLES:
            raise ConfigError(path, question.line, f"the questions' variants make more than "
                              f"{MAX_EXAMPLES} examples (the limit of a suite): ask fewer "
                              "variants or split the dataset")
    return tuple(examples)


def _example(question: MCQuestion, index: int, name: str, variant: perturbations.Variant,
             spec: ConsistencySpec) -> Example:
    right = question.correct.label
    expected = next(o.label for o in variant.options if o.original == right)
    options = [{"label": o.label, "text": o.text} for o in variant.options]
    meta = {"question": question.id, "variant": index, "perturbation": name,
            "options": [[o.label, o.original, o.text] for o in variant.options],
            "correct": right, "mca_threshold": spec.mca_threshold,
            "agreement": spec.agreement}
    variables = {"question": variant.text, "stem": question.stem, "options": options,
                 "labels": ", ".join(o.label for o in variant.options), "perturbation": name,
                 "variant": index, "question_id": question.id}
    return Example(f"{question.id}#v{index}", question.line, variant.text, expected, variables,
                   metadata={"consistency": meta})
