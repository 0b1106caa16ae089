"""Prompt files of model targets: jinja2 templates over an example, or chat message lists.

A prompt file (``target.prompt``, relative to the repository root) is either

- a text template (any suffix but ``.yaml``/``.yml``/``.json``): the rendered text is one
  ``user`` message; or
- a chat message list in YAML or JSON: ``[{"role": "system", "content": "..."}, ...]`` (or a
  mapping with a ``messages`` list), each ``content`` a template.

Templates see ``input`` (the example's input), ``vars`` (its ``vars`` mapping) and ``id``;
never ``expected``. They are rendered by jinja2's immutable sandbox (the file comes from the pull
request: no attribute tricks reach Python internals) with ``StrictUndefined``, so a misspelt
variable is an error naming the file, not an empty string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml
from jinja2.sandbox import ImmutableSandboxedEnvironment

from worker.errors import ConfigError
from worker.evals.config.files import decode_utf8
from worker.evals.types import Example

#: Chat roles a message list may use.
ROLES = ("system", "user", "assistant", "developer")
#: Largest prompt file read, bytes (1 MiB).
MAX_PROMPT_BYTES = 1 << 20
_ENV = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                                     keep_trailing_newline=False)


@dataclass(frozen=True)
class PromptTemplate:
    """A parsed prompt file.

    Attributes:
        path: the file relative to the repository root.
        messages: ``(role, template source)`` pairs, in order.
        compiled: the compiled template of each message (compiled once: compiling costs
            milliseconds, rendering microseconds).
    """

    path: str
    messages: tuple[tuple[str, str], ...]
    compiled: tuple[jinja2.Template, ...] = field(default=(), compare=False, repr=False)


def load_prompt(root: Path, rel_path: str) -> PromptTemplate:
    """Read and parse the prompt file ``rel_path`` of the checkout at ``root``.

    Raises:
        ConfigError: the file is missing, outside the repository (symlinks resolved), too
            big, not UTF-8, or not a valid template or message list.
    """
    path = (root / rel_path).resolve()
    if Path(rel_path).is_absolute() or not path.is_relative_to(root.resolve()):
        raise ConfigError(rel_path, None, "the prompt file must be inside the repository")
    if not path.is_file():
        raise ConfigError(rel_path, None, "prompt file not found (commit it, or fix `prompt:`)")
    data = path.read_bytes()
    if len(data) > MAX_PROMPT_BYTES:
        raise ConfigError(rel_path, None, f"the prompt file is larger than {MAX_PROMPT_BYTES} "
                          "bytes")
    text = decode_utf8(data, rel_path)
    return parse_prompt(text, rel_path)


def parse_prompt(text: str, path: str) -> PromptTemplate:
    """Parse a prompt file's text (pure); every template is compiled to catch syntax errors.

    Raises:
        ConfigError: invalid YAML/JSON, a malformed message list, or a template syntax error.
    """
    if path.endswith((".yaml", ".yml", ".json")):
        messages = _message_list(text, path)
    else:
        messages = (("user", text),)
    compiled = []
    for _, source in messages:
        try:
            compiled.append(_ENV.from_string(source))
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(path, exc.lineno, f"template syntax error: {exc.message}") from None
    return PromptTemplate(path, messages, tuple(compiled))


def _message_list(text: str, path: str) -> tuple[tuple[str, str], ...]:
    try:
        doc: Any = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(path, None, f"cannot parse the message list: {exc}") from None
    if isinstance(doc, dict) and "messages" in doc:
        doc = doc["messages"]
    if not isinstance(doc, list) or not doc:
        raise ConfigError(path, None, 'must be a list of {"role", "content"} messages')
    messages = []
    for number, item in enumerate(doc, start=1):
        if not isinstance(item, dict) or set(item) != {"role", "content"} \
                or item["role"] not in ROLES or not isinstance(item["content"], str):
            raise ConfigError(path, None, f"message {number} must be {{role, content}} with a "
                              f"role of {', '.join(ROLES)} and text content")
        messages.append((str(item["role"]), str(item["content"])))
    return tuple(messages)


def render(template: PromptTemplate, example: Example) -> list[dict[str, str]]:
    """Render the messages of ``template`` for ``example``.

    Returns:
        ``[{"role", "content"}]`` in file order.

    Raises:
        ConfigError: an undefined variable or a sandbox violation, naming the prompt file and
            the example's dataset line.
    """
    context = {"input": example.input, "vars": example.vars, "id": example.id}
    rendered = []
    compiled = template.compiled or tuple(_ENV.from_string(s) for _, s in template.messages)
    for (role, _), message in zip(template.messages, compiled, strict=True):
        try:
            content = message.render(context)
        except jinja2.TemplateError as exc:
            raise ConfigError(template.path, None, f"cannot render for example {example.id!r} "
                              f"(dataset line {example.line}): {exc}") from None
        rendered.append({"role": role, "content": content})
    return rendered
