"""The HTTP path of `scripts/bench --only http`: stampede's closed loop against an app under
test (examples/app, cache-aside, every request a hit) beside wrk with the same connections, on
the same app, servers and keys, in alternating pairs.

The app runs as an already-running app would (stampede is given --redis-url, --pg-url and
--schema): the bench starts a redis-server and a Postgres of its own on free loopback ports,
seeds the app's schema for wrk itself (stampede seeds and drops its own, of the same name and
shape), and stops everything it started, also on Ctrl-C.
"""

import collections
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PG_BIN = "/usr/lib/postgresql/15/bin"
KEYS = 1000
VALUE = 1000
SCHEMA = "shop"
# wrk's requests: a random key of the same 1000 the app caches (stampede draws Zipf over them;
# both are hits once warm, so the key order does not change the work).
WRK_LUA = """
math.randomseed(42)
request = function()
  return wrk.format("GET", "/items/" .. math.random(1, %d))
end
""" % KEYS


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on port {port} within {timeout} s")


class Stack:
    """A Postgres (with pg_stat_statements, as stampede needs to count an app's DB calls) and
    the example app, on the bench's redis-server; everything stopped by stop()."""

    def __init__(self, root, redis_port):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="stampede-bench-pg-")
        os.chmod(self.dir, 0o777)
        self.pg_port = _free_port()
        run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        data = os.path.join(self.dir, "data")
        subprocess.run([*run_as, f"{PG_BIN}/initdb", "-D", data, "-U", "stampede",
                        "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
        self.pg = subprocess.Popen(
            [*run_as, f"{PG_BIN}/postgres", "-D", data, "-p", str(self.pg_port), "-k", self.dir,
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "synchronous_commit=off", "-c", "shared_preload_libraries=pg_stat_statements"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(self.pg)
        _wait_port(self.pg_port, "postgres")
        self.pg_url = f"postgres://stampede@127.0.0.1:{self.pg_port}/postgres"
        self.redis_url = f"redis://127.0.0.1:{redis_port}/"
        for _ in range(100):
            if self.psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", check=False) == 0:
                break
            time.sleep(0.1)
        app = os.path.join(root, "target", "release", "examples", "app")
        if not os.path.exists(app):
            subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "app"],
                           cwd=root, check=True)
        self.app_port = _free_port()
        env = {**os.environ, "REDIS_URL": self.redis_url, "DATABASE_URL": self.pg_url,
               "DB_SCHEMA": SCHEMA, "PORT": str(self.app_port), "APP_LOADER": "query",
               "CACHE_TTL_MS": "3600000"}
        self.app = subprocess.Popen([app], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        self.procs.append(self.app)
        _wait_port(self.app_port, "the example app")
        self.lua = os.path.join(self.dir, "keys.lua")
        with open(self.lua, "w") as f:
            f.write(WRK_LUA)

    def psql(self, sql, check=True):
        return subprocess.run(
            [f"{PG_BIN}/psql", "-q", "-v", "ON_ERROR_STOP=1", self.pg_url, "-c", sql],
            capture_output=True, check=check).returncode

    def seed(self):
        self.psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE; CREATE SCHEMA {SCHEMA}; "
                  f"CREATE TABLE {SCHEMA}.items (id bigint PRIMARY KEY, version bigint NOT NULL, "
                  f"payload text NOT NULL); INSERT INTO {SCHEMA}.items "
                  f"SELECT i, 1, repeat('x', {VALUE}) FROM generate_series(0, {KEYS}) i")

    def drop(self):
        self.psql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT if p is self.pg else signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _cpu_of_child(before):
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def wrk(stack, conns, seconds):
    """wrk's requests/s and CPU per request (µs), all hits (warmed first)."""
    url = f"http://127.0.0.1:{stack.app_port}"
    stack.seed()
    try:
        subprocess.run(["wrk", "-t2", f"-c{conns}", "-d2s", "-s", stack.lua, url],
                       check=True, capture_output=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "-s", stack.lua, url],
                             check=True, capture_output=True, text=True).stdout
        cpu = _cpu_of_child(before)
    finally:
        stack.drop()
    total = next(int(l.split()[0]) for l in out.splitlines() if "requests in" in l)
    rate = next(float(l.split()[1]) for l in out.splitlines() if l.startswith("Requests/sec"))
    non2xx = [l for l in out.splitlines() if "Non-2xx" in l or "Socket errors" in l]
    if non2xx:
        sys.exit(f"wrk got errors from the app: {non2xx}")
    return rate, cpu * 1e6 / max(total, 1)


def stampede_closed(stampede, stack, conns, seconds):
    """stampede's closed loop with `conns` clients: requests/s and its CPU per request (µs)."""
    j = stampede(["--target", f"http://127.0.0.1:{stack.app_port}/items/{{key}}",
                  "--redis-url", stack.redis_url, "--pg-url", stack.pg_url, "--schema", SCHEMA,
                  "--keys", str(KEYS), "--value-size", str(VALUE), "--clients", str(conns),
                  "--warmup", "2s", "--duration", f"{seconds}s"])
    done = j["requests"]["completed"]
    return done / seconds, j["generator"]["cpu_per_request_us"], j


def side_by_side(stampede, log, root, redis_port, reps, conns=50, seconds=5):
    """Alternating pairs; returns {figure: [values]}."""
    h = collections.defaultdict(list)
    stack = Stack(root, redis_port)
    try:
        for rep in range(1, reps + 1):
            order = ["wrk", "stampede"] if rep % 2 else ["stampede", "wrk"]
            got = {}
            for who in order:
                if who == "wrk":
                    got["wrk"] = wrk(stack, conns, seconds)
                else:
                    rate, cpu, j = stampede_closed(stampede, stack, conns, seconds)
                    got["stampede"] = (rate, cpu)
                    h["st_p99"].append(j["latency_ms"]["p99"])
            (wr, wc), (sr, sc) = got["wrk"], got["stampede"]
            # The open loop at 0.9x wrk's rate: does it hold (p99 < 10 ms, nothing shed)?
            j = stampede(["--target", f"http://127.0.0.1:{stack.app_port}/items/{{key}}",
                          "--redis-url", stack.redis_url, "--pg-url", stack.pg_url,
                          "--schema", SCHEMA, "--keys", str(KEYS), "--value-size", str(VALUE),
                          "--rps", str(int(0.9 * wr)), "--warmup", "2s",
                          "--duration", f"{seconds}s"])
            h["open_p99"].append(j["latency_ms"]["p99"])
            h["open_shed"].append(j["requests"]["shed"])
            h["wrk_rate"].append(wr), h["wrk_cpu"].append(wc)
            h["st_rate"].append(sr), h["st_cpu"].append(sc)
            h["rate_ratio"].append(sr / wr), h["cpu_ratio"].append(sc / wc)
            log(f"pair {rep}/{reps}: wrk {wr:.0f} req/s ({wc:.1f} µs CPU/request), "
                f"stampede {sr:.0f} req/s ({sc:.1f} µs), ratio {sr / wr:.2f}")
    finally:
        stack.stop()
    return h
