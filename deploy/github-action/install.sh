#!/bin/sh
# The Action's install step: llmgate into a virtual environment of its own, LLMGATE_VENV
# (action.yml: $RUNNER_TEMP/llmgate-venv), from this action's own repository and never by name
# from the package index, where the name `llmgate` is another project's.
#
# LLMGATE_VERSION (the `version` input) is one of:
#   empty (the default)    the repository this action was checked out from, at the ref the
#                          workflow pinned (`uses: OWNER/llmgate/deploy/github-action@v1`):
#                          $GITHUB_ACTION_PATH/../..
#   a wheel                a path or URL ending .whl, of this project's distribution
#                          (`python -m build` writes it to dist/)
#   a git ref              a tag, branch or commit of the action's repository
#                          (LLMGATE_ACTION_REPOSITORY, on GITHUB_SERVER_URL)
# A package name, a version number or a requirement (`llmgate`, `llmgate==0.8.3`, `0.8.3`,
# `llmgate[local-embeddings]`) is refused: exit 2 before anything is installed.
#
# Then it checks that `llmgate` on PATH (the venv's bin first) is the venv's, and that
# `llmgate --version` prints the version it installed (the checkout's worker/version.py, the
# wheel's file name, or the installed distribution's metadata for a git ref); exit 3 if not.
# It adds the venv's bin to GITHUB_PATH, so the job's later steps run the same llmgate.
set -eu
say() { echo "llmgate: install: $*" >&2; }
root=$(cd "${GITHUB_ACTION_PATH:?}/../.." && pwd)
venv=${LLMGATE_VENV:?}
version=${LLMGATE_VERSION:-}
dist=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$root/pyproject.toml" | head -n 1)
wheel_dist=$(echo "$dist" | tr '.-' '__')

refuse() {
  say "version '$version' $1"
  say "give a git ref of this action's repository (a tag such as v0.1.0, a branch or a" \
      "commit), a wheel (a path or URL ending .whl), or leave it empty for the action's own" \
      "checkout; llmgate is never installed by name from the package index"
  exit 2
}

case $version in
  *'='* | *'<'* | *'>'* | *'!'* | *'~'* | *'['* | *']'* | *';'* | *','* | *' '* | *'@'*)
    refuse "is a requirement, not a git ref" ;;
  "") source=$root ;;
  *.whl)
    source=$version
    file=${version##*/}
    [ "${file%%-*}" = "$wheel_dist" ] || refuse "is not a wheel of $dist (${file%%-*})"
    expected=$(echo "$file" | cut -d- -f2) ;;
  *://*) refuse "is a URL that is not a wheel (.whl)" ;;
  *)
    case $version in *[!0-9.]*) ;; *)
      refuse "is a version number, not a git ref (a release's tag is v$version)" ;; esac
    lower=$(echo "$version" | tr 'A-Z_.' 'a-z--')
    case $lower in llmgate | llmgate-app | "$dist") refuse "is a package name, not a git ref" ;; esac
    git check-ref-format --allow-onelevel "$version" || refuse "is not a git ref name"
    repository=${LLMGATE_ACTION_REPOSITORY:-${GITHUB_ACTION_REPOSITORY:-}}
    [ -n "$repository" ] || refuse "is a git ref, but the action's repository is unknown"
    source="git+${GITHUB_SERVER_URL:-https://github.com}/$repository@$version" ;;
esac
if [ -z "$version" ]; then
  expected=$(sed -n 's/^VERSION = "\(.*\)"$/\1/p' "$root/worker/version.py")
fi

# The venv without pip of its own when python3 has pip (`pip --python`): seconds faster.
if python3 -m pip --version >/dev/null 2>&1; then
  python3 -m venv --without-pip "$venv"
  python3 -m pip --python "$venv/bin/python" install --quiet "$source"
else
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "$source"
fi
if [ -z "${expected:-}" ]; then  # a git ref: the version the installed distribution declares
  expected=$("$venv/bin/python" -c 'import importlib.metadata, sys
print(importlib.metadata.version(sys.argv[1]))' "$dist")
fi

PATH="$venv/bin:$PATH"
found=$(command -v llmgate || true)
if [ "$found" != "$venv/bin/llmgate" ]; then
  say "$source installed no llmgate command in $venv (llmgate on PATH: ${found:-none})"
  exit 3
fi
printed=$(llmgate --version 2>&1 || true)
if [ "$printed" != "llmgate $expected" ]; then
  say "llmgate --version printed '$printed', not 'llmgate $expected' ($source)"
  exit 3
fi
if [ -n "${GITHUB_PATH:-}" ]; then
  echo "$venv/bin" >> "$GITHUB_PATH"
fi
echo "llmgate: installed $printed from $source into $venv"
