"""Perturbations of a multiple-choice question: seeded, reproducible variants (pure but plugins).

The original question is always variant 0 (``original``): the stem, then one ``A. text`` line per
option, with the dataset's labels. Built-in perturbations (the three of the CAT framework,
Cavalin et al., 2025, as the llm-consistency package generates them; the renderings below are
llmgate's own):

- ``option_reorder``: the options in another order, labelled A, B, C ... by position, so the
  right option's label moves with it; distinct orders, never the original one.
- ``format_change``: the same options and labels in another layout (``A) text``, ``(A) text``,
  ``A: text``, ``[A] text``, ``- A. text``, ``Option A: text``).
- ``separator_change``: the ``A. text`` options on one line joined by another separator
  (``; ``, `` | ``, ``, ``, `` / ``, a tab) or split by blank lines.

Each draws its variants with ``random.Random`` seeded by the suite's seed, the perturbation's
name and the question's id: the same seed gives the same variants on every machine, and one
question's variants do not depend on the others. A perturbation gives at most as many variants
as it has distinct ones (``option_reorder`` of two options has one).

Custom perturbations come from installed packages, entry-point group ``llmgate.perturbations``:
the entry point names a function ``fn(question: MCQuestion, n: int, seed: int) ->
Sequence[Variant]`` (its docstring's first line is its description in ``llmgate perturbations
list``). Every variant must show each of the question's options exactly once.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import math
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from worker.errors import ConfigError
from worker.evals.config.mc_dataset import MCOption, MCQuestion

ENTRY_POINT_GROUP = "llmgate.perturbations"
ORIGINAL = "original"


@dataclass(frozen=True)
class ShownOption:
    """An option as one variant shows it: its label there, its text, its label in the dataset."""

    label: str
    text: str
    original: str


@dataclass(frozen=True)
class Variant:
    """One way of asking a question: the text shown (stem and options) and its options."""

    text: str
    options: tuple[ShownOption, ...]


Generator = Callable[[MCQuestion, int, int], Sequence[Variant]]


def original(question: MCQuestion) -> Variant:
    """Return variant 0: the question as the dataset gives it."""
    shown = _same_labels(question.options)
    return Variant(_render(question.stem, shown, "{label}. {text}", "\n"), shown)


def _same_labels(options: Sequence[MCOption]) -> tuple[ShownOption, ...]:
    return tuple(ShownOption(o.label, o.text, o.label) for o in options)


def _render(stem: str, options: Sequence[ShownOption], layout: str, separator: str) -> str:
    lines = [layout.format(label=o.label, text=o.text) for o in options]
    return f"{stem}\n{separator.join(lines)}"


def _rng(name: str, question: MCQuestion, seed: int) -> random.Random:
    return random.Random(f"{seed}:{name}:{question.id}")  # noqa: S311 (reproducible, no secret)


def option_reorder(question: MCQuestion, n: int, seed: int) -> Sequence[Variant]:
    """The options in another order, relabelled A, B, C ... by position."""
    size = len(question.options)
    count = min(n, math.factorial(size) - 1)
    rng = _rng("option_reorder", question, seed)
    identity = tuple(range(size))
    orders: list[tuple[int, ...]]
    if size <= 6:
        pool = [p for p in itertools.permutations(identity) if p != identity]
        orders = rng.sample(pool, count)
    else:
        found: dict[tuple[int, ...], None] = {}
        while len(found) < count:
            drawn = list(identity)
            rng.shuffle(drawn)
            if tuple(drawn) != identity:
                found[tuple(drawn)] = None
        orders = list(found)
    labels = _labels(size)
    out = []
    for order in orders:
        shown = tuple(ShownOption(labels[i], question.options[j].text, question.options[j].label)
                      for i, j in enumerate(order))
        out.append(Variant(_render(question.stem, shown, "{label}. {text}", "\n"), shown))
    return out


def _labels(size: int) -> list[str]:
    letters = string.ascii_uppercase
    return [letters[i] if i < 26 else f"{letters[i // 26 - 1]}{letters[i % 26]}"
            for i in range(size)]


_LAYOUTS = ("{label}) {text}", "({label}) {text}", "{label}: {text}", "[{label}] {text}",
            "- {label}. {text}", "Option {label}: {text}")
_SEPARATORS = ("; ", " | ", ", ", " / ", "\t", "\n\n")


def format_change(question: MCQuestion, n: int, seed: int) -> Sequence[Variant]:
    """The same options and labels in another layout."""
    shown = _same_labels(question.options)
    layouts = _rng("format_change", question, seed).sample(_LAYOUTS, min(n, len(_LAYOUTS)))
    return [Variant(_render(question.stem, shown, layout, "\n"), shown) for layout in layouts]


def separator_change(question: MCQuestion, n: int, seed: int) -> Sequence[Variant]:
    """The ``A. text`` options joined by another separator."""
    shown = _same_labels(question.options)
    chosen = _rng("separator_change", question, seed).sample(_SEPARATORS,
                                                             min(n, len(_SEPARATORS)))
    return [Variant(_render(question.stem, shown, "{label}. {text}", sep), shown)
            for sep in chosen]


BUILTIN: dict[str, Generator] = {"option_reorder": option_reorder,
                                 "format_change": format_change,
                                 "separator_change": separator_change}


def installed() -> dict[str, importlib.metadata.EntryPoint]:
    """Return the custom perturbations of installed packages by name (group above)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def is_known(name: str) -> bool:
    """Return True when ``name`` is a built-in or installed perturbation."""
    return name in BUILTIN or name in installed()


def generator(name: str) -> Generator:
    """Return the perturbation called ``name``.

    Raises:
        ConfigError: no built-in or installed perturbation has that name, or its entry point
            does not load to a callable.
    """
    if name in BUILTIN:
        return BUILTIN[name]
    found = installed().get(name)
    if found is None:
        raise ConfigError("", None, f"unknown perturbation {name!r} (built-in: "
                          f"{', '.join(BUILTIN)}; or an entry point of {ENTRY_POINT_GROUP})")
    try:
        loaded = found.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is a config problem, shown
        raise ConfigError("", None, f"perturbation {name!r} does not load: {exc}") from None
    if not callable(loaded):
        raise ConfigError("", None, f"perturbation {name!r} is not a function")
    return loaded  # type: ignore[no-any-return]


def describe(name: str) -> str:
    """Return the first line of the perturbation's docstring ("" when it has none)."""
    try:
        doc = generator(name).__doc__ or ""
    except ConfigError as err:
        return err.message
    return doc.strip().split("\n")[0]


def variants(question: MCQuestion, name: str, n: int, seed: int) -> list[Variant]:
    """Return up to ``n`` variants of ``question`` by the perturbation ``name``.

    Raises:
        ConfigError: the perturbation is unknown, raises, or gives a variant that does not show
            each of the question's options exactly once.
    """
    make = generator(name)
    try:
        made = list(make(question, n, seed))[:n]
    except Exception as exc:  # noqa: BLE001 - a plugin's failure, shown with its name
        raise ConfigError("", question.line, f"perturbation {name!r} failed on question "
                          f"{question.id!r}: {exc}") from None
    want = sorted(o.label for o in question.options)
    for variant in made:
        if not isinstance(variant, Variant) \
                or sorted(o.original for o in variant.options) != want \
                or len({o.label for o in variant.options}) != len(want):
            raise ConfigError("", question.line, f"perturbation {name!r} gave a variant of "
                              f"question {question.id!r} that does not show each option once "
                              "under distinct labels")
    return made
