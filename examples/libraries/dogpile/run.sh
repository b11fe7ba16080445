#!/usr/bin/env bash
# Runs app.py in the venv that `scripts/install-deps --for-libraries` made under target/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${DOGPILE_VENV:-$here/../../../target/libraries/dogpile/venv}
[ -x "$venv/bin/python" ] || { echo "no venv at $venv: scripts/install-deps --for-libraries" >&2; exit 3; }
exec "$venv/bin/python" "$here/app.py"
