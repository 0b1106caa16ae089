"""``llmgate dataset check|import|add``: look after a suite's examples.

- ``check FILE``: parse it as ``llmgate run`` does (any format of
  worker/evals/config/dataset_formats.py, or the multiple-choice questions of a consistency
  suite: worker/cli/dataset_questions.py) and report what the gate cannot use well: duplicate
  inputs, examples without an id (ids that move with lines; the paired rules need ids), the
  label balance of ``expected`` (a label over `MAJORITY` of the examples), and examples no
  assertion can fail (no assertion of their own and, with ``--config``, none in their suite).
  Exit 0 clean, 1 findings, 2 the file is invalid (its line named).
- ``import --from FILE --to OUT.jsonl``: convert any supported format (CSV with ``--column
  key=name``) to JSONL, the format diffs and annotations read best.
- ``add FILE --input TEXT``: append one example (``--id``, ``--expected``, ``--contains``) to a
  JSONL dataset, refusing a duplicate id.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from worker.errors import ConfigError

#: A label held by more than this fraction (0-1) of the examples is reported as imbalanced.
MAJORITY = 0.8


def add_dataset_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``llmgate dataset check|import|add``."""
    dataset = sub.add_parser("dataset", help="check, import and add examples",
                             description="Check, convert and extend datasets.")
    actions = dataset.add_subparsers(metavar="ACTION")
    check = actions.add_parser("check", help="duplicates, missing ids, label balance, "
                                             "examples no assertion can fail")
    check.add_argument("file", type=Path)
    check.add_argument("--config", type=Path, default=None,
                       help="the .llmgate.yml whose suites use FILE (their assertions count)")
    check.add_argument("--column", action="append", default=[], metavar="KEY=NAME",
                       help="a CSV column mapping, as the suite's `columns:`")
    check.set_defaults(func=cmd_check)
    convert = actions.add_parser("import", help="convert JSON, YAML or CSV to JSONL")
    convert.add_argument("--from", dest="source", type=Path, required=True)
    convert.add_argument("--to", dest="target", type=Path, required=True)
    convert.add_argument("--column", action="append", default=[], metavar="KEY=NAME")
    convert.set_defaults(func=cmd_import)
    add = actions.add_parser("add", help="append one example to a JSONL dataset")
    add.add_argument("file", type=Path)
    add.add_argument("--input", required=True)
    add.add_argument("--id", default=None)
    add.add_argument("--expected", default=None)
    add.add_argument("--contains", action="append", default=[],
                     help="a `contains` assertion of the example (repeatable)")
    add.set_defaults(func=cmd_add)
    dataset.set_defaults(func=lambda args: _help(dataset))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _columns(pairs: list[str]) -> dict[str, str]:
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def _read(path: Path, columns: dict[str, str]) -> tuple[Any, ...]:
    from worker.evals.config import parse_any

    return parse_any(path.read_text(encoding="utf-8-sig"), path.as_posix(), columns)


def _suite_assertions(config: Path | None, dataset: Path) -> bool:
    """Whether a suite of ``config`` naming ``dataset`` has assertions of its own."""
    if config is None:
        return False
    from worker.evals.config import parse_config

    parsed = parse_config(config.read_text(encoding="utf-8"), config.name)
    folder = config.absolute().parent
    return any(s.assertions for s in parsed.suites
               if (folder / s.dataset).resolve() == dataset.resolve())


def findings(examples: tuple[Any, ...], suite_asserts: bool) -> list[str]:
    """Return one line per finding about ``examples`` (module docstring; pure)."""
    found: list[str] = []
    inputs: dict[str, int] = {}
    for e in examples:
        text = json.dumps(e.input, sort_keys=True)
        if text in inputs:
            found.append(f"line {e.line}: example {e.id!r} has the same input as line "
                         f"{inputs[text]}")
        inputs.setdefault(text, e.line)
        if e.id_from_line:
            found.append(f"line {e.line}: no id (its id is its line number, which moves; "
                         "max_drop and the paired tests need ids)")
        if not e.assertions and not suite_asserts and not any(t.assertions for t in e.turns):
            found.append(f"line {e.line}: example {e.id!r} has no assertion: it cannot fail")
    labels = Counter(json.dumps(e.expected) for e in examples if e.expected is not None)
    if labels and len(examples) >= 5:
        label, count = labels.most_common(1)[0]
        if count / len(examples) > MAJORITY:
            found.append(f"label balance: {count} of {len(examples)} examples expect {label}")
    return found


def cmd_check(args: argparse.Namespace) -> int:
    """Check a dataset (module docstring), or the multiple-choice questions of a consistency
    suite (worker/cli/dataset_questions.py); exit 0 clean, 1 findings, 2 invalid."""
    try:
        lines, count, what = _check(args)
    except (ConfigError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 2
    for line in lines:
        print(f"{args.file}:{line}")
    print(f"llmgate: {count} {what}, {len(lines)} findings")
    return 1 if lines else 0


def _check(args: argparse.Namespace) -> tuple[list[str], int, str]:
    """Return (findings, number of examples or questions, which of the two) of ``args.file``.

    Raises:
        ConfigError, OSError: the file (or ``--config``) is invalid or cannot be read.
    """
    from worker.cli.dataset_questions import (
        consistency_suite,
        question_findings,
        questions_or_error,
        read_questions,
    )

    if consistency_suite(args.config, args.file):
        questions = read_questions(args.file)
    else:
        try:
            examples = _read(args.file, _columns(args.column))
        except ConfigError as err:  # not examples: a consistency suite's questions?
            questions = questions_or_error(args.file, err)
        else:
            return (findings(examples, _suite_assertions(args.config, args.file)),
                    len(examples), "examples")
    return question_findings(questions, MAJORITY), len(questions), "questions"


def _record(example: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": example.id, "input": example.input}
    if example.expected is not None:
        doc["expected"] = example.expected
    for key in ("vars", "tags", "metadata"):
        value = getattr(example, key)
        if value:
            doc[key] = list(value) if key == "tags" else value
    if example.assertions:
        doc["assert"] = [{"type": s.type, **s.params} for s in example.assertions]
    return doc


def cmd_import(args: argparse.Namespace) -> int:
    """Convert a dataset to JSONL; exit 0, 2 when the source is invalid or OUT exists."""
    if args.target.exists():
        print(f"llmgate: {args.target} exists; nothing written", file=sys.stderr)
        return 2
    try:
        examples = _read(args.source, _columns(args.column))
    except (ConfigError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 2
    args.target.write_text("".join(json.dumps(_record(e), ensure_ascii=False) + "\n"
                                   for e in examples), encoding="utf-8")
    print(f"llmgate: wrote {len(examples)} examples to {args.target}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Append one example to a JSONL dataset; exit 0, 2 invalid file or duplicate id."""
    existing: tuple[Any, ...] = ()
    try:
        if args.file.exists():
            existing = _read(args.file, {})
    except (ConfigError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 2
    example_id = args.id or f"e{len(existing) + 1}"
    if any(e.id == example_id for e in existing):
        print(f"llmgate: {args.file} already has an example {example_id!r}", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {"id": example_id, "input": args.input}
    if args.expected is not None:
        doc["expected"] = args.expected
    if args.contains:
        doc["assert"] = [{"type": "contains", "value": v} for v in args.contains]
    text = args.file.read_text(encoding="utf-8") if args.file.exists() else ""
    prefix = "" if not text or text.endswith("\n") else "\n"
    args.file.parent.mkdir(parents=True, exist_ok=True)
    with args.file.open("a", encoding="utf-8") as out:
        out.write(prefix + json.dumps(doc, ensure_ascii=False) + "\n")
    print(f"llmgate: added {example_id!r} to {args.file}")
    return 0
