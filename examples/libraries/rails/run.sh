#!/usr/bin/env bash
# Serves config.ru on 127.0.0.1:$PORT with Debian's puma: one process, PUMA_THREADS threads
# (default DB_POOL, as a Rails app sizes RAILS_MAX_THREADS to its database pool), so that
# many requests run at once and the loads queue for DB_POOL connections.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PORT:?PORT is not set}"
threads=${PUMA_THREADS:-${DB_POOL:-16}}
echo "rails instance ${INSTANCE:-0} on :$PORT ($threads puma threads)"
exec puma --environment production --bind "tcp://127.0.0.1:$PORT" --threads "$threads:$threads" \
  --workers 0 --quiet "$here/config.ru"
