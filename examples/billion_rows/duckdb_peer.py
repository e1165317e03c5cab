#!/usr/bin/env python3
"""The One Billion Row Challenge in DuckDB: the peer the GPU example is measured against.

    python3 duckdb_peer.py measurements.txt --threads 16 --runs 2 --json out.json [--expect gpu.txt]

Each run is the whole query, reading and parsing the file included (as the GPU's time to
result includes reading it from the SSDs). The output is formatted as the challenge
prints it, with the mean computed exactly from sum and count and rounded half up; with
--expect it is compared with the GPU example's output line, station by station.
"""
import argparse
import json
import sys
import time
from decimal import ROUND_FLOOR, Decimal


def tenths(d):
    """A DECIMAL(.,1) value as integer tenths."""
    return int((Decimal(d) * 10).to_integral_value())


def fmt(t):
    """Tenths as the challenge prints them (never -0.0)."""
    return f"{'-' if t < 0 else ''}{abs(t) // 10}.{abs(t) % 10}"


def mean_half_up(sum_tenths, count):
    """floor((2 sum + count) / (2 count)): the mean in tenths, rounded half up."""
    return int((Decimal(2 * sum_tenths + count) / Decimal(2 * count)).to_integral_value(rounding=ROUND_FLOOR))


def parse_line(text):
    """{name: (min, mean, max)} in tenths from the challenge's output line."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError("not a challenge output line")
    out = {}
    for item in body[1:-1].split(", "):
        name, vals = item.rsplit("=", 1)
        out[name] = tuple(tenths(v) for v in vals.split("/"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--json", required=True)
    ap.add_argument("--expect")
    a = ap.parse_args()
    try:
        import duckdb
    except ImportError:
        print("SKIPPED: duckdb is not installed")
        with open(a.json, "w") as f:
            json.dump({"engine": "duckdb", "skipped": "duckdb is not installed"}, f)
        return 0
    con = duckdb.connect()
    con.execute(f"SET threads={a.threads}")
    sql = (
        "SELECT station, min(v), sum(v), max(v), count(*) FROM read_csv(?, delim=';', header=false, "
        "columns={'station': 'VARCHAR', 'v': 'DECIMAL(4,1)'}, quote='', escape='', auto_detect=false) "
        "GROUP BY station"
    )
    runs, rows = [], None
    for _ in range(max(a.runs, 1)):
        t = time.perf_counter()
        rows = con.execute(sql, [a.file]).fetchall()
        runs.append(time.perf_counter() - t)
    res = {}
    for name, mn, sm, mx, cnt in rows:
        res[name] = (tenths(mn), mean_half_up(tenths(sm), cnt), tenths(mx))
    line = "{" + ", ".join(f"{n}={fmt(v[0])}/{fmt(v[1])}/{fmt(v[2])}" for n, v in sorted(res.items(), key=lambda kv: kv[0].encode())) + "}"
    match, mismatches = None, []
    if a.expect:
        with open(a.expect, encoding="utf-8") as f:
            exp = parse_line(f.read())
        for n in sorted(set(exp) | set(res)):
            if exp.get(n) != res.get(n):
                mismatches.append(f"{n}: gpu {exp.get(n)} duckdb {res.get(n)}")
        match = not mismatches
    out = {
        "engine": "duckdb",
        "version": duckdb.__version__,
        "threads": a.threads,
        "runs": runs,
        "best_s": min(runs),
        "stations": len(res),
        "rows": sum(r[4] for r in rows),
        "match": match,
        "mismatches": mismatches[:5],
        "output_head": line[:200],
    }
    with open(a.json, "w") as f:
        json.dump(out, f, indent=2)
    verdict = {None: "not compared", True: "matches the GPU output", False: f"DIFFERS in {len(mismatches)} stations"}[match]
    print(f"DuckDB {duckdb.__version__}, {a.threads} threads: best {min(runs):.3f} s of {runs}; {len(res)} stations; {verdict}")
    return 0 if match in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
