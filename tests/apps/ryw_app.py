"""An app under audit written in Python, to hold `stampede audit`'s read-your-write check to a
language other than Rust: the standard library's threaded HTTP server, redis-py and psycopg.

It serves the audited app's contract (docs/audit.md, docs/app.md): `GET /items/{id}` reads the
item through Redis from Postgres, loading through `DB_SCHEMA.stampede_load(id)`; `PUT
/items/{id}` makes its body the item's payload. The environment gives `PORT`, `REDIS_URL`,
`DATABASE_URL`, `DB_SCHEMA`, `CACHE_PREFIX` and `CACHE_TTL_MS`.

`RYW_ORDER` picks how an update invalidates the cache:
- `delete-then-update` (the classic bug): the entry is deleted, the update does other work for
  `RYW_WORK_MS` (default 5 ms), then the row is updated: a reader that misses in between loads
  the old row and puts it back, where it stays until it expires;
- `update-then-delete` (the default, correct): the same work, the row updated, then the entry
  deleted.
"""

import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import redis

SCHEMA = os.environ["DB_SCHEMA"]
if not re.fullmatch(r"[A-Za-z0-9_]+", SCHEMA):
    raise SystemExit(f"DB_SCHEMA={SCHEMA} is not a plain identifier")
PREFIX = os.environ.get("CACHE_PREFIX", "app:")
TTL_MS = int(os.environ.get("CACHE_TTL_MS", "30000"))
ORDER = os.environ.get("RYW_ORDER", "update-then-delete")
if ORDER not in ("delete-then-update", "update-then-delete"):
    raise SystemExit(f"RYW_ORDER={ORDER}: use delete-then-update or update-then-delete")
WORK = int(os.environ.get("RYW_WORK_MS", "5")) / 1000.0
ITEM = re.compile(r"^/items/(\d+)$")

CACHE = redis.Redis.from_url(os.environ["REDIS_URL"], socket_timeout=1.0)
# A connection per server thread: a psycopg connection serves one thread at a time.
LOCAL = threading.local()


def db():
    conn = getattr(LOCAL, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        LOCAL.conn = conn
    return conn


def key(item_id):
    return f"{PREFIX}item:{item_id}"


def load(item_id):
    row = db().execute(
        f"SELECT payload FROM {SCHEMA}.stampede_load(%s)", (item_id,)
    ).fetchone()
    return None if row is None else row[0]


def update(item_id, payload):
    def invalidate():
        CACHE.delete(key(item_id))

    if ORDER == "delete-then-update":
        invalidate()
    time.sleep(WORK)
    db().execute(
        f"UPDATE {SCHEMA}.items SET payload = %s, version = version + 1 WHERE id = %s",
        (payload, item_id),
    )
    if ORDER == "update-then-delete":
        invalidate()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go out in two writes: with Nagle's algorithm on, the body
    # waits for the client's delayed ACK of the headers (~40 ms on a kept-alive connection),
    # and no read could be answered while an update of a few milliseconds is in flight.
    disable_nagle_algorithm = True

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            return self.answer(200, b"ok\n")
        m = ITEM.match(self.path)
        if not m:
            return self.answer(404, b"no such route\n")
        item_id = int(m.group(1))
        cached = CACHE.get(key(item_id))
        if cached is not None:
            return self.answer(200, cached)
        payload = load(item_id)
        if payload is None:
            return self.answer(404, b"no such item\n")
        CACHE.set(key(item_id), payload, px=TTL_MS)
        self.answer(200, payload.encode())

    def do_PUT(self):
        m = ITEM.match(self.path)
        if not m:
            return self.answer(404, b"no such route\n")
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode()
        update(int(m.group(1)), body)
        self.answer(204)

    def log_message(self, *args):
        pass


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
