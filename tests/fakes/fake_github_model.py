"""What the fake GitHub remembers, and how it answers each endpoint.

Every answer starts from the example GitHub's REST description gives for that response
(``tests/fixtures/github/rest-subset.json``) and overwrites ids and fields, so answers keep the
real shape. Five spec examples do not match their own schema (see the fixtures README) and are
patched in ``Examples``. Everything here is plain JSON data, so ``snapshot()`` can be served over
HTTP or written to a file. No I/O and no locking: ``fake_github.FakeGitHub`` serialises access.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.fake_github_faults import SecondaryLimits

#: Where GitHub's answers about a locked conversation point.
LOCKING_DOCS = "https://docs.github.com/articles/locking-conversations/"
#: Collaborator role -> the legacy ``permission`` GitHub reports for it.
ROLE_TO_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write",
                      "triage": "read", "read": "read", "none": "none"}


def iso(epoch_s: float) -> str:
    """Return a GitHub-style UTC timestamp, e.g. ``2026-01-02T03:04:05Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


class NotFound(Exception):
    """The resource does not exist: answer 404; ``expected`` says whether that is legitimate."""

    def __init__(self, reason: str, expected: bool = False) -> None:
        super().__init__(reason)
        self.expected = expected


@dataclass
class Ctx:
    """One request as handlers see it: path params, query, parsed JSON body, URLs."""

    params: dict[str, str]
    query: dict[str, str]
    body: Any
    api_root: str  # e.g. http://127.0.0.1:PORT or http://127.0.0.1:PORT/api/v3
    headers: dict[str, str] = field(default_factory=dict)


Answer = tuple[int, Any, dict[str, str]]


class Examples:
    """The first example of each documented success response, patched where the spec is wrong."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._by_op: dict[tuple[str, str], Any] = {}
        for ep in spec["endpoints"]:
            for status, resp in ep["responses"].items():
                content = resp.get("content", {}).get("application/json", {})
                examples = list(content.get("examples", {}).values())
                if examples:
                    self._by_op[(ep["operationId"], status)] = examples[0]
        perm = self._by_op[("repos/get-collaborator-permission-level", "200")]
        perm["user"]["role_name"] = perm["role_name"]
        for team in self._by_op[("pulls/get", "200")]["requested_teams"]:
            team.setdefault("type", "organization")
        self._by_op[("checks/rerequest-suite", "201")] = {}
        for pull in self._by_op[("pulls/list", "200")]:
            for team in pull["requested_teams"]:
                team.setdefault("type", "organization")
        for installation in self._by_op[("apps/list-installations", "200")]:
            # the schema wants the account to be a user *and* an enterprise (allOf)
            installation["account"].update(name="octocat", slug="octocat",
                                           created_at="2019-01-26T19:01:12Z",
                                           updated_at="2019-01-26T19:14:43Z")

    def get(self, operation: str, status: str) -> Any:
        """Return a deep copy of the example for ``operation``'s ``status`` answer."""
        return copy.deepcopy(self._by_op[(operation, status)])


def _user(template: dict[str, Any], login: str, kind: str, user_id: int) -> dict[str, Any]:
    user = copy.deepcopy(template)
    user.update(login=login, type=kind, id=user_id,
                url=f"https://api.github.com/users/{login}", html_url=f"https://github.com/{login}")
    return user


class FakeModel:
    """The fake's configuration and everything it recorded."""

    def __init__(self, examples: Examples) -> None:
        self.ex = examples
        self.limits = SecondaryLimits()
        self.reset_config()
        self.reset()

    def reset_config(self) -> None:
        """Return the configuration to its defaults (no App key: every JWT is refused)."""
        self.config: dict[str, Any] = {
            "app_id": None, "public_key_pem": None, "app_slug": "llmgate",
            "installations": None, "collaborators": {}, "pulls": {}, "contents": {},
            "token_ttl_s": 3600, "locked": [], "renamed": [], "secondary_limits": None,
            "clock_offset_s": 0,
        }
        self.limits.configure(None)

    def reset(self) -> None:
        """Forget every record (not the configuration)."""
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        self.reactions: list[dict[str, Any]] = []
        self.tokens: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []
        self.limits.reset()
        self._next_id = 1000
        self._suites: dict[str, int] = {}

    def now(self) -> float:
        """The fake GitHub's clock, Unix seconds: this machine's plus ``clock_offset_s`` (set
        it to stand for a worker whose clock is behind, or, negative, ahead). JWT claims,
        token expiry and the ``Date`` header follow it."""
        return time.time() + float(self.config.get("clock_offset_s") or 0)

    def revoke(self, token: str) -> None:
        """Refuse ``token`` from now on ("Bad credentials"), as GitHub does a revoked one."""
        if token in self.tokens:
            self.tokens[token]["revoked"] = True

    def new_id(self) -> int:
        """Return a fresh id, ascending like GitHub's."""
        self._next_id += 1
        return self._next_id

    @property
    def bot_login(self) -> str:
        """The login of the App's bot user, ``<slug>[bot]`` unless configured."""
        return str(self.config.get("bot_login") or f"{self.config['app_slug']}[bot]")

    def app_numeric_id(self) -> int:
        """The configured App id as an integer (1 when it is a Client ID or unset)."""
        app_id = str(self.config.get("app_id") or "1")
        return int(app_id) if app_id.isdigit() else 1

    # --------------------------------------------------------------- configuration
    def apply_setup(self, cfg: dict[str, Any]) -> None:
        """Merge a ``/_fake/setup`` body into the configuration (see ``fake_github``)."""
        if cfg.get("reset_config"):
            self.reset_config()
        if cfg.get("reset") or cfg.get("reset_config"):
            self.reset()
        for key in ("app_id", "public_key_pem", "app_slug", "bot_login", "installations",
                    "token_ttl_s", "secondary_limits", "clock_offset_s"):
            if key in cfg:
                self.config[key] = str(cfg[key]) if key == "app_id" else cfg[key]
        self.limits.configure(self.config["secondary_limits"])
        self.config["collaborators"].update(cfg.get("collaborators", {}))
        for repo, files in cfg.get("contents", {}).items():
            self.config["contents"].setdefault(repo, {}).update(files)
        for pull in cfg.get("pulls", []):
            self.config["pulls"][f"{pull['owner']}/{pull['repo']}#{int(pull['number'])}"] = pull
        for seed in cfg.get("comments", []):
            self._add_comment(seed["owner"], seed["repo"], int(seed["issue_number"]),
                              seed["body"], seed.get("user_login", "octocat"),
                              seed.get("user_type", "User"))
        if cfg.get("clear_faults"):
            self.faults.clear()
        self.faults.extend(dict(f) for f in cfg.get("faults", []))
        self.config["locked"].extend(dict(lock) for lock in cfg.get("locked", []))
        for move in cfg.get("renamed", []):
            self._move(dict(move))

    # ------------------------------------------------------------- moved repositories
    def _move(self, move: dict[str, Any]) -> None:
        """Rename or transfer a repository: what the fake holds of it (check runs, comments,
        pull requests, files, locks) goes with it, and its old paths redirect (`moved`)."""
        (old_owner, old_repo), (new_owner, new_repo) = (
            move["from"].split("/"), move["to"].split("/"))
        for record in (*self.check_runs.values(), *self.comments.values(),
                       *self.config["pulls"].values(), *self.config["locked"]):
            if (record["owner"], record["repo"]) == (old_owner, old_repo):
                record.update(owner=new_owner, repo=new_repo)
        self.config["pulls"] = {f"{p['owner']}/{p['repo']}#{int(p['number'])}": p
                                for p in self.config["pulls"].values()}
        if move["from"] in self.config["contents"]:
            self.config["contents"][move["to"]] = self.config["contents"].pop(move["from"])
        self.config["renamed"].append(move)

    def moved(self, method: str, target: str, api_root: str) -> Answer | None:
        """The redirect GitHub answers at a renamed or transferred repository's old path, or
        None: 301 for GET, 307 otherwise ("repeat the request verbatim"), ``Location`` on
        ``/repositories/{id}/...`` (GitHub docs, "Best practices for using the REST API")."""
        for move in self.config["renamed"]:
            old = f"/repos/{move['from']}"
            if target == old or target.startswith((old + "/", old + "?")):
                url = f"{api_root}/repositories/{int(move['id'])}{target[len(old):]}"
                status = 301 if method in ("GET", "HEAD") else 307
                body = {"message": "Moved Permanently", "url": url,
                        "documentation_url": "https://docs.github.com/v3/#http-redirects"}
                return status, body, {"location": url}
        return None

    def by_id(self, target: str) -> str:
        """Return ``target`` with ``/repositories/{id}`` (a moved repository's redirect
        target) written as the repository's ``/repos/{owner}/{repo}`` path."""
        for move in self.config["renamed"]:
            prefix = f"/repositories/{int(move['id'])}"
            if target == prefix or target.startswith((prefix + "/", prefix + "?")):
                return f"/repos/{move['to']}{target[len(prefix):]}"
        return target

    # ------------------------------------------------------------------ locking
    def _locked(self, owner: str, repo: str, number: int | None, comment_id: int | None) -> bool:
        """Whether the conversation of issue ``number`` (or the one ``comment_id`` is on) is
        locked: configured under ``locked`` as ``{owner, repo, issue_number, comment_ids?}``
        (``comment_ids``: comments the fake never saw, e.g. a webhook fixture's)."""
        if number is None and comment_id in self.comments:
            number = self.comments[comment_id]["issue_number"]
        return any((lock["owner"], lock["repo"]) == (owner, repo) and (
            int(lock["issue_number"]) == number or comment_id in lock.get("comment_ids", ()))
            for lock in self.config["locked"])

    def snapshot(self) -> dict[str, Any]:
        """Return a deep copy of the configuration (minus the key) and all records."""
        config = {k: v for k, v in self.config.items() if k != "public_key_pem"}
        return copy.deepcopy({
            "config": config, "bot_login": self.bot_login,
            "check_runs": [self.check_runs[k] for k in sorted(self.check_runs)],
            "comments": [self.comments[k] for k in sorted(self.comments)],
            "reactions": self.reactions,
            "tokens": [{"token": t, **v} for t, v in self.tokens.items()],
            "requests": self.requests, "violations": self.violations, "faults": self.faults,
        })

    # ---------------------------------------------------------------------- tokens
    def issue_token(self, ctx: Ctx) -> Answer:
        """``POST /app/installations/{id}/access_tokens``: a random ``ghs_`` token, 1 h TTL."""
        installation_id = int(ctx.params["installation_id"])
        allowed = self.config.get("installations")
        if allowed is not None and installation_id not in allowed:
            raise NotFound(f"installation {installation_id} is not configured")
        token = "ghs_" + secrets.token_hex(24)
        expires = self.now() + float(self.config["token_ttl_s"])
        self.tokens[token] = {"installation_id": installation_id, "expires_at": expires}
        out = self.ex.get("apps/create-installation-access-token", "201")
        out.pop("repositories", None)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        out.update(token=token, expires_at=iso(expires), repository_selection="all",
                   permissions=body.get("permissions") or {"checks": "write", "issues": "write",
                                                          "contents": "read", "metadata": "read",
                                                          "pull_requests": "read"})
        return 201, out, {}

    def token_installation(self, token: str) -> int | None:
        """Return the installation of a live token, or None when unknown, expired or revoked."""
        info = self.tokens.get(token)
        if info is None or info["expires_at"] <= self.now() or info.get("revoked"):
            return None
        return int(info["installation_id"])

    # ------------------------------------------------------------------ app level
    def get_app(self, ctx: Ctx) -> Answer:
        """``GET /app``."""
        out = self.ex.get("apps/get-authenticated", "200")
        slug = self.config["app_slug"]
        out.update(id=self.app_numeric_id(), slug=slug, name=slug,
                   html_url=f"https://github.com/apps/{slug}")
        return 200, out, {}

    def get_repo_installation(self, ctx: Ctx) -> Answer:
        """``GET /repos/{owner}/{repo}/installation``."""
        out = self.ex.get("apps/get-repo-installation", "200")
        installations = self.config.get("installations") or [1]
        out.update(id=int(installations[0]), app_id=self.app_numeric_id(),
                   app_slug=self.config["app_slug"])
        out["account"]["login"] = ctx.params["owner"]
        return 200, out, {}

    # ------------------------------------------------------------------ comments
    def _add_comment(self, owner: str, repo: str, number: int, body: str, login: str,
                     kind: str) -> dict[str, Any]:
        now = iso(time.time())
        comment: dict[str, Any] = {
            "id": self.new_id(), "owner": owner, "repo": repo, "issue_number": number,
            "body": body, "user": {"login": login, "type": kind},
            "created_at": now, "updated_at": now, "history": [body]}
        self.comments[comment["id"]] = comment
        return comment

    def comment_json(self, c: dict[str, Any], api_root: str) -> dict[str, Any]:
        """Render a stored comment as GitHub's ``issue-comment`` object."""
        out: dict[str, Any] = self.ex.get("issues/create-comment", "201")
        repo_path = f"{c['owner']}/{c['repo']}"
        out.update(
            id=c["id"], node_id=f"IC_{c['id']}", body=c["body"],
            url=f"{api_root}/repos/{repo_path}/issues/comments/{c['id']}",
            html_url=f"https://github.com/{repo_path}/pull/{c['issue_number']}"
                     f"#issuecomment-{c['id']}",
            issue_url=f"{api_root}/repos/{repo_path}/issues/{c['issue_number']}",
            created_at=c["created_at"], updated_at=c["updated_at"],
            author_association="NONE" if c["user"]["type"] == "Bot" else "COLLABORATOR",
            user=_user(out["user"], c["user"]["login"], c["user"]["type"], 40000 + c["id"] % 97),
        )
        return out

    def list_comments(self, ctx: Ctx) -> list[dict[str, Any]]:
        """Comments of one issue in ascending id order (``since`` honoured), as JSON."""
        p, since = ctx.params, ctx.query.get("since")
        return [self.comment_json(c, ctx.api_root) for _, c in sorted(self.comments.items())
                if (c["owner"], c["repo"], c["issue_number"]) ==
                (p["owner"], p["repo"], int(p["issue_number"]))
                and (since is None or c["updated_at"] >= since)]

    def create_comment(self, ctx: Ctx) -> Answer:
        """``POST .../issues/{n}/comments`` as the App's bot.

        A locked conversation answers 403 with GitHub's message (an App is not a collaborator
        who may still comment; GitHub docs "Locking conversations", and the answer other Apps
        report, e.g. probot/stale#25, renovatebot/renovate#6215).
        """
        p = ctx.params
        if self._locked(p["owner"], p["repo"], int(p["issue_number"]), None):
            return 403, {"message": "Unable to create comment because issue is locked.",
                         "documentation_url": LOCKING_DOCS}, {}
        c = self._add_comment(p["owner"], p["repo"], int(p["issue_number"]), ctx.body["body"],
                              self.bot_login, "Bot")
        return 201, self.comment_json(c, ctx.api_root), {}

    def _comment(self, ctx: Ctx) -> dict[str, Any] | None:
        c = self.comments.get(int(ctx.params["comment_id"]))
        if c is None or (c["owner"], c["repo"]) != (ctx.params["owner"], ctx.params["repo"]):
            return None
        return c

    def update_comment(self, ctx: Ctx) -> Answer:
        """``PATCH .../issues/comments/{id}``; the edit is appended to the comment's history."""
        c = self._comment(ctx)
        if c is None:
            raise NotFound(f"no comment {ctx.params['comment_id']} in this repository")
        c["body"] = ctx.body["body"]
        c["history"].append(c["body"])
        c["updated_at"] = iso(time.time())
        return 200, self.comment_json(c, ctx.api_root), {}

    def react(self, ctx: Ctx) -> Answer:
        """``POST .../comments/{id}/reactions``: 201 when new, 200 when it already existed.

        Comments the fake never saw (a webhook fixture's) are taken to exist. On a locked
        conversation "reactions ... are disabled for all users" (GitHub docs "Locking
        conversations"): 422, the one error status the REST description gives this endpoint
        (GitHub does not document the message; the fake's follows the comment's).
        """
        comment_id, content = int(ctx.params["comment_id"]), ctx.body["content"]
        if self._locked(ctx.params["owner"], ctx.params["repo"], None, comment_id):
            return 422, {"message": "Unable to create reaction because issue is locked.",
                         "documentation_url": LOCKING_DOCS}, {}
        key = {"owner": ctx.params["owner"], "repo": ctx.params["repo"],
               "comment_id": comment_id, "content": content, "user": self.bot_login}
        existing = next((r for r in self.reactions if {k: r[k] for k in key} == key), None)
        status = 200 if existing is not None else 201
        if existing is None:
            existing = {**key, "id": self.new_id(), "created_at": iso(time.time())}
            self.reactions.append(existing)
        out = self.ex.get("reactions/create-for-issue-comment", str(status))
        out.update(id=existing["id"], node_id=f"REA_{existing['id']}", content=content,
                   created_at=existing["created_at"],
                   user=_user(out["user"], self.bot_login, "Bot", 41000))
        return status, out, {}

    # --------------------------------------------------------------- repository
    def permission(self, ctx: Ctx) -> Answer:
        """``GET .../collaborators/{username}/permission``; unknown users have ``none``.

        A username configured as ``null`` does not exist: 404.
        """
        username = ctx.params["username"]
        collaborators = self.config["collaborators"]
        if username in collaborators and collaborators[username] is None:
            raise NotFound(f"user {username} does not exist", expected=True)
        role = collaborators.get(username, "none")
        out = self.ex.get("repos/get-collaborator-permission-level", "200")
        out.update(permission=ROLE_TO_PERMISSION.get(role, "read"), role_name=role)
        out["user"] = _user(out["user"], username, "User", 42000)
        out["user"]["role_name"] = role
        return 200, out, {}

    def pull(self, ctx: Ctx) -> dict[str, Any]:
        """Return the configured pull request of this request, or raise NotFound."""
        p = ctx.params
        key = f"{p['owner']}/{p['repo']}#{int(p['pull_number'])}"
        if key not in self.config["pulls"]:
            raise NotFound(f"pull request {key} is not configured in the fake")
        return dict(self.config["pulls"][key])

    def content(self, ctx: Ctx) -> Answer:
        """``GET .../contents/{path}`` for a file configured under ``contents``."""
        p = ctx.params
        files = self.config["contents"].get(f"{p['owner']}/{p['repo']}", {})
        if p["path"] not in files:
            raise NotFound(f"no file {p['path']!r}", expected=True)
        text: str = files[p["path"]]
        if "raw" in ctx.headers.get("accept", ""):
            return 200, text, {"content-type": "application/vnd.github.raw"}
        raw = text.encode("utf-8")
        sha = hashlib.sha1(b"blob %d\0" % len(raw) + raw, usedforsecurity=False).hexdigest()
        out = self.ex.get("repos/get-content", "200")
        out.update(type="file", encoding="base64", size=len(raw), sha=sha,
                   name=p["path"].rsplit("/", 1)[-1], path=p["path"],
                   content=base64.b64encode(raw).decode("ascii"))
        return 200, out, {}
