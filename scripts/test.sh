#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ensure-packages.sh
source scripts/lib/ensure-node.sh
# command:Debian package
ensure_packages haproxy:haproxy pebble:pebble pebble-challtestsrv:pebble openssl:openssl script:bsdutils strace:strace systemd-analyze:systemd named:bind9 chromium:chromium etcd:etcd-server
ensure_node
npm ci --no-audit --no-fund
npm test
