"""``check_run`` / ``check_suite``: GitHub's Re-run, and the buttons of llmgate's check runs.

- ``check_run`` ``rerequested`` of a run named ``llmgate`` (or a config's own ``llmgate:
  <folder>``, which re-runs the whole pull request) and ``check_suite`` ``rerequested``
  (GitHub's "Re-run" / "Re-run all checks") queue ``rerun_check``: the worker gates the commit
  afresh for every open pull request whose head it still is, each against its own base. The
  payload's ``pull_requests`` (same repository only) and the run's ``external_id`` name them;
  the worker adds the other llmgate runs on the commit. The App id in the payload goes along:
  the worker ignores another App's suite (the web process does not know its own App id).
- ``requested_action`` (`app.routes.approval` routes it): identifier ``rerun`` (the **Re-run**
  button, for that run's pull request) and ``accept`` (**Accept regression**, or **Let
  through** on an undecided run: the worker tells them apart); both are
  checked against the presser's permission by the worker. Bots' presses are ignored.

llmgate's check runs carry ``external_id`` ``pr:<number>`` (GitHub leaves ``pull_requests``
empty for forks) or ``mg:<base sha>`` for a merge group.
"""

from __future__ import annotations

from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.decision import Decision
from app.routes.payload import (
    LOGIN_PATTERN,
    NO_INSTALLATION,
    SHA_PATTERN,
    get_id,
    get_obj,
    get_str,
    installation_id,
    installed,
    repo_ref,
)
from worker.contract import (
    ACCEPT_ACTION,
    CHECK_NAME,
    CONFIG_CHECK_PREFIX,
    JOB_ACCEPT,
    JOB_RERUN_CHECK,
    RERUN_ACTION,
    AcceptPayload,
    RecheckPayload,
    event_job_id,
    external_target,
)

router = Router()


def is_llmgate_check(name: str) -> bool:
    """Whether ``name`` is llmgate's: ``llmgate``, or a config's own ``llmgate: <folder>``."""
    return name == CHECK_NAME or name.startswith(CONFIG_CHECK_PREFIX)


def app_id_of(data: Any, path: str) -> int:
    """Return the positive ``<path>.app.id`` of a payload, or 0 when it has none."""
    app = get_obj(data, path).get("app")
    value = app.get("id") if isinstance(app, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def same_repo_pulls(data: Any, path: str) -> list[int]:
    """Return the numbers in ``<path>.pull_requests`` whose base is this repository.

    Raises:
        PayloadError: such an entry's ``number`` is not a positive integer.
    """
    repo_id = get_obj(data, "repository").get("id")
    numbers = []
    for pull in get_obj(data, path).get("pull_requests") or []:
        base = pull.get("base") if isinstance(pull, dict) else None
        base_repo = base.get("repo") if isinstance(base, dict) else None
        if isinstance(base_repo, dict) and base_repo.get("id") == repo_id:
            numbers.append(get_id(pull, "number"))
    return numbers


def _plan_recheck(event: Event, decision: Decision, path: str, numbers: list[int],
                  merge_group_base: str, source: str) -> None:
    """Enqueue ``rerun_check`` for the head SHA at ``<path>.head_sha``."""
    data = event.data
    if (install_id := installed(data, decision)) is None:
        return
    repo = repo_ref(data)
    recheck = RecheckPayload(
        delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
        head_sha=get_str(data, f"{path}.head_sha", SHA_PATTERN), pr_numbers=sorted(set(numbers)),
        merge_group_base=merge_group_base, app_id=app_id_of(data, path),
        requester=get_str(data, "sender.login", LOGIN_PATTERN), source=source)
    decision.enqueue(JOB_RERUN_CHECK, recheck, event_job_id(
        "rerun", repo, f"{recheck['head_sha']}:{event.delivery_id}"))


@router.register("check_run", action="rerequested")
async def rerun_from_check_run(event: Event, decision: Decision) -> None:
    """Plan a fresh gate when someone presses GitHub's Re-run on an ``llmgate`` check run.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    if not is_llmgate_check(get_str(data, "check_run.name")):
        decision.ignore("not an llmgate check run")
        return
    number, base = external_target(get_obj(data, "check_run").get("external_id"))
    numbers = same_repo_pulls(data, "check_run") + ([number] if number else [])
    _plan_recheck(event, decision, "check_run", numbers, base, "check_run")


@router.register("check_suite", action="rerequested")
async def rerun_from_check_suite(event: Event, decision: Decision) -> None:
    """Plan a fresh gate when someone re-runs the App's check suite ("Re-run all checks").

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    _plan_recheck(event, decision, "check_suite", same_repo_pulls(event.data, "check_suite"), "",
                  "check_suite")


def plan_check_action(event: Event, decision: Decision, identifier: str) -> None:
    """Plan the job of the Re-run (``rerun``) or Accept regression (``accept``) button.

    Raises:
        PayloadError: a needed field is missing or malformed (the receiver answers 400).
    """
    data = event.data
    number, base = external_target(get_obj(data, "check_run").get("external_id"))
    if not is_llmgate_check(get_str(data, "check_run.name")) or (number is None and not base):
        decision.ignore("not an llmgate check run")
    elif identifier == ACCEPT_ACTION and number is None:
        decision.ignore("only a pull request's check run can be accepted")
    elif get_str(data, "sender.type") == "Bot":
        decision.ignore("requested by a bot")
    elif identifier == RERUN_ACTION:
        _plan_recheck(event, decision, "check_run", [number] if number else [], base, "button")
    elif (install_id := installation_id(data)) is None:
        decision.ignore(NO_INSTALLATION)
    else:
        repo, run_id = repo_ref(data), get_id(data, "check_run.id")
        accepter = get_str(data, "sender.login", LOGIN_PATTERN)
        payload = AcceptPayload(
            delivery_id=event.delivery_id, installation_id=install_id, repo=repo,
            pr_number=number or 0, check_run_id=run_id,
            head_sha=get_str(data, "check_run.head_sha", SHA_PATTERN), accepter=accepter)
        decision.enqueue(JOB_ACCEPT, payload, event_job_id("accept", repo, f"{run_id}:{accepter}"))
