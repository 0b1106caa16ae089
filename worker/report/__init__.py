"""Render a gate report for GitHub and the CLI (pure but store.py).

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.report import judge_calibration as judge_calibration
    from worker.report import multi as multi
    from worker.report import render as render
    from worker.report.decision import decision_sentence as decision_sentence
    from worker.report.github_actions import MAX_ANNOTATIONS as MAX_ANNOTATIONS
    from worker.report.github_actions import escape_data as escape_data
    from worker.report.github_actions import escape_property as escape_property
    from worker.report.github_actions import in_actions as in_actions
    from worker.report.github_actions import workflow_commands as workflow_commands
    from worker.report.html_report import render_html as render_html
    from worker.report.junit import render_junit as render_junit
    from worker.report.markdown import inline as inline
    from worker.report.markdown import safe as safe
    from worker.report.multi import check_output as check_output
    from worker.report.multi import title as title
    from worker.report.pii import redact_report as redact_report
    from worker.report.plain import first_per_id as first_per_id
    from worker.report.plain import regressed as regressed
    from worker.report.render import check_title as check_title
    from worker.report.sarif import render_sarif as render_sarif
    from worker.report.store import ReportSettings as ReportSettings
    from worker.report.store import ReportStore as ReportStore
    from worker.report.store import store_report as store_report
    from worker.report.terminal import render_terminal as render_terminal
    from worker.report.trend import TrendData as TrendData
    from worker.report.trend import trend_lines as trend_lines
    from worker.report.trend import wanted as wanted

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['judge_calibration', 'multi', 'render'],
    submod_attrs={
        'decision': ['decision_sentence'],
        'github_actions': [
            'MAX_ANNOTATIONS', 'escape_data', 'escape_property', 'in_actions', 'workflow_commands',
        ],
        'html_report': ['render_html'],
        'junit': ['render_junit'],
        'markdown': ['inline', 'safe'],
        'multi': ['check_output', 'title'],
        'pii': ['redact_report'],
        'plain': ['first_per_id', 'regressed'],
        'render': ['check_title'],
        'sarif': ['render_sarif'],
        'store': ['ReportSettings', 'ReportStore', 'store_report'],
        'terminal': ['render_terminal'],
        'trend': ['TrendData', 'trend_lines', 'wanted'],
    },
)
