"""The worker.github package.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.github import courtesy as courtesy
    from worker.github.auth import AppCredentials as AppCredentials
    from worker.github.auth import FixedToken as FixedToken
    from worker.github.auth import GitHubAuthError as GitHubAuthError
    from worker.github.auth import InstallationTokenCache as InstallationTokenCache
    from worker.github.auth import app_jwt as app_jwt
    from worker.github.checks import CheckOutput as CheckOutput
    from worker.github.checks import complete_check_run as complete_check_run
    from worker.github.client import CheckRunInfo as CheckRunInfo
    from worker.github.client import GitHubClient as GitHubClient
    from worker.github.client import OpenPull as OpenPull
    from worker.github.client import PullInfo as PullInfo
    from worker.github.comments import find_sticky_comment as find_sticky_comment
    from worker.github.comments import upsert_sticky_comment as upsert_sticky_comment
    from worker.github.comments import with_marker as with_marker
    from worker.github.errors import GitHubError as GitHubError
    from worker.github.errors import GitHubRateLimited as GitHubRateLimited
    from worker.github.errors import GitHubUnavailable as GitHubUnavailable
    from worker.github.limits import MAX_COMMENT_BYTES as MAX_COMMENT_BYTES
    from worker.github.limits import MAX_OUTPUT_BYTES as MAX_OUTPUT_BYTES
    from worker.github.limits import clip_bytes as clip_bytes
    from worker.github.limits import clip_text as clip_text
    from worker.github.limits import utf8_size as utf8_size
    from worker.github.ratelimit import GitHubLimiter as GitHubLimiter
    from worker.github.ratelimit import GitHubLimits as GitHubLimits
    from worker.github.ratelimit import RedisLimitStore as RedisLimitStore
    from worker.github.token_store import SharedTokenStore as SharedTokenStore

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['courtesy'],
    submod_attrs={
        'auth': [
            'AppCredentials', 'FixedToken', 'GitHubAuthError', 'InstallationTokenCache', 'app_jwt',
        ],
        'checks': ['CheckOutput', 'complete_check_run'],
        'client': ['CheckRunInfo', 'GitHubClient', 'OpenPull', 'PullInfo'],
        'comments': ['find_sticky_comment', 'upsert_sticky_comment', 'with_marker'],
        'errors': ['GitHubError', 'GitHubRateLimited', 'GitHubUnavailable'],
        'limits': ['MAX_COMMENT_BYTES', 'MAX_OUTPUT_BYTES', 'clip_bytes', 'clip_text', 'utf8_size'],
        'ratelimit': ['GitHubLimiter', 'GitHubLimits', 'RedisLimitStore'],
        'token_store': ['SharedTokenStore'],
    },
)
