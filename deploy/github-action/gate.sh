#!/bin/sh
# The Action's gate step: llmgate action reads GITHUB_EVENT_PATH, writes GITHUB_STEP_SUMMARY
# and the annotations, and exits as `llmgate run` does. Inputs arrive as environment variables
# (never interpolated into this script), so a branch name cannot inject a command. With
# LLMGATE_COMMENT=true, llmgate posts the sticky comment with LLMGATE_GITHUB_TOKEN.
set -eu
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
