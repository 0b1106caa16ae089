"""The fake GitHub's check runs and pull requests (see ``fake_github_model`` for the rest).

Check runs behave as GitHub documents: a ``conclusion`` sets ``status: completed``; each update's
``output.annotations`` are appended to the run's list; ``output`` fields sent replace the stored
ones. Every POST/PATCH body is kept in the run's ``history`` with ``at`` (Unix seconds).
"""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.fake_github_model import Answer, Ctx, FakeModel, NotFound, iso


def _apply(run: dict[str, Any], body: dict[str, Any]) -> None:
    for key in ("name", "details_url", "external_id", "started_at", "completed_at", "status"):
        if key in body:
            run[key] = body[key]
    if "conclusion" in body:
        run["conclusion"] = body["conclusion"]
        run["status"] = "completed"
    if run["status"] == "completed" and run["completed_at"] is None:
        run["completed_at"] = iso(time.time())
    output = body.get("output")
    if isinstance(output, dict):
        for key in ("title", "summary", "text"):
            if key in output:
                run["output"][key] = output[key]
        run["annotations"].extend(output.get("annotations") or [])


def _minimal_pull(model: FakeModel, pull: dict[str, Any], api_root: str) -> dict[str, Any]:
    repo = {"id": 526, "url": f"{api_root}/repos/{pull['owner']}/{pull['repo']}",
            "name": pull["repo"]}
    return {"url": f"{repo['url']}/pulls/{pull['number']}", "id": 7000 + int(pull["number"]),
            "number": int(pull["number"]),
            "head": {"ref": pull.get("head_ref", f"pr-{pull['number']}"),
                     "sha": pull["head_sha"], "repo": repo},
            "base": {"ref": pull.get("base_ref", "main"), "sha": pull["base_sha"], "repo": repo}}


def check_run_json(model: FakeModel, run: dict[str, Any], api_root: str) -> dict[str, Any]:
    """Render a stored check run as GitHub's ``check-run`` object."""
    out: dict[str, Any] = model.ex.get("checks/create", "201")
    url = f"{api_root}/repos/{run['owner']}/{run['repo']}/check-runs/{run['id']}"
    out.update(
        id=run["id"], node_id=f"CR_{run['id']}", head_sha=run["head_sha"], name=run["name"],
        external_id=run["external_id"], details_url=run["details_url"], url=url,
        html_url=f"https://github.com/{run['owner']}/{run['repo']}/runs/{run['id']}",
        status=run["status"], conclusion=run["conclusion"], started_at=run["started_at"],
        completed_at=run["completed_at"], check_suite={"id": run["check_suite_id"]},
        output={"title": run["output"]["title"], "summary": run["output"]["summary"],
                "text": run["output"]["text"], "annotations_count": len(run["annotations"]),
                "annotations_url": f"{url}/annotations"},
        pull_requests=[_minimal_pull(model, p, api_root) for p in model.config["pulls"].values()
                       if (p["owner"], p["repo"], p["head_sha"]) ==
                       (run["owner"], run["repo"], run["head_sha"])],
    )
    out["app"].update(id=model.app_numeric_id(), slug=model.config["app_slug"],
                      name=model.config["app_slug"])
    return out


def create_check_run(model: FakeModel, ctx: Ctx) -> Answer:
    """``POST /repos/{owner}/{repo}/check-runs``."""
    body, p = ctx.body, ctx.params
    suite_key = f"{p['owner']}/{p['repo']}@{body['head_sha']}"
    suite_id = model._suites.setdefault(suite_key, model.new_id())
    run: dict[str, Any] = {
        "id": model.new_id(), "owner": p["owner"], "repo": p["repo"], "name": body["name"],
        "head_sha": body["head_sha"], "status": "queued", "conclusion": None,
        "started_at": iso(time.time()), "completed_at": None, "external_id": "",
        "details_url": None, "check_suite_id": suite_id,
        "output": {"title": None, "summary": None, "text": None}, "annotations": [],
        "history": [{"method": "POST", "body": body, "at": time.time()}],
    }
    _apply(run, body)
    model.check_runs[run["id"]] = run
    return 201, check_run_json(model, run, ctx.api_root), {}


def update_check_run(model: FakeModel, ctx: Ctx) -> Answer:
    """``PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}``."""
    run = model.check_runs.get(int(ctx.params["check_run_id"]))
    if run is None or (run["owner"], run["repo"]) != (ctx.params["owner"], ctx.params["repo"]):
        raise NotFound(f"no check run {ctx.params['check_run_id']} in this repository")
    run["history"].append({"method": "PATCH", "body": ctx.body, "at": time.time()})
    _apply(run, ctx.body)
    return 200, check_run_json(model, run, ctx.api_root), {}


def _sha_for_ref(model: FakeModel, owner: str, repo: str, ref: str) -> str:
    """Resolve a branch name of a configured pull request to its SHA; SHAs pass through."""
    for p in model.config["pulls"].values():
        if (p["owner"], p["repo"]) == (owner, repo):
            if ref in (p.get("head_ref"), f"heads/{p.get('head_ref')}"):
                return str(p["head_sha"])
            if ref in (p.get("base_ref", "main"), f"heads/{p.get('base_ref', 'main')}"):
                return str(p["base_sha"])
    return ref


def list_check_runs_for_ref(model: FakeModel, ctx: Ctx) -> list[dict[str, Any]]:
    """Check runs on a ref, newest first; ``filter=latest`` (the default) keeps one per name."""
    p, q = ctx.params, ctx.query
    sha = _sha_for_ref(model, p["owner"], p["repo"], p["ref"])
    runs = [r for _, r in sorted(model.check_runs.items(), reverse=True)
            if (r["owner"], r["repo"], r["head_sha"]) == (p["owner"], p["repo"], sha)
            and q.get("check_name", r["name"]) == r["name"]
            and q.get("status", r["status"]) == r["status"]]
    if q.get("filter", "latest") == "latest":
        newest: dict[str, dict[str, Any]] = {}
        for r in runs:
            newest.setdefault(r["name"], r)
        runs = list(newest.values())
    return [check_run_json(model, r, ctx.api_root) for r in runs]


def _set_branch(branch: dict[str, Any], full_name: str, ref: str, sha: str, clone_url: str,
                api_root: str) -> None:
    owner, name = full_name.split("/", 1)
    branch.update(ref=ref, sha=sha, label=f"{owner}:{ref}")
    branch["user"]["login"] = owner
    branch["repo"].update(full_name=full_name, name=name, clone_url=clone_url,
                          url=f"{api_root}/repos/{full_name}",
                          html_url=f"https://github.com/{full_name}")
    branch["repo"]["owner"]["login"] = owner


def _fill_pull(out: dict[str, Any], cfg: dict[str, Any], full: str, api_root: str) -> str:
    """Set a pull request object's number, state, title, draft, URLs, author and base branch
    from its configuration; return the base repository's clone URL."""
    number = int(cfg["number"])
    out.update(number=number, id=7000 + number, state=cfg.get("state", "open"),
               title=cfg.get("title", f"Pull request {number}"), draft=cfg.get("draft", False),
               url=f"{api_root}/repos/{full}/pulls/{number}",
               html_url=f"https://github.com/{full}/pull/{number}")
    out["user"]["login"] = cfg.get("author", out["user"]["login"])
    clone_url: str = cfg.get("clone_url", f"https://github.com/{full}.git")
    _set_branch(out["base"], full, cfg.get("base_ref", "main"), cfg["base_sha"], clone_url,
                api_root)
    return clone_url


def get_pull(model: FakeModel, ctx: Ctx) -> Answer:
    """``GET /repos/{owner}/{repo}/pulls/{pull_number}`` from the configured pull request.

    Configured keys: ``head_sha``, ``base_sha`` (required), ``base_ref`` (main), ``head_ref``,
    ``clone_url``, ``head_repo_full_name`` (same repository; ``null`` for a deleted fork, which
    GitHub's REST schema does not allow, so the fake then reports an invalid response),
    ``head_clone_url``, ``state`` (open), ``title``, ``draft``, ``author`` (the ``user.login``;
    the spec example's ``octocat`` when absent).
    """
    cfg, p = model.pull(ctx), ctx.params
    full, number = f"{p['owner']}/{p['repo']}", int(p["pull_number"])
    out = model.ex.get("pulls/get", "200")
    clone_url = _fill_pull(out, cfg, full, ctx.api_root)
    head_full = cfg.get("head_repo_full_name", full)
    if head_full is None:
        out["head"]["repo"] = None
        out["head"].update(ref=cfg.get("head_ref", f"pr-{number}"), sha=cfg["head_sha"])
    else:
        _set_branch(out["head"], head_full, cfg.get("head_ref", f"pr-{number}"), cfg["head_sha"],
                    cfg.get("head_clone_url", clone_url if head_full == full
                            else f"https://github.com/{head_full}.git"), ctx.api_root)
    return 200, out, {}


def list_pull_files(model: FakeModel, ctx: Ctx) -> list[dict[str, Any]]:
    """``GET .../pulls/{n}/files``: the configured ``files`` names, shaped like GitHub's."""
    cfg = model.pull(ctx)
    template = model.ex.get("pulls/list-files", "200")[0]
    return [{**template, "filename": name, "status": "modified"} for name in cfg.get("files", [])]


def rerequest_suite(model: FakeModel, ctx: Ctx) -> Answer:
    """``POST .../check-suites/{id}/rerequest``: accepted, nothing else happens."""
    return 201, {}, {}


def list_pulls(model: FakeModel, ctx: Ctx) -> list[dict[str, Any]]:
    """``GET /repos/{owner}/{repo}/pulls``: the configured pull requests of the repository in
    the ``state`` asked (``open`` by default; ``all`` for every one), newest number first (as
    GitHub's default ``sort=created``, ``direction=desc``), shaped like GitHub's
    ``pull-request-simple``: number, state, draft, author, head and base as in `get_pull`."""
    p, wanted = ctx.params, ctx.query.get("state", "open")
    full = f"{p['owner']}/{p['repo']}"
    out = []
    for cfg in sorted(model.config["pulls"].values(), key=lambda c: -int(c["number"])):
        state = cfg.get("state", "open")
        if (cfg["owner"], cfg["repo"]) != (p["owner"], p["repo"]) or wanted not in (state, "all"):
            continue
        number = int(cfg["number"])
        item: dict[str, Any] = model.ex.get("pulls/list", "200")[0]
        clone_url = _fill_pull(item, cfg, full, ctx.api_root)
        head_full = cfg.get("head_repo_full_name", full) or full
        _set_branch(item["head"], head_full, cfg.get("head_ref", f"pr-{number}"),
                    cfg["head_sha"], cfg.get("head_clone_url", clone_url), ctx.api_root)
        out.append(item)
    return out


def list_installations(model: FakeModel, ctx: Ctx) -> list[dict[str, Any]]:
    """``GET /app/installations`` (App JWT): the configured ``installations`` (1 when none)."""
    out = []
    for installation_id in model.config.get("installations") or [1]:
        item: dict[str, Any] = model.ex.get("apps/list-installations", "200")[0]
        item.update(id=int(installation_id), app_id=model.app_numeric_id(),
                    app_slug=model.config["app_slug"],
                    access_tokens_url=f"{ctx.api_root}/app/installations/{installation_id}"
                                      "/access_tokens")
        out.append(item)
    return out


def list_installation_repos(model: FakeModel, ctx: Ctx) -> list[dict[str, Any]]:
    """``GET /installation/repositories``: every repository the fake knows of (its configured
    pull requests' and files'), for any installation, sorted by full name."""
    names = {f"{p['owner']}/{p['repo']}": p.get("clone_url") for p in
             model.config["pulls"].values()}
    for full in model.config["contents"]:
        names.setdefault(full, None)
    template = model.ex.get("apps/list-repos-accessible-to-installation", "200")["repositories"][0]
    out = []
    for index, (full, clone_url) in enumerate(sorted(names.items())):
        owner, name = full.split("/", 1)
        repo = {**template, "id": 9000 + index, "name": name, "full_name": full,
                "url": f"{ctx.api_root}/repos/{full}", "html_url": f"https://github.com/{full}",
                "clone_url": clone_url or f"https://github.com/{full}.git",
                "owner": {**template["owner"], "login": owner}}
        out.append(repo)
    return out
