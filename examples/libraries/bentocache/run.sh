#!/usr/bin/env bash
# Runs server.mjs with the node_modules that `scripts/install-deps --for-libraries` installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$here/node_modules/bentocache" ] || { echo "bentocache is not installed: scripts/install-deps --for-libraries" >&2; exit 3; }
exec node "$here/server.mjs"
