#!/usr/bin/env bash
# The HAProxy version matrix (docs/testing.md): the test files that start HAProxy, on Node 22, against the
# HAProxy builds in shared/haproxy/<version>/ (beside the clone; HAPROXY_MATRIX_DIR overrides). Run after
# scripts/test.sh (it installs what the tests need and builds dist/). Extra arguments go to vitest,
# e.g. `--project haproxy-3.2.0` or a file.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ensure-node.sh
use_node 22
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run --silent build
NO_COLOR=1 exec npx vitest run --config vitest.matrix.config.ts "$@"
