"""``llmgate import promptfoo promptfooconfig.yaml``: a promptfoo config as an llmgate config.

What is converted (promptfoo's config format: promptfoo.dev/docs/configuration/reference):

- ``providers``: ``openai:gpt-4.1`` (or ``{id: ...}``) becomes the model ``openai/gpt-4.1`` of
  a model target (litellm's ``provider/model`` names), its key in ``<PROVIDER>_API_KEY``;
- ``prompts``: inline strings and ``file://`` text files become prompt files under
  ``prompts/``, their ``{{var}}`` placeholders ``{{ vars.var }}`` (llmgate's templates see an
  example's ``vars``); one suite per prompt and provider;
- ``tests``: one example each in ``evals/promptfoo.jsonl`` (``vars`` kept, ``description`` as
  its id), with ``defaultTest.assert`` added to each;
- assertions: ``equals``, ``contains`` (case-sensitive), ``icontains``, ``not-contains``,
  ``not-icontains``, ``contains-any``, ``icontains-any``, ``contains-all``, ``icontains-all``,
  ``regex``, ``llm-rubric`` (``llm_judge``), and ``$ref`` to ``#/assertionTemplates/...``.

Everything else (``javascript``, ``python``, ``is-json``, ``similar``, other keys such as
``outputPath``, ``file://`` tests, non-text prompts) is listed as not converted; the command
exits 1 when the list is not empty, so a script notices. The generated gate is ``pass_rate``
``min: 0.8`` and ``max_drop: 0.05`` (promptfoo has no relative gate to translate).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

#: promptfoo assertion type -> (llmgate type, extra options).
ASSERTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "contains": ("contains", {"case_sensitive": True}), "icontains": ("contains", {}),
    "not-contains": ("not_contains", {"case_sensitive": True}),
    "not-icontains": ("not_contains", {}),
    "contains-any": ("contains_any", {"case_sensitive": True}),
    "icontains-any": ("contains_any", {}),
    "contains-all": ("contains_all", {"case_sensitive": True}),
    "icontains-all": ("contains_all", {}),
}
CONFIG_KEYS = ("description", "prompts", "providers", "tests", "defaultTest",
               "assertionTemplates")
_PLACEHOLDER = re.compile(r"{{\s*([A-Za-z_][A-Za-z0-9_]*)\s*}}")


def add_import_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``llmgate import promptfoo CONFIG``."""
    imp = sub.add_parser("import", help="convert another tool's config (promptfoo)")
    kinds = imp.add_subparsers(metavar="TOOL")
    pf = kinds.add_parser("promptfoo", help="convert a promptfooconfig.yaml",
                          description="Write .llmgate.yml, evals/promptfoo.jsonl and prompts/ "
                                      "in the current folder from a promptfoo config; list "
                                      "what could not be converted. Exit 0 all converted, 1 "
                                      "some parts not converted, 2 unreadable or files exist.")
    pf.add_argument("config", type=Path)
    pf.add_argument("--force", action="store_true", help="overwrite existing files")
    pf.set_defaults(func=cmd_import_promptfoo)


class Conversion:
    """The files of a converted config and what was left out (see the module docstring)."""

    def __init__(self, source: Path) -> None:
        self.folder = source.parent
        self.files: dict[str, str] = {}
        self.skipped: list[str] = []
        self.templates: dict[str, Any] = {}

    def model(self, provider: Any) -> tuple[str, str] | None:
        """Return (litellm model, key variable) of a promptfoo provider, or None."""
        pid = provider.get("id") if isinstance(provider, dict) else provider
        if not isinstance(pid, str) or ":" not in pid or pid.startswith(("file:", "exec:")):
            self.skipped.append(f"provider {pid!r}: not a model id")
            return None
        vendor, _, name = pid.partition(":")
        if vendor == "anthropic" and name.startswith("messages:"):
            name = name[len("messages:"):]
        return f"{vendor}/{name}", f"{vendor.upper().replace('-', '_')}_API_KEY"

    def prompts(self, index: int, prompt: Any) -> list[str]:
        """Write the prompt files of one ``prompts`` entry (a text file may hold several,
        separated by lines ``---``, as promptfoo reads it); return their paths."""
        texts: list[Any] = [prompt]
        if isinstance(prompt, str) and prompt.startswith("file://"):
            path = self.folder / prompt[len("file://"):]
            if path.suffix not in (".txt", ".md", "") or not path.is_file():
                self.skipped.append(f"prompt {prompt!r}: only text files are converted")
                return []
            texts = [t.strip("\n") for t in
                     re.split(r"^---$", path.read_text(encoding="utf-8"), flags=re.M)]
        if not all(isinstance(t, str) for t in texts):
            self.skipped.append(f"prompt {index + 1}: only text prompts are converted")
            return []
        names = []
        for text in texts:
            name = f"prompts/promptfoo_{len(self.files) + 1}.txt"
            self.files[name] = _PLACEHOLDER.sub(r"{{ vars.\1 }}", text) + "\n"
            names.append(name)
        return names

    def assertion(self, spec: Any, where: str) -> list[dict[str, Any]]:
        """Return the llmgate assertions of one promptfoo assertion ([] when skipped)."""
        if isinstance(spec, dict) and "$ref" in spec:
            ref = str(spec["$ref"])
            spec = self.templates.get(ref.rsplit("/", 1)[-1]) \
                if ref.startswith("#/assertionTemplates/") else None
            if spec is None:
                self.skipped.append(f"{where}: $ref {ref!r} not found")
                return []
        kind = spec.get("type") if isinstance(spec, dict) else None
        value = spec.get("value") if isinstance(spec, dict) else None
        if kind in ASSERTIONS and value is not None:
            name, extra = ASSERTIONS[kind]
            key = "values" if isinstance(value, list) else "value"
            return [{"type": name, key: value, **extra}]
        if kind == "equals" and isinstance(value, str):
            return [{"type": "equals", "expected": value}]
        if kind == "regex" and isinstance(value, str):
            return [{"type": "regex", "pattern": value}]
        if kind == "llm-rubric" and isinstance(value, str):
            return [{"type": "llm_judge", "rubric": value}]
        self.skipped.append(f"{where}: assertion {kind!r} not converted")
        return []


@functools.cache
def _yaml12_loader() -> Any:
    """Return a SafeLoader class whose booleans are YAML 1.2's (``true``/``false`` only):
    promptfoo reads its config with js-yaml, for which ``body: Yes`` is the string ``Yes``, not
    true. Built on first use, so `llmgate --help` does not import PyYAML."""
    import yaml

    class Yaml12Bools(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types
        """SafeLoader with YAML 1.2 booleans (see `_yaml12_loader`)."""

    Yaml12Bools.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Yaml12Bools.add_implicit_resolver("tag:yaml.org,2002:bool",
                                      re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                      list("tTfF"))
    return Yaml12Bools


def convert(source: Path) -> Conversion:
    """Convert the promptfoo config at ``source`` (reads it and its prompt files).

    Raises:
        ValueError: the file is not a YAML mapping.
        OSError: a file cannot be read.
    """
    import yaml

    loader = _yaml12_loader()  # a SafeLoader
    doc = yaml.load(source.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506
    if not isinstance(doc, dict):
        raise ValueError(f"{source}: not a promptfoo config (a YAML mapping)")
    out = Conversion(source)
    out.templates = doc.get("assertionTemplates") or {}
    out.skipped += [f"`{key}`: not converted" for key in doc if key not in CONFIG_KEYS]
    defaults = [a for spec in (doc.get("defaultTest") or {}).get("assert", [])
                for a in out.assertion(spec, "defaultTest")]
    rows = _examples(out, doc.get("tests") or [], defaults)
    prompts = doc.get("prompts") or []
    prompts = [prompts] if isinstance(prompts, str) else prompts
    paths = [p for i, text in enumerate(prompts) for p in out.prompts(i, text)]
    models = [m for m in (out.model(p) for p in doc.get("providers") or []) if m]
    suites = [_suite(f"p{i + 1}-{model.split('/', 1)[-1]}", path, model, key)
              for i, path in enumerate(paths) for model, key in models]
    out.files["evals/promptfoo.jsonl"] = "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                 for r in rows)
    out.files[".llmgate.yml"] = "version: 1\nsuites:\n" + "".join(suites)
    return out


def _examples(out: Conversion, tests: Any, defaults: list[dict[str, Any]]) -> list[
        dict[str, Any]]:
    if isinstance(tests, str):
        out.skipped.append(f"tests {tests!r}: only inline tests are converted")
        return []
    rows = []
    for n, test in enumerate(tests, start=1):
        if not isinstance(test, dict):
            out.skipped.append(f"test {n}: not an inline test")
            continue
        where = f"test {n}"
        specs = [a for spec in test.get("assert") or [] for a in out.assertion(spec, where)]
        row: dict[str, Any] = {"id": str(test.get("description") or f"t{n}"),
                               "input": test.get("vars") or {}, "vars": test.get("vars") or {}}
        for spec in specs:
            if "expected" in spec:
                row["expected"] = spec.pop("expected")
        row["assert"] = [*defaults, *specs]
        rows.append(row)
    return rows


def _suite(name: str, prompt: str, model: str, key: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", name)
    return (f"  - name: {safe}\n    dataset: evals/promptfoo.jsonl\n"
            f"    target: {{model: {json.dumps(model)}, api_key_env: {key}, "
            f"prompt: {prompt}}}\n"
            "    gate:\n      pass_rate: {min: 0.8, max_drop: 0.05}\n")


def cmd_import_promptfoo(args: argparse.Namespace) -> int:
    """Write the converted files in the current folder; exit 0, 1 (some not converted), 2."""
    import yaml

    try:
        out = convert(args.config)
    except (OSError, ValueError, yaml.YAMLError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 2
    here = Path.cwd()
    existing = [p for p in out.files if (here / p).exists()]
    if existing and not args.force:
        print(f"llmgate: {', '.join(existing)} already exist; nothing written (--force "
              "overwrites)", file=sys.stderr)
        return 2
    for path, text in out.files.items():
        (here / path).parent.mkdir(parents=True, exist_ok=True)
        (here / path).write_text(text, encoding="utf-8")
        print(f"llmgate: wrote {path}")
    for line in out.skipped:
        print(f"llmgate: not converted: {line}")
    return 1 if out.skipped else 0
