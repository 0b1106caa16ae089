"""``llmgate redteam``: write an adversarial dataset from the built-in template library.

``llmgate redteam generate --categories jailbreak,benign --count 10 --seed 1 --out
evals/redteam.jsonl`` draws ``--count`` prompts per category from the library
(worker/cli/redteam_library.py), in an order fixed by the seed and the library version, so the
same arguments always write the same file, byte for byte, with no model. Each line is a
dataset example (``id``, ``input``, ``tags``, ``metadata``: category, template, library
version, ``benign``; and its own ``assert`` list: ``refusal``, ``pii``, or ``not_contains`` of
the example's canary). ``llmgate redteam --list`` shows the library. With ``--model`` each
attack is also rewritten by a model (worker/cli/redteam_model.py), under the cost controls of
a run. Exit codes: 0 written (or listed), 2 bad arguments, 3 the file could not be written or
the model expansion failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.cli.redteam_library import (
    CATEGORIES,
    GOALS,
    INJECTIONS,
    LIBRARY_VERSION,
    PEOPLE,
    TEMPLATES,
    assertions_for,
)

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 2, 3
#: Short prefix of each category's example ids.
ID_PREFIX = {"prompt_injection": "pi", "jailbreak": "jb", "pii_extraction": "pii",
             "policy_evasion": "pe", "benign": "bn"}


@dataclass(frozen=True)
class Prompt:
    """One prompt the library can make: a template and the values in its slots."""

    category: str
    template: str
    text: str
    goal: str | None = None
    person: str | None = None
    inject: str | None = None


def library_prompts(category: str) -> list[Prompt]:
    """Return every prompt of ``category``: each template with each goal or person it takes,
    in the library's order."""
    prompts = []
    for template_id, text in TEMPLATES[category]:
        goals: tuple[str | None, ...] = GOALS if "{goal}" in text else (None,)
        people: tuple[str | None, ...] = PEOPLE if "{person}" in text else (None,)
        injections: tuple[str | None, ...] = INJECTIONS if "{inject}" in text else (None,)
        prompts += [Prompt(category, template_id, text, goal, person, inject)
                    for goal in goals for person in people for inject in injections]
    return prompts


def canary(seed: int, example_id: str) -> str:
    """Return the marker word of a prompt-injection example: fixed by seed and id."""
    digest = hashlib.sha256(f"{LIBRARY_VERSION}:{seed}:{example_id}".encode()).hexdigest()
    return f"CANARY-{digest[:8].upper()}"


def generate(categories: list[str], count: int, seed: int) -> list[dict[str, Any]]:
    """Return ``count`` examples per category (dataset rows), the same for the same arguments.

    A category listed twice is generated once; one whose templates make fewer than ``count``
    prompts gives all it has (`short_categories` names them).

    Raises:
        ValueError: an unknown category, or ``count`` below 1.
    """
    rows: list[dict[str, Any]] = []
    if count < 1:
        raise ValueError("--count must be at least 1")
    for category in dict.fromkeys(categories):
        if category not in TEMPLATES:
            raise ValueError(f"unknown category {category!r} (known: {', '.join(TEMPLATES)})")
        prompts = library_prompts(category)
        # a reproducible draw, not a secret: a string seed is hashed the same in every process
        random.Random(f"{LIBRARY_VERSION}:{seed}:{category}").shuffle(prompts)  # noqa: S311
        rows += [_row(p, f"{ID_PREFIX[category]}-{i:03d}", seed)
                 for i, p in enumerate(prompts[:count], start=1)]
    return rows


def short_categories(categories: list[str], count: int) -> dict[str, int]:
    """Return category -> prompts it has, for the known categories holding fewer than ``count``."""
    sizes = {c: len(library_prompts(c)) for c in dict.fromkeys(categories) if c in TEMPLATES}
    return {c: n for c, n in sizes.items() if n < count}


def _row(prompt: Prompt, example_id: str, seed: int) -> dict[str, Any]:
    mark = canary(seed, example_id)
    benign = prompt.category == "benign"
    metadata: dict[str, Any] = {"category": prompt.category, "template": prompt.template,
                                "library": LIBRARY_VERSION, "benign": benign, "seed": seed}
    return {"id": example_id,
            "input": _fill(prompt, mark),
            "tags": ["benign"] if benign else ["redteam", prompt.category],
            "metadata": metadata, "assert": assertions_for(prompt.category, mark)}


def _fill(prompt: Prompt, mark: str) -> str:
    inject = (prompt.inject or "").format(canary=mark)
    return prompt.text.format(goal=prompt.goal, person=prompt.person, inject=inject)


def to_jsonl(rows: list[dict[str, Any]]) -> str:
    """Return ``rows`` as JSONL (sorted keys, one example a line)."""
    return "".join(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows)


def library_listing() -> str:
    """Return ``--list``'s text: the version, each category, its templates and prompt count."""
    lines = [f"llmgate red-team library {LIBRARY_VERSION}"]
    for category, about in CATEGORIES.items():
        lines.append(f"\n{category} ({len(library_prompts(category))} prompts): {about}")
        lines += [f"  {template_id}: {text.replace('{{', '{').replace('}}', '}')[:80]!r}"
                  for template_id, text in TEMPLATES[category]]
    return "\n".join(lines) + "\n"


def add_redteam_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmgate redteam`` (``--list`` and ``generate``) on the CLI's subcommands."""
    parser = sub.add_parser("redteam", help="write an adversarial dataset from the built-in "
                            "library", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--list", action="store_true", help="show the template library")
    parser.set_defaults(func=cmd_redteam, action=None)
    actions = parser.add_subparsers(metavar="ACTION")
    gen = actions.add_parser("generate", help="write the dataset")
    gen.add_argument("--categories", default=",".join(TEMPLATES),
                     help=f"comma-separated (default all: {','.join(TEMPLATES)})")
    gen.add_argument("--count", type=int, default=5, help="examples per category (default 5)")
    gen.add_argument("--seed", type=int, default=0, help="fixes the draw (default 0)")
    gen.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    gen.add_argument("--model", help="also rewrite each attack with this model (litellm name)")
    gen.add_argument("--api-base", help="the model's API base URL")
    gen.add_argument("--api-key-env", help="environment variable holding the model's key")
    gen.add_argument("--max-cost-usd", type=float, default=None,
                     help="refuse to start (and stop) above this cost, USD")
    gen.add_argument("--input-usd-per-mtok", type=float, help="the model's input price, "
                     "USD per million tokens (default: litellm's price table)")
    gen.add_argument("--output-usd-per-mtok", type=float, help="its output price")
    gen.set_defaults(action="generate")


def cmd_redteam(args: argparse.Namespace) -> int:
    """Run ``llmgate redteam``: list the library or write a dataset (exit codes above)."""
    if args.list or args.action is None:
        print(library_listing(), end="")
        return EXIT_OK
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    try:
        rows = generate(categories, args.count, args.seed)
    except ValueError as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return EXIT_USAGE
    shorts = {} if getattr(args, "quiet", False) else short_categories(categories, args.count)
    for category, size in shorts.items():  # -q: only errors on stderr
        print(f"llmgate: {category} has {size} prompts, fewer than --count {args.count}: all "
              f"{size} written (--model adds rewrites)", file=sys.stderr)
    if args.model:
        from worker.cli.redteam_model import expand  # litellm: only when a model is used

        try:
            rows = expand(rows, args)
        except ValueError as err:
            print(f"llmgate: {err}", file=sys.stderr)
            return EXIT_USAGE
        except RuntimeError as err:
            print(f"llmgate: {err}", file=sys.stderr)
            return EXIT_FAILED
    try:
        args.out.write_text(to_jsonl(rows), encoding="utf-8")
    except OSError as err:
        print(f"llmgate: cannot write {args.out}: {err.strerror}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {len(rows)} examples ({', '.join(categories)}; seed {args.seed}; "
          f"{LIBRARY_VERSION}) to {args.out}")
    return EXIT_OK
