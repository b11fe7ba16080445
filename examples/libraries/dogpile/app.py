"""A reference app for stampede's `--target`: GET /items/{key} reads through dogpile.cache's
Redis backend (get_or_create, with its distributed lock by default) and loads through the load
ledger, so the herds the library lets through are counted exactly by Postgres. Settings come
from the environment (README.md)."""

import math
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2.pool
from dogpile.cache import make_region
from dogpile.cache.api import NO_VALUE


def env(name, default=None):
    value = os.environ.get(name, "")
    if value == "":
        if default is None:
            sys.exit(f"{name} is not set")
        return default
    return value


def seconds(name, default_ms):
    """A duration given in whole milliseconds, as seconds; None when 0 (the library's 'none')."""
    ms = int(env(name, str(default_ms)))
    if ms < 0:
        sys.exit(f"{name} must be milliseconds >= 0")
    return ms / 1000 if ms > 0 else None


SCHEMA = env("DB_SCHEMA")
if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", SCHEMA):
    sys.exit(f"DB_SCHEMA={SCHEMA} is not a plain identifier")
PORT = int(env("PORT"))
INSTANCE = env("INSTANCE", "0")
DB_POOL = int(env("DB_POOL", "16"))
PREFIX = env("CACHE_PREFIX", "stampede:")
TTL = seconds("CACHE_TTL_MS", 30000)
# dogpile serves the expired value while one caller regenerates, as long as Redis still has
# it: the Redis expiry is what bounds staleness (the library's default is no Redis expiry).
REDIS_TTL = seconds("DOGPILE_REDIS_EXPIRATION_MS", 2 * int(TTL * 1000))
SQL = f"SELECT payload FROM {SCHEMA}.stampede_load(%s)"

region = make_region(key_mangler=lambda key: PREFIX + key).configure(
    "dogpile.cache.redis",
    expiration_time=TTL,
    arguments={
        "url": env("REDIS_URL"),
        "redis_expiration_time": max(1, math.ceil(REDIS_TTL)) if REDIS_TTL else None,
        "distributed_lock": env("DOGPILE_DISTRIBUTED_LOCK", "1") == "1",
        "lock_timeout": seconds("DOGPILE_LOCK_TIMEOUT_MS", 0),
        "lock_sleep": seconds("DOGPILE_LOCK_SLEEP_MS", 100) or 0.1,
        # One lock object per call, not per thread: this server runs a thread per connection.
        "thread_local_lock": False,
    },
)

# psycopg2's ThreadedConnectionPool raises when empty; the semaphore makes callers wait for a
# connection instead, as an app's pool does. Every connection is opened now, as the built-in
# app opens its pool: a herd must not pay for connecting.
pool = psycopg2.pool.ThreadedConnectionPool(DB_POOL, DB_POOL, env("DATABASE_URL"))
pool_slots = threading.BoundedSemaphore(DB_POOL)


def load(item_id):
    with pool_slots:
        conn = pool.getconn()
        try:
            # Autocommit: psycopg2 otherwise wraps the load in BEGIN and COMMIT, two more
            # statements for pg_stat_statements than the ledger's one load.
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(SQL, (item_id,))
                row = cur.fetchone()
        except Exception:
            pool.putconn(conn, close=True)
            raise
        pool.putconn(conn)
    return row[0] if row else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as stampede's client expects
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK (40 ms a request).
    disable_nagle_algorithm = True

    def do_GET(self):
        m = re.fullmatch(r"/items/(\d+)", self.path)
        if not m:
            return self.reply(200 if self.path == "/health" else 404, b"")
        item_id = int(m.group(1))
        try:
            payload = region.get_or_create(f"item:{item_id}", lambda: load(item_id))
        except Exception as err:  # a Redis or Postgres failure: the error is the answer
            return self.reply(503, f"{type(err).__name__}: {err}".encode())
        if payload is None or payload is NO_VALUE:
            return self.reply(404, b"")
        self.reply(200, payload.encode())

    def reply(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    # A thread per connection: every request stampede has in flight is served at once, and
    # loads queue for the DB_POOL connections.
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    print(f"dogpile instance {INSTANCE} on :{PORT} (ttl {TTL} s, redis ttl {REDIS_TTL} s)", flush=True)
    server.serve_forever()
