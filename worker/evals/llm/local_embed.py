"""In-process embedding models for ``similar``: ``model: local/<name>`` (sentence-transformers).

The worker's operator lists the models a config may use in `LOCAL_EMBEDDINGS_ENV`, e.g.
``LLMGATE_LOCAL_EMBEDDINGS="minilm=/models/all-MiniLM-L6-v2,bge=/models/bge-small"``: each a
sentence-transformers model directory on the worker. A config names one (``local/minilm``); a
path never comes from the config, so a pull request only chooses among approved directories.
Needs the optional extra ``local-embeddings`` (sentence-transformers and torch), installed from
a checkout of llmgate (`EXTRA`), never by name from the package index (another project's).

Safety: a directory without ``model.safetensors`` is refused (pickled ``.bin`` weights can run
code when loaded; safetensors holds only tensors), the weights are loaded with
``use_safetensors=True`` and ``trust_remote_code=False``, ``modules.json`` may only name
sentence-transformers' own module classes (it names classes to import), and the Hugging Face
libraries are put offline (``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1`` before the import,
``local_files_only=True``): nothing is fetched. Runs on the CPU.

A model is loaded once per process (by directory, under a lock: concurrent first calls load it
once) and its encodes run one at a time in a thread (`asyncio.to_thread`), so the event loop
stays free; torch uses the cores inside one encode. ``timeout_s`` does not apply: an encode
cannot be interrupted. Identity (`identity`): a SHA-256 over the directory's small files and
the size and first and last MiB of each large one (the weights), read once per process, goes
into the response-cache key and the suite fingerprint, so a model swapped behind a name is
neither served stale vectors nor compared with old scores (a worker restart picks it up). Only
imported by the worker: the web process never loads torch.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.evals.llm_types import ProviderError, TokenUsage

#: The worker variable listing ``name=/absolute/dir`` pairs, comma-separated.
LOCAL_EMBEDDINGS_ENV = "LLMGATE_LOCAL_EMBEDDINGS"
#: How a config names a local model: ``local/<name>``.
LOCAL_PREFIX = "local/"
#: What to install for local models.
EXTRA = "the local-embeddings extra (pip install '.[local-embeddings]' in a checkout of llmgate)"
#: The only weights file loaded.
WEIGHTS_FILE = "model.safetensors"
#: Files up to this size are hashed whole for the identity; larger ones by size and samples.
SMALL_FILE_BYTES = 4 * 1024 * 1024
SAMPLE_BYTES = 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")

log = logging.getLogger("llmgate.local_embed")


@dataclass
class _Loaded:
    """A loaded model and the lock that keeps its encodes one at a time."""

    model: Any
    lock: threading.Lock


#: directory -> its model, or the message of its failed load
_loaded: dict[Path, _Loaded | str] = {}
_load_lock = threading.Lock()
_identities: dict[Path, str] = {}


def is_local(model: str) -> bool:
    """Return True when ``model`` names a local embedding model (``local/<name>``)."""
    return model.startswith(LOCAL_PREFIX)


def parse_local_models(value: str) -> dict[str, Path]:
    """Parse `LOCAL_EMBEDDINGS_ENV` (``name=/abs/dir,...``; blank: none) into name -> directory.

    Raises:
        ValueError: an entry without ``=``, a malformed or repeated name, or a relative path;
            the message names the variable.
    """
    models: dict[str, Path] = {}
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        name, sep, path = (part.strip() for part in entry.partition("="))
        if not sep or not _NAME.match(name) or name in models:
            raise ValueError(f"{LOCAL_EMBEDDINGS_ENV}: entry {entry!r} must be name=/absolute/dir "
                             "with a unique name of letters, digits, '.', '_' or '-'")
        if not Path(path).is_absolute():
            raise ValueError(f"{LOCAL_EMBEDDINGS_ENV}: the directory of {name!r} must be an "
                             f"absolute path, got {path!r}")
        models[name] = Path(path)
    return models


def config_problem(model: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Return why ``local/<name>`` cannot be used on this worker, or None when it can.

    Reads `LOCAL_EMBEDDINGS_ENV` from ``environ`` (default: the process environment) and
    whether sentence-transformers is installed (without importing it).
    """
    try:
        _directory(model, os.environ if environ is None else environ)
    except ProviderError as err:
        return err.message
    if importlib.util.find_spec("sentence_transformers") is None:
        return f"sentence-transformers is not installed on this worker: install {EXTRA}"
    return None


def _directory(model: str, environ: Mapping[str, str]) -> Path:
    name = model.removeprefix(LOCAL_PREFIX)
    try:
        models = parse_local_models(environ.get(LOCAL_EMBEDDINGS_ENV, ""))
    except ValueError as err:
        raise ProviderError("provider", f"{err} (a worker setting: ask its operator)") from None
    if name not in models:
        known = ", ".join(sorted(models)) if models else "none (it is empty or unset)"
        raise ProviderError("provider", f"no local embedding model {name!r} on this worker: "
                            f"{LOCAL_EMBEDDINGS_ENV} lists {known}")
    return models[name]


def identity(model: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return ``{"model_digest": hex}`` for a local model ({} for any other model).

    The digest is "unknown" when the name is not configured, else see `directory_digest`.
    """
    if not is_local(model):
        return {}
    try:
        directory = _directory(model, os.environ if environ is None else environ)
    except ProviderError:
        return {"model_digest": "unknown"}
    return {"model_digest": directory_digest(directory)}


def directory_digest(directory: Path) -> str:
    """Return the SHA-256 hex identity of a model directory (cached per process).

    Covers every file below ``directory`` except hidden ones and ``*.md``: its relative path
    and, up to `SMALL_FILE_BYTES`, its contents; beyond, its size and its first and last
    `SAMPLE_BYTES`. A missing or unreadable directory gets a digest saying so.
    """
    found = _identities.get(directory)
    if found is None:
        found = _identities[directory] = _digest(directory)
    return found


def _digest(directory: Path) -> str:
    total = hashlib.sha256()
    try:
        files = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix != ".md"
                       and not any(part.startswith(".") for part in p.relative_to(directory).parts))
        for path in files:
            total.update(path.relative_to(directory).as_posix().encode() + b"\0")
            total.update(_file_digest(path).encode())
    except OSError as err:
        return hashlib.sha256(f"unreadable:{type(err).__name__}".encode()).hexdigest()
    return total.hexdigest() if files else hashlib.sha256(b"missing").hexdigest()


def _file_digest(path: Path) -> str:
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= SMALL_FILE_BYTES:
            return hashlib.sha256(handle.read()).hexdigest()
        head = handle.read(SAMPLE_BYTES)
        handle.seek(size - SAMPLE_BYTES)
        return hashlib.sha256(f"{size}:".encode() + head + handle.read()).hexdigest()


async def embed(model: str, texts: list[str]) -> tuple[list[list[float]], TokenUsage, float]:
    """Embed ``texts`` with the local model ``model`` in a worker thread.

    Returns:
        One vector per text (in order), the tokens the model's tokenizer counted (input;
        truncated texts count up to the model's limit) and the encode's time, milliseconds.

    Raises:
        ProviderError: not retryable: an unknown name, the extra not installed, a directory
            that is refused or fails to load, or an encode that fails.
    """
    directory = _directory(model, os.environ)
    return await asyncio.to_thread(_embed_sync, directory, texts)


def _embed_sync(directory: Path, texts: list[str]) -> tuple[list[list[float]], TokenUsage,
                                                           float]:
    loaded = load(directory)
    with loaded.lock:
        started = time.perf_counter()
        try:
            vectors = loaded.model.encode(texts, convert_to_numpy=True, show_progress_bar=False)
            tokens = _count_tokens(loaded.model, texts)
        except Exception as exc:  # torch's and the tokenizer's errors: mapped at the edge
            raise ProviderError("provider", f"local embedding failed: {exc}"[:500]) from None
        latency_ms = (time.perf_counter() - started) * 1000
    return [[float(x) for x in row] for row in vectors.tolist()], TokenUsage(tokens), latency_ms


def _count_tokens(model: Any, texts: list[str]) -> int:
    try:
        ids = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
        return sum(len(row) for row in ids["input_ids"])
    except Exception:  # a model without a callable tokenizer: tokens unknown
        return 0


def load(directory: Path) -> _Loaded:
    """Return the model of ``directory``, loading it on first use (once per process).

    Raises:
        ProviderError: the directory is refused or fails to load (remembered: a worker
            restart retries).
    """
    with _load_lock:
        found = _loaded.get(directory)
        if found is None:
            try:
                found = _Loaded(_load_model(directory), threading.Lock())
            except ProviderError as err:
                found = err.message
            _loaded[directory] = found
    if isinstance(found, str):
        raise ProviderError("provider", found)
    return found


def _load_model(directory: Path) -> Any:
    label = f"local embedding model at {directory.name!r}"
    if not (directory / WEIGHTS_FILE).is_file():
        raise ProviderError("provider", f"{label} has no {WEIGHTS_FILE}: only safetensors "
                            "weights are loaded (pickled weights can run code)")
    for entry in _modules(directory):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(kind, str) or not kind.startswith("sentence_transformers."):
            raise ProviderError("provider", f"{label}: modules.json names {kind!r}; only "
                                "sentence_transformers modules are loaded")
    library = import_library()
    started = time.perf_counter()
    try:
        model = library.SentenceTransformer(
            str(directory), device="cpu", trust_remote_code=False, local_files_only=True,
            model_kwargs={"use_safetensors": True})
    except Exception as exc:  # the library's and torch's errors: mapped at the edge
        log.warning("loading %s failed: %s", directory, exc)
        raise ProviderError("provider", f"{label} failed to load: "
                            f"{type(exc).__name__}: {exc}"[:500]) from None
    log.info("loaded %s in %.1f s", directory, time.perf_counter() - started)
    return model


def _modules(directory: Path) -> list[Any]:
    try:
        doc = json.loads((directory / "modules.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []  # a plain transformers directory: sentence-transformers adds mean pooling
    except (OSError, ValueError) as err:
        raise ProviderError("provider", f"unreadable modules.json: {err}") from None
    return doc if isinstance(doc, list) else [doc]


def import_library() -> Any:
    """Import sentence_transformers offline (see the module docstring) and return it.

    Raises:
        ProviderError: it is not installed (names the extra to install).
    """
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
        os.environ[name] = "1"
    try:
        library = importlib.import_module("sentence_transformers")
    except ImportError as err:
        raise ProviderError("provider", f"sentence-transformers is not installed on this "
                            f"worker ({err}): install {EXTRA}") from None
    constants: Any = importlib.import_module("huggingface_hub.constants")
    constants.HF_HUB_OFFLINE = True  # read at its import: it may have been imported before
    transformers_logging = importlib.import_module("transformers.utils.logging")
    transformers_logging.disable_progress_bar()
    return library
