#!/usr/bin/env bash
# Installs every system binary the test suite starts for real: nats-server, promtool, h2load
# (the bench smoke test runs the harness, which needs h2load and taskset), chromium (the status
# pages' browser tests drive it with playwright-core; nothing is downloaded), grpcio for the system
# Python (a test puts a grpcio engine behind the sidecar, as Python engines serve gRPC), and with
# --bench the comparison proxies haproxy and nginx. Idempotent; needs root only when something is
# missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
[[ -x /usr/bin/chromium ]] || need+=(chromium)
/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1 || need+=(python3-grpcio)
if [[ "${1:-}" == "--bench" ]]; then
  command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
  command -v nginx >/dev/null 2>&1 || need+=(nginx)
fi
if ((${#need[@]})); then
  echo "setup: installing ${need[*]} (Debian packages)" >&2
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to apt-get install ${need[*]}; install them and rerun" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [[ ! -d node_modules/.bin ]]; then
  npm ci --no-audit --no-fund
fi
# Always rebuild: integration tests run the compiled CLI (bin/dynamo-sidecar -> dist/).
npx tsc -p tsconfig.json
