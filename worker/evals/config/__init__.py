"""Parse .llmgate.yml and the files it names (datasets, prompts).

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.evals.config import perturbations as perturbations
    from worker.evals.config import safe_yaml as safe_yaml
    from worker.evals.config.base_settings import with_base_settings as with_base_settings
    from worker.evals.config.consistency import load_suite_dataset as load_suite_dataset
    from worker.evals.config.consistency import parse_suite_dataset as parse_suite_dataset
    from worker.evals.config.dataset_formats import parse_any as parse_any
    from worker.evals.config.files import MAX_DATASET_BYTES as MAX_DATASET_BYTES
    from worker.evals.config.files import decode_utf8 as decode_utf8
    from worker.evals.config.files import read_repo_file as read_repo_file
    from worker.evals.config.files import refuse_stray_bom as refuse_stray_bom
    from worker.evals.config.files import split_lines as split_lines
    from worker.evals.config.judge_rules import snapshot_path as snapshot_path
    from worker.evals.config.labels import LabelRow as LabelRow
    from worker.evals.config.labels import load_labels as load_labels
    from worker.evals.config.layout import MAX_CONFIGS as MAX_CONFIGS
    from worker.evals.config.layout import MAX_PATH_CHARS as MAX_PATH_CHARS
    from worker.evals.config.load import DRAFT_POLICIES as DRAFT_POLICIES
    from worker.evals.config.load import MAX_CONFIG_BYTES as MAX_CONFIG_BYTES
    from worker.evals.config.load import UNTRUSTED_POLICIES as UNTRUSTED_POLICIES
    from worker.evals.config.load import load_config as load_config
    from worker.evals.config.load import parse_config as parse_config
    from worker.evals.config.load import read_notify as read_notify
    from worker.evals.config.mc_dataset import parse_questions as parse_questions
    from worker.evals.config.paths import glob_regex as glob_regex
    from worker.evals.config.prompt_leaks import MIN_INLINED_CHARS as MIN_INLINED_CHARS
    from worker.evals.config.prompt_leaks import inlined_expected as inlined_expected
    from worker.evals.config.prompts import PromptTemplate as PromptTemplate
    from worker.evals.config.prompts import load_prompt as load_prompt
    from worker.evals.config.prompts import render as render
    from worker.evals.config.schemas import load_schema_file as load_schema_file

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['perturbations', 'safe_yaml'],
    submod_attrs={
        'base_settings': ['with_base_settings'],
        'consistency': ['load_suite_dataset', 'parse_suite_dataset'],
        'dataset_formats': ['parse_any'],
        'files': [
            'MAX_DATASET_BYTES', 'decode_utf8', 'read_repo_file', 'refuse_stray_bom', 'split_lines',
        ],
        'judge_rules': ['snapshot_path'],
        'labels': ['LabelRow', 'load_labels'],
        'layout': ['MAX_CONFIGS', 'MAX_PATH_CHARS'],
        'load': [
            'DRAFT_POLICIES', 'MAX_CONFIG_BYTES', 'UNTRUSTED_POLICIES', 'load_config',
            'parse_config', 'read_notify',
        ],
        'mc_dataset': ['parse_questions'],
        'paths': ['glob_regex'],
        'prompt_leaks': ['MIN_INLINED_CHARS', 'inlined_expected'],
        'prompts': ['PromptTemplate', 'load_prompt', 'render'],
        'schemas': ['load_schema_file'],
    },
)
