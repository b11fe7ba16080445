#!/usr/bin/env bash
# Serves app.php on 127.0.0.1:$PORT the way a PHP host does: nginx in front, php-fpm behind it
# with DB_POOL workers (pm = static), each one request at a time with its own persistent
# Redis and Postgres connection. Everything this instance needs (configs, sockets, the
# LockRegistry's lock files) lives in a directory of its own, removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PORT:?PORT is not set}"
workers=${DB_POOL:-16}
fpm=$(command -v php-fpm8.2 || command -v php-fpm || ls /usr/sbin/php-fpm* 2>/dev/null | head -1)
[ -x "$fpm" ] || { echo "php-fpm not found: scripts/install-deps --for-libraries" >&2; exit 3; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)

dir=$(mktemp -d "${TMPDIR:-/tmp}/symfony-app-${INSTANCE:-0}.XXXXXX")
chmod 755 "$dir"   # nginx's workers (nobody when started as root) reach the socket through it
pids=()
# php-fpm's master calls setsid() even in the foreground, so a signal to this process group
# (how stampede stops an app) does not reach it: it is stopped here by its own group, and it
# gets SIGTERM from the kernel if this script dies first (setpriv --pdeathsig).
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  [ -z "${fpm_pid:-}" ] || kill -TERM -- "-$fpm_pid" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -n "${fpm_pid:-}" ] && kill -0 -- "-$fpm_pid" 2>/dev/null || break
    sleep 0.1
  done
  [ -z "${fpm_pid:-}" ] || kill -KILL -- "-$fpm_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 0' TERM INT

# The LockRegistry hashes a key to one of these files and flocks it; private to this instance.
for i in $(seq 0 22); do : > "$dir/lock.$i"; done
export SYMFONY_LOCK_DIR=$dir

cat > "$dir/php-fpm.conf" <<CONF
[global]
error_log = /proc/self/fd/2
daemonize = no
[app]
listen = $dir/fpm.sock
listen.mode = 0666
listen.backlog = 4096
pm = static
pm.max_children = $workers
clear_env = no
catch_workers_output = yes
php_admin_value[error_log] = /proc/self/fd/2
CONF

cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log stderr warn;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $dir/body;
  fastcgi_temp_path $dir/fastcgi;
  proxy_temp_path $dir/proxy;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    location / {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $here/app.php;
      fastcgi_read_timeout 300s;
      fastcgi_pass unix:$dir/fpm.sock;
    }
  }
}
CONF

root_flag=()
[ "$(id -u)" -eq 0 ] && root_flag=(--allow-to-run-as-root)
deathsig=()
command -v setpriv >/dev/null 2>&1 && deathsig=(setpriv --pdeathsig TERM)
"${deathsig[@]}" "$fpm" -F -y "$dir/php-fpm.conf" -p "$dir" "${root_flag[@]}" &
fpm_pid=$!
pids+=("$fpm_pid")
# nginx opens PORT only once php-fpm listens: readiness is the port accepting connections, and
# a request before the socket exists would be a 502.
for _ in $(seq 300); do
  [ -S "$dir/fpm.sock" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || exit 3
  sleep 0.1
done
[ -S "$dir/fpm.sock" ] || { echo "php-fpm did not listen within 30 s" >&2; exit 3; }
"$nginx" -p "$dir" -c "$dir/nginx.conf" -e stderr -g 'daemon off;' &
pids+=($!)
echo "symfony instance ${INSTANCE:-0} on :$PORT ($workers php-fpm workers, lock files in $dir)"
# Either one ending ends the instance (and the trap stops the other).
wait -n
