#!/bin/sh
# The Action's gate step: llmgate action reads GITHUB_EVENT_PATH, writes GITHUB_STEP_SUMMARY,
# the annotations, the reports (RUNNER_TEMP) and the step's outputs (GITHUB_OUTPUT), and exits
# as `llmgate run` does. Inputs arrive as environment variables
# (never interpolated into this script), so a branch name cannot inject a command. With
# LLMGATE_COMMENT=true, llmgate posts the sticky comment with LLMGATE_GITHUB_TOKEN.
# The response cache is the job's own, in RUNNER_TEMP (emptied before and after every job, on
# self-hosted runners too), so no pull request's job reads answers another one's wrote; a
# workflow that restores a cache there keys it by the base branch (docs/local-run.md).
set -eu
export LLMGATE_CACHE_DIR="${LLMGATE_CACHE_DIR:-${RUNNER_TEMP:?}/llmgate-cache}"
set -- action
if [ -n "${LLMGATE_BASELINE_STORE:-}" ]; then
  set -- "$@" --baseline-store "$LLMGATE_BASELINE_STORE"
fi
if [ "${LLMGATE_ALLOW_UNDECIDED:-false}" = "true" ]; then
  set -- "$@" --allow-undecided
fi
if [ "${LLMGATE_COMMENT:-false}" = "true" ]; then
  set -- "$@" --comment
  if [ -n "${LLMGATE_COMMENT_AUTHOR:-}" ]; then
    set -- "$@" --comment-author "$LLMGATE_COMMENT_AUTHOR"
  fi
else
  unset LLMGATE_GITHUB_TOKEN
fi
exec "${LLMGATE:-llmgate}" "$@"
