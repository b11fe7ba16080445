"""`scripts/bench --only libraries`: every library preset beside its real library, by
`stampede conform`, on the workloads docs/conform.md tabulates, printed as the Markdown tables
that go into it.

The workloads (STAMPEDE_BENCH_WORKLOADS=closed,rate,… runs some of them), the first three on
scenarios/hot-key.toml (one key, 2 instances, --ttl 2s, 50 ms loads, a cold start):
  * closed: its 60 closed-loop clients for 8 s (each side asks as fast as it answers);
  * rate: an open loop at 1000 req/s for 8 s (the same rate, and the admission of the
    library's server, on both sides);
  * drop: the closed loop for 16 s with the whole cache dropped at 4 s;
  * defaults: the tool's default workload, from a cold start (conform starts both sides cold);
  * metastable: scenarios/metastable.toml, its drop of the whole cache included.
STAMPEDE_BENCH_LIBRARIES=symfony,… runs some of the libraries. Each is `--trials REPS` trials (seeds 42, 43, …). The reference apps' runtimes come from
`scripts/install-deps --for-libraries`. Everything is run by conform, which starts and stops
its own servers and apps (Ctrl-C stops it, and it stops them).
"""

import json
import os
import subprocess
import tempfile

HOT = ["--scenario", "scenarios/hot-key.toml"]
WORKLOADS = [
    ("closed", "hot key, 60 closed-loop clients, 8 s", HOT),
    ("rate", "hot key, open loop 1000 req/s, 8 s", HOT + ["--rps", "1000"]),
    ("drop", "hot key, 60 clients, 16 s, whole cache dropped at 4 s",
     HOT + ["--duration", "16s", "--fault", "drop-cache@4s"]),
    ("defaults", "the defaults (10 000 req/s over 10 000 keys, TTL 3 s, 10 ms loads), cold, 10 s", []),
    ("metastable", "scenarios/metastable.toml (2000 req/s over 500 keys, db-pool 2, 20 s, the whole cache dropped at 5 s)",
     ["--scenario", "scenarios/metastable.toml"]),
]
FIGURES = [("db_calls", "DB calls"), ("peak_herd", "peak herd"),
           ("redundant_loads", "redundant loads"), ("db_calls_after_shock", "DB calls in the 1 s after the drop"), ("recovery_ms", "recovery after the drop")]


def libraries(stampede_bin):
    """The libraries conform can run here, read from its own refusal of an unknown name."""
    p = subprocess.run([stampede_bin, "conform", "--library", "?"], capture_output=True,
                       text=True)
    tail = p.stderr.rsplit("reference app here:", 1)[-1]
    return [n.strip() for n in tail.strip().split(",") if n.strip()]


def conform(stampede_bin, root, lib, extra, trials, log):
    with tempfile.TemporaryDirectory(prefix="bench-conform-") as out:
        cmd = [stampede_bin, "conform", "--library", lib, "--trials", str(trials), "--quiet",
               "--out", out] + extra
        log("$ " + " ".join(cmd[1:]))
        p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if p.returncode != 0:
            return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
        with open(os.path.join(out, "conform.json")) as f:
            return json.load(f)


def side(s, unit):
    if s is None or s.get("median") is None:
        return "unknown"
    fmt = (lambda v: f"{v:,.0f}".replace(",", " ")) if unit != "ms" else (
        lambda v: f"{v:,.0f} ms".replace(",", " "))
    lo, med, hi = s["min"], s["median"], s["max"]
    return fmt(med) if lo == hi else f"{fmt(med)} [{fmt(lo)}–{fmt(hi)}]"


def cell(c, key):
    fig = next((x for x in c.get("figures", []) if x["key"] == key), None)
    if fig is None:
        return None
    v = fig["verdict"]
    ratio = f", {fig['ratio']:.2f}×" if v == "differs" and fig.get("ratio") else ""
    word = f"**{v}**" if v == "differs" else v
    return f"{side(fig['preset'], fig.get('unit'))} vs {side(fig['library'], fig.get('unit'))}: {word}{ratio}"


def run(stampede_bin, root, trials, log):
    """Every library on every workload; the tables as text."""
    libs = libraries(stampede_bin)
    picked = [n for n in os.environ.get("STAMPEDE_BENCH_LIBRARIES", "").split(",") if n]
    unknown = [n for n in picked if n not in libs]
    if unknown:
        raise SystemExit(f"STAMPEDE_BENCH_LIBRARIES: no reference app for {', '.join(unknown)} "
                         f"(there is one for {', '.join(libs)})")
    libs = [n for n in libs if not picked or n in picked]
    only = [w for w in os.environ.get("STAMPEDE_BENCH_WORKLOADS", "").split(",") if w]
    log(f"libraries with a reference app: {', '.join(libs)}")
    out = []
    for key, title, extra in WORKLOADS:
        if only and key not in only:
            continue
        rows = []
        shock = key in ("drop", "metastable")
        keys = [k for k, _ in FIGURES
                if k not in ("recovery_ms", "db_calls_after_shock") or shock]
        for lib in libs:
            c = conform(stampede_bin, root, lib, extra, trials, log)
            if "error" in c:
                rows.append(f"| {lib} | not run: {c['error'].strip()} |" + " |" * len(keys))
                continue
            cells = [cell(c, k) or "—" for k in keys]
            p99 = next((x for x in c["latencies"] if x["title"] == "p99 latency"), None)
            lat = "—" if p99 is None or p99["preset_median_ms"] is None else (
                f"{p99['preset_median_ms']:.1f} ms vs {p99['library_median_ms']:.1f} ms")
            env = ", ".join(f"`{e}`" for e in c["app_env"])
            rows.append(f"| {lib} ({env}) | " + " | ".join(cells) + f" | {lat} |")
            for n in c["notes"]:
                log(f"  note ({lib}, {key}): {n}")
        head = ["library (settings)"] + [t for k, t in FIGURES if k in keys] + ["p99 (for information)"]
        out.append(f"### {title}, {trials} trials\n")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        out.extend(rows)
        out.append("")
    return "\n".join(out)
