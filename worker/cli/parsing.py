"""The ``llmgate`` command line's argument parser: what every command shares (issue 33).

- No option can be abbreviated (``--all`` is not ``--allow-undecided``): `Parser` sets
  ``allow_abbrev=False``, and argparse makes every subcommand's parser of its parent's class,
  so each command and action has it too.
- A misuse prints one line on stderr, ``llmgate run: <what>``, and exits 2 (`EXIT_MISUSE`,
  the exit code of a configuration error), not argparse's usage block.
- Every command takes ``-q/--quiet`` (only errors on stderr) and ``-v/--verbose`` (llmgate's
  log lines too): `add_output_levels` adds them to each command once all are defined.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, NoReturn

#: Exit code of every misuse of the command line (argparse's own, and llmgate's configuration
#: error).
EXIT_MISUSE = 2


class Parser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` without abbreviations whose errors are one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: <message>`` as one line on stderr and exit `EXIT_MISUSE`."""
        self.exit(EXIT_MISUSE, f"{self.prog}: {' '.join(message.split())}\n")


def add_output_levels(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet`` and ``-v/--verbose`` to every command (leaf parser) below ``parser``
    that has neither yet; a command that takes actions gets them on each action."""
    commands = [action for action in parser._actions
                if isinstance(action, argparse._SubParsersAction)]
    if not commands:
        if "--quiet" not in parser._option_string_actions:
            levels = parser.add_mutually_exclusive_group()
            levels.add_argument("-q", "--quiet", action="store_true",
                                help="print nothing on stderr but errors (no progress)")
            levels.add_argument("-v", "--verbose", action="store_true",
                                help="also say on stderr how the command is carried out")
        return
    for command in commands:
        for child in dict.fromkeys(command.choices.values()):
            add_output_levels(child)


def apply_output_level(args: argparse.Namespace) -> None:
    """Set llmgate's logging for ``args.quiet``/``args.verbose``: quiet keeps only errors,
    verbose prints llmgate's INFO lines as ``llmgate: message`` on stderr."""
    logger = logging.getLogger("llmgate")
    logger.handlers = [handler for handler in logger.handlers if not isinstance(handler, Say)]
    if _set_level:  # an earlier command's level (tests run several in one process)
        logger.setLevel(_set_level.pop())
    if getattr(args, "verbose", False):
        logger.addHandler(Say())
        _set_level.append(logger.level)
        logger.setLevel(logging.INFO)
    elif getattr(args, "quiet", False):
        _set_level.append(logger.level)
        logger.setLevel(logging.ERROR)


#: The level llmgate's logger had before `apply_output_level` changed it (at most one).
_set_level: list[int] = []


class Say(logging.Handler):
    """Print llmgate's log lines as ``llmgate: message`` on the current ``sys.stderr``."""

    def emit(self, record: logging.LogRecord) -> None:
        """Print one record."""
        print(f"llmgate: {record.getMessage()}", file=sys.stderr)
