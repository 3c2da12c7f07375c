#!/usr/bin/env bash
# The guards `npm run check` runs (type-check, lint, format, layers, unused code), in two lanes at
# once so a 2-core machine does them in about the time of the longest one (type-aware lint):
#   lane 1: lint;  lane 2: type-check, then format, layers and unused code.
# Each lane's output is kept and printed whole when it ends, so two lanes never interleave lines.
# Fails when any guard fails, after both lanes have finished.
set -uo pipefail
cd "$(dirname "$0")/.."

out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT

lane() {
  local name=$1
  shift
  local step
  for step in "$@"; do
    echo "> npm run ${step}"
    npm run -s "${step}" || return 1
  done >"${out}/${name}" 2>&1
}

lane lint lint &
lint_pid=$!
lane rest typecheck format:check layers unused &
rest_pid=$!

status=0
wait "${lint_pid}" || status=1
cat "${out}/lint"
wait "${rest_pid}" || status=1
cat "${out}/rest"
if ((status)); then
  echo "check: a guard failed (its output is above)" >&2
fi
exit "${status}"
