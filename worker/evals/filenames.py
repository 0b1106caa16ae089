"""File names llmgate reads from a repository, in a module that imports nothing.

The command line's parser (``llmgate --help``) names the configuration file in its help text;
importing it from here keeps the help from loading the engine's value types
(worker/evals/types.py re-exports it for everything else).
"""

#: File name of the configuration at the repository root (and at each folder of a monorepo).
CONFIG_FILENAME = ".llmgate.yml"
