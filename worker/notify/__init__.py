"""Notifications of default-branch regressions to the operator's webhooks (issue 35).

A push whose stored run regresses against the previous push's, by the previous push's gate
rules, is told to a Slack incoming webhook and/or a JSON webhook named in the worker's
environment: `channels` (the settings and secrets), `verdict` (the comparison, with the gate's
own code), `notices` (a push's opt-in, verdict and enqueued deliveries), `message` (the bodies)
and `deliver` (one signed POST, the package's only HTTP). The push job (worker/jobs/push.py)
decides and enqueues; the job of worker/jobs/notify.py delivers, retried, so a delivery never
holds a push or a gate up.
"""
