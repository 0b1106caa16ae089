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
"""
