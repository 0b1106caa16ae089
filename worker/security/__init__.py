"""Confine and keep secret: sandbox, Landlock, redaction, encryption.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.security import sandbox as sandbox
    from worker.security import sandbox_procs as sandbox_procs
    from worker.security import scratch as scratch
    from worker.security.children import stop_processes as stop_processes
    from worker.security.env_names import FORBIDDEN_ENV_PREFIXES as FORBIDDEN_ENV_PREFIXES
    from worker.security.env_names import is_allowed_env_name as is_allowed_env_name
    from worker.security.env_names import is_env_name as is_env_name
    from worker.security.pii import CATEGORIES as CATEGORIES
    from worker.security.pii import COUNTRIES as COUNTRIES
    from worker.security.pii import PII_VERSION as PII_VERSION
    from worker.security.pii import PiiRedactor as PiiRedactor
    from worker.security.pii import scan as scan
    from worker.security.process import LEFT_OUTSIDE_NOTE as LEFT_OUTSIDE_NOTE
    from worker.security.process import LEFT_RUNNING_NOTE as LEFT_RUNNING_NOTE
    from worker.security.process import TargetFailed as TargetFailed
    from worker.security.process import build_env as build_env
    from worker.security.process import run_confined as run_confined
    from worker.security.redact import Redactor as Redactor
    from worker.security.redact import install_log_redaction as install_log_redaction
    from worker.security.redact import secrets_from_environ as secrets_from_environ
    from worker.security.sandbox import Sandbox as Sandbox
    from worker.security.sandbox_policy import SandboxError as SandboxError
    from worker.security.scratch import TARGET_PREFIX as TARGET_PREFIX
    from worker.security.secretbox import EncryptedStore as EncryptedStore
    from worker.security.secretbox import SecretBox as SecretBox
    from worker.security.secretbox import SecretBoxError as SecretBoxError
    from worker.security.target_view import TargetView as TargetView
    from worker.security.target_view import build_view as build_view
    from worker.security.target_view import remove_view as remove_view
    from worker.security.text_fold import drop_invisible as drop_invisible
    from worker.security.text_fold import fold as fold

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['sandbox', 'sandbox_procs', 'scratch'],
    submod_attrs={
        'children': ['stop_processes'],
        'env_names': ['FORBIDDEN_ENV_PREFIXES', 'is_allowed_env_name', 'is_env_name'],
        'pii': ['CATEGORIES', 'COUNTRIES', 'PII_VERSION', 'PiiRedactor', 'scan'],
        'process': [
            'LEFT_OUTSIDE_NOTE', 'LEFT_RUNNING_NOTE', 'TargetFailed', 'build_env', 'run_confined',
        ],
        'redact': ['Redactor', 'install_log_redaction', 'secrets_from_environ'],
        'sandbox': ['Sandbox'],
        'sandbox_policy': ['SandboxError'],
        'scratch': ['TARGET_PREFIX'],
        'secretbox': ['EncryptedStore', 'SecretBox', 'SecretBoxError'],
        'target_view': ['TargetView', 'build_view', 'remove_view'],
        'text_fold': ['drop_invisible', 'fold'],
    },
)
