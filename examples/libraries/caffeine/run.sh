#!/usr/bin/env bash
# Runs Main.java with Debian's Caffeine and Postgres JDBC jars (the JDK compiles the one source
# file at start, about a second: no build step, no Maven).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cp=/usr/share/java/caffeine.jar:/usr/share/java/postgresql.jar
for jar in ${cp//:/ }; do
  [ -r "$jar" ] || { echo "$jar not found: scripts/install-deps --for-libraries" >&2; exit 3; }
done
# nodelay: the JDK server writes headers and body apart; with Nagle's algorithm the body waits
# for the client's delayed ACK (40 ms a request).
exec java -Dsun.net.httpserver.nodelay=true ${JAVA_OPTS:-} -cp "$cp" "$here/Main.java"
