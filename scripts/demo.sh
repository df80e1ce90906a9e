#!/usr/bin/env bash
# The README's run command: set up, then run certificatee on its embedded default (Ctrl-C stops everything).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ensure-packages.sh
source scripts/lib/ensure-node.sh
# HAProxy makes the demo show hot swaps; without it (and without root to install it) the demo still runs.
if [ "$(id -u)" -eq 0 ] || command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ]; then
	ensure_packages haproxy:haproxy || true
fi
ensure_node
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run --silent build
exec node dist/cli/main.js demo "$@"
