"""The tables: medians over rounds, ratios against each peer, the pgbench ceiling, and
the targets of SPEC N2 with the measured values."""

from __future__ import annotations

import os
import platform
from typing import Any

import psutil
import psycopg

from benchmarks.stats import fmt, median
from benchmarks.systems import ALL

HIGHER, LOWER = "higher", "lower"
# (label, metric, field, better, unit)
ROWS = [
    ("Enqueue one by one (jobs/s)", "enqueue_single", "rate", HIGHER),
    ("Enqueue bulk, 1,000 per call (jobs/s)", "enqueue_bulk", "rate", HIGHER),
    ("Drain no-op, concurrency 1 (jobs/s)", "drain_c1", "rate", HIGHER),
    ("Drain no-op, concurrency 4 (jobs/s)", "drain_c4", "rate", HIGHER),
    ("Drain no-op, concurrency 16 (jobs/s)", "drain_c16", "rate", HIGHER),
    ("Drain no-op, c=16 x --processes 2 (jobs/s)", "drain_c16_p2", "rate", HIGHER),
    ("Worker CPU per job, c=1 (µs)", "drain_c1", "cpu_us_per_job", LOWER),
    ("Worker CPU per job, c=16 (µs)", "drain_c16", "cpu_us_per_job", LOWER),
    ("Transactions per job, c=1", "drain_c1", "xacts_per_job", LOWER),
    ("Transactions per job, c=16", "drain_c16", "xacts_per_job", LOWER),
    ("Pickup p50 (ms)", "pickup", "p50", LOWER),
    ("Pickup p95 (ms)", "pickup", "p95", LOWER),
    ("Pickup p99 (ms)", "pickup", "p99", LOWER),
    ("Pickup in a realistic app p50 (ms)", "pickup_app", "p50", LOWER),
    ("Pickup in a realistic app p99 (ms)", "pickup_app", "p99", LOWER),
    ("Pickup through the outbox p50 (ms)", "pickup_outbox", "p50", LOWER),
    ("Pickup through the outbox p99 (ms)", "pickup_outbox", "p99", LOWER),
    ("Peak RSS draining at c=16 (MiB)", "drain_c16", "peak_rss_mib", LOWER),
    ("Idle: statements per minute", "idle", "statements", LOWER),
    ("Idle: CPU seconds per minute", "idle", "cpu", LOWER),
]


def machine(server: str) -> dict[str, Any]:
    try:
        with psycopg.connect(f"{server}/postgres") as conn:
            row = conn.execute("SHOW server_version").fetchone()
            version = row[0] if row else "?"
            row = conn.execute("SHOW autovacuum").fetchone()
            autovacuum = row[0] if row else "?"  # off: dead rows pile up in long drains
    except psycopg.Error:
        version = autovacuum = "?"
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "postgresql": version,
        "autovacuum": autovacuum,
        "load_at_start": os.getloadavg(),
    }


def brief(result: dict[str, Any]) -> str:
    if "skipped" in result:
        return f"skipped ({result['skipped']})"
    if "error" in result:
        return f"ERROR {result['error']}"
    parts = []
    for key in (
        "rate",
        "p50",
        "p95",
        "p99",
        "ran",
        "duplicates",
        "peak_rss_mib",
        "cpu_us_per_job",
        "xacts_per_job",
    ):
        if key in result:
            parts.append(f"{key}={fmt(result[key])}")
    return " ".join(parts)


def value(
    results: dict[str, Any], metric: str, field: str, system: str
) -> float | None:
    if metric == "idle":
        entry = results.get("idle", {}).get(system, {})
        return entry.get(field)
    values = []
    for round_ in results["rounds"]:
        entry = round_.get(metric, {}).get(system)
        if entry and entry.get(field) is not None:
            values.append(entry[field])
    return median(values)


def advantage(uj: float | None, peer: float | None, better: str) -> float | None:
    """How many times better ultimate_jobs is (above 1: better, below 1: worse)."""
    if uj is None or peer is None or uj == 0 or peer == 0:
        return None
    return uj / peer if better == HIGHER else peer / uj


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(results: dict[str, Any]) -> str:
    systems = [
        name
        for name in ALL
        if any(name in r.get(m, {}) for r in results["rounds"] for m in r)
        or name in results.get("idle", {})
    ]
    peers = [s for s in systems if s != "uj"]
    labels = {name: cls.label for name, cls in ALL.items()}
    rounds = len(results["rounds"])
    out = [
        f"Medians over {rounds} round(s); machine: {results['machine']}.",
        "",
    ]
    rows = []
    for label, metric, field, better in ROWS:
        cells = [fmt(value(results, metric, field, s)) for s in systems]
        peer_values = {p: value(results, metric, field, p) for p in peers}
        known = {p: v for p, v in peer_values.items() if v is not None}
        best = (
            (max if better == HIGHER else min)(known, key=lambda p: known[p])
            if known
            else None
        )
        uj = value(results, metric, field, "uj")
        ratio = advantage(uj, known.get(best) if best else None, better)
        rows.append(
            [
                label,
                *cells,
                f"{labels[best]}" if best else "n/a",
                f"{ratio:.2f}x" if ratio else "n/a",
            ]
        )
    out.append(
        _table(
            [
                "Scenario",
                *(labels[s] for s in systems),
                "best peer",
                "ultimate_jobs vs best",
            ],
            rows,
        )
    )
    out += [
        "",
        "Ratios: how many times better ultimate_jobs is than each peer "
        "(above 1 = better; throughput divided, latency and cost inverted).",
        "",
    ]
    rows = []
    for label, metric, field, better in ROWS:
        uj = value(results, metric, field, "uj")
        cells = []
        for peer in peers:
            ratio = advantage(uj, value(results, metric, field, peer), better)
            cells.append(f"{ratio:.2f}x" if ratio else "n/a")
        rows.append([label, *cells])
    out.append(_table(["Scenario", *(labels[p] for p in peers)], rows))

    # the ceiling
    single = value(results, "pgbench_single", "rate", "pgbench")
    batched = value(results, "pgbench_batched", "rate", "pgbench")
    uj16 = value(results, "drain_c16", "rate", "uj")
    uj16p2 = value(results, "drain_c16_p2", "rate", "uj")
    out += [
        "",
        "Physical limit: pgbench, 16 clients, insert + claim (SKIP LOCKED) + "
        "complete, each its own transaction.",
        "",
    ]
    out.append(
        _table(
            [
                "pgbench lifecycle",
                "jobs/s",
                "ultimate_jobs c=16 share",
                "c=16 x2 share",
            ],
            [
                [
                    "one job per transaction",
                    fmt(single),
                    _share(uj16, single),
                    _share(uj16p2, single),
                ],
                [
                    "100 jobs per transaction",
                    fmt(batched),
                    _share(uj16, batched),
                    _share(uj16p2, batched),
                ],
            ],
        )
    )

    # exactly once
    out += [
        "",
        "Drains: jobs run exactly once (every round), or what ran within the cap.",
        "",
    ]
    rows = []
    metrics = sorted({m for r in results["rounds"] for m in r if m.startswith("drain")})
    for metric in metrics:
        cells = []
        for s in systems:
            entries = [r.get(metric, {}).get(s) for r in results["rounds"]]
            entries = [e for e in entries if e]
            if not entries:
                cells.append("")
                continue
            if any("error" in e for e in entries):
                cells.append("error")
                continue
            if all(e.get("complete") for e in entries):
                cells.append("all once")
            else:
                worst = min(entries, key=lambda e: e.get("ran", 0))
                cells.append(
                    f"ran {worst.get('ran', 0):,}, {worst.get('duplicates', 0)} twice"
                )
        rows.append([metric, *cells])
    out.append(_table(["Drain", *(labels[s] for s in systems)], rows))

    if "million" in results:
        million = results["million"]
        jobs = results["args"]["million_jobs"]
        out += ["", f"{jobs:,}-job drain (ultimate_jobs, c=16): RSS by jobs run.", ""]
        out.append(
            _table(
                ["jobs run", "RSS (MiB)"],
                [[f"{n:,}", fmt(rss)] for n, rss in million.get("samples", [])],
            )
        )
        out.append(
            f"\nrate {fmt(million.get('rate'))} jobs/s, "
            f"complete: {million.get('complete')}, "
            f"filled in {fmt(million.get('fill_seconds'))} s"
            + (", stopped at --million-cap" if million.get("capped") else "")
        )

    out += ["", targets(results)]
    if results.get("skipped"):
        out += ["", f"Skipped systems: {results['skipped']}"]
    return "\n".join(out) + "\n"


def _share(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return "n/a"
    return f"{100 * part / whole:.1f}%"


# The peers that keep their queue in PostgreSQL (N2's "any PostgreSQL peer").
POSTGRES_PEERS = ("pgqueuer", "procrastinate", "djq", "djtasks")


def _best_peer(
    results: dict[str, Any],
    metric: str,
    field: str,
    among: tuple[str, ...] | None = None,
) -> tuple[str, float] | None:
    """The peer with the highest ``field`` of ``metric`` (of ``among``, default all)."""
    found = [
        (name, v)
        for name in ALL
        if name != "uj" and (among is None or name in among)
        if (v := value(results, metric, field, name)) is not None
    ]
    return max(found, key=lambda item: item[1]) if found else None


def targets(results: dict[str, Any]) -> str:
    def v(metric: str, field: str, system: str = "uj") -> float | None:
        return value(results, metric, field, system)

    def check(measured: float | None, ok: bool | None) -> str:
        if measured is None or ok is None:
            return "not measured"
        return "met" if ok else "NOT met"

    rows = []

    def add(target: str, measured: float | None, shown: str, ok: bool | None) -> None:
        rows.append(
            [target, shown if measured is not None else "n/a", check(measured, ok)]
        )

    p50, p99 = v("pickup", "p50"), v("pickup", "p99")
    add(
        "pickup p50 <= 1.5 ms (direct)",
        p50,
        f"{fmt(p50)} ms",
        p50 is not None and p50 <= 1.5,
    )
    add(
        "pickup p99 <= 5 ms (direct)",
        p99,
        f"{fmt(p99)} ms",
        p99 is not None and p99 <= 5,
    )
    o50 = v("pickup_outbox", "p50")
    add(
        "pickup through the outbox p50 <= 5 ms",
        o50,
        f"{fmt(o50)} ms",
        o50 is not None and o50 <= 5,
    )
    best = _best_peer(results, "drain_c16", "rate")
    d16 = v("drain_c16", "rate")
    ratio = d16 / best[1] if d16 and best else None
    add(
        f"drain c=16, one process >= 1.5x best peer ({ALL[best[0]].label if best else '?'})",
        ratio,
        f"{fmt(d16)}/s = {ratio:.2f}x" if ratio else "n/a",
        ratio is not None and ratio >= 1.5,
    )
    d2 = v("drain_c16_p2", "rate")
    add(
        "drain with --processes 2 > one process",
        d2,
        f"{fmt(d2)}/s vs {fmt(d16)}/s",
        d2 is not None and d16 is not None and d2 > d16,
    )
    batched = v("pgbench_batched", "rate", "pgbench")
    share = d16 / batched if d16 and batched else None
    rows.append(
        [
            "share of the batched pgbench ceiling (reported)",
            f"{100 * share:.1f}%" if share else "n/a",
            "reported" if share else "not measured",
        ]
    )
    cpu16 = v("drain_c16", "cpu_us_per_job")
    peer_cpu = v("drain_c16", "cpu_us_per_job", best[0]) if best else None
    add(
        "worker CPU per job at c=16 <= that peer's",
        cpu16,
        f"{fmt(cpu16)} µs vs {fmt(peer_cpu)} µs" if peer_cpu else f"{fmt(cpu16)} µs",
        cpu16 is not None and peer_cpu is not None and cpu16 <= peer_cpu,
    )
    e1 = v("enqueue_single", "rate")
    pg1 = _best_peer(results, "enqueue_single", "rate", POSTGRES_PEERS)
    add(
        "enqueue one by one >= every PostgreSQL peer"
        f" ({ALL[pg1[0]].label if pg1 else '?'})",
        e1,
        f"{fmt(e1)}/s vs {fmt(pg1[1])}/s" if pg1 else f"{fmt(e1)}/s",
        e1 is not None and pg1 is not None and e1 >= pg1[1],
    )
    eb = v("enqueue_bulk", "rate")
    bulk = _best_peer(results, "enqueue_bulk", "rate")
    bulk_ratio = eb / bulk[1] if eb and bulk else None
    add(
        f"enqueue_many >= 1.5x best peer's bulk ({ALL[bulk[0]].label if bulk else '?'})",
        bulk_ratio,
        f"{fmt(eb)}/s = {bulk_ratio:.2f}x" if bulk_ratio else "n/a",
        bulk_ratio is not None and bulk_ratio >= 1.5,
    )
    st = v("idle", "statements")
    add("idle <= 12 statements/min/worker", st, fmt(st), st is not None and st <= 12)
    cpu = v("idle", "cpu")
    add("idle <= 0.05 CPU-s/min/worker", cpu, fmt(cpu), cpu is not None and cpu <= 0.05)
    rss = v("drain_c16", "peak_rss_mib")
    add(
        "worker RSS <= 50 MiB at c=16",
        rss,
        f"{fmt(rss)} MiB",
        rss is not None and rss <= 50,
    )
    samples = results.get("million", {}).get("samples") or []
    flat = None
    if samples:
        reference = results["args"]["million_jobs"] / 10  # the 100,000th job
        tenth = min(samples, key=lambda s: abs(s[0] - reference))
        last = samples[-1]
        flat = (last[1] - tenth[1]) / tenth[1] if tenth[1] else None
    add(
        "RSS flat (within 10%) from job 100,000 to 1,000,000",
        flat,
        f"{100 * flat:+.1f}% (jobs {tenth[0]:,} to {last[0]:,})"
        if flat is not None
        else "n/a",
        (abs(flat) <= 0.10 if last[0] >= 1_000_000 else None)
        if flat is not None
        else None,
    )
    return "Targets (SPEC N2):\n\n" + _table(["target", "measured", "verdict"], rows)
