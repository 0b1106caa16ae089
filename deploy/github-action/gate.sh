#!/bin/sh
# The Action's gate step: llmgate action reads GITHUB_EVENT_PATH, writes GITHUB_STEP_SUMMARY
# and the annotations, and exits as `llmgate run` does. Inputs arrive as environment variables
# (never interpolated into this script), so a branch name cannot inject a command.
set -eu
set -- action
if [ -n "${LLMGATE_BASELINE_STORE:-}" ]; then
  set -- "$@" --baseline-store "$LLMGATE_BASELINE_STORE"
fi
if [ "${LLMGATE_ALLOW_UNDECIDED:-false}" = "true" ]; then
  set -- "$@" --allow-undecided
fi
exec "${LLMGATE:-llmgate}" "$@"
