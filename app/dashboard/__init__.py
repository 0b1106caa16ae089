"""The quality dashboard (issue 35): pages over the history the workers record.

The web process only reads: the workers write each default-branch run and each pull request
gate (worker/baselines/timeline.py) in the key layout of worker/history_contract.py, the one
module of ``worker`` this package imports besides ``worker.contract``.

- ``charts``: server-side SVG (trend lines with intervals, sparklines), pure.
- ``model``: what each page shows, built from the history's records, pure.
- ``repository``: reads and shapes a repository's page and its line on the repositories page.
- ``pages``: what every answer shares (headers, templates, content negotiation).
- ``views``: the Starlette endpoints (HTML, JSON, CSV) and `views.dashboard_routes`.
- ``access_types``: the `access_types.Access` protocol every view asks before it reads a
  repository (the real one signs users in with GitHub: ``auth.py``).

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from app.dashboard import model as model
    from app.dashboard.auth import ClearRefusedSession as ClearRefusedSession
    from app.dashboard.auth import GitHubAccess as GitHubAccess
    from app.dashboard.auth import SignIn as SignIn
    from app.dashboard.auth import report_allowed as report_allowed
    from app.dashboard.pages import environment as environment
    from app.dashboard.repository import FLAP_RUNS as FLAP_RUNS
    from app.dashboard.repository import SPARK_RUNS as SPARK_RUNS
    from app.dashboard.repository import RepositoryPage as RepositoryPage
    from app.dashboard.repository import RepoSummary as RepoSummary
    from app.dashboard.repository import shape_page as shape_page
    from app.dashboard.repository import shape_summary as shape_summary
    from app.dashboard.session import AuthSettings as AuthSettings
    from app.dashboard.views import CHART_RUNS as CHART_RUNS
    from app.dashboard.views import GITHUB_URL as GITHUB_URL
    from app.dashboard.views import NAME as NAME
    from app.dashboard.views import dashboard_routes as dashboard_routes

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['model'],
    submod_attrs={
        'auth': ['ClearRefusedSession', 'GitHubAccess', 'SignIn', 'report_allowed'],
        'pages': ['environment'],
        'repository': [
            'FLAP_RUNS', 'RepoSummary', 'RepositoryPage', 'SPARK_RUNS', 'shape_page',
            'shape_summary',
        ],
        'session': ['AuthSettings'],
        'views': ['CHART_RUNS', 'GITHUB_URL', 'NAME', 'dashboard_routes'],
    },
)
