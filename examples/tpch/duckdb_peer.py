#!/usr/bin/env python3
"""TPC-H Q1 and Q6 in DuckDB over the lineitem columns the GPU example wrote: the peer
the GPU example is measured against.

    python3 duckdb_peer.py DIR --threads 16 --runs 3 --json out.json [--expect gpu-answers.json]

DIR holds <column>.bin (raw little-endian, encoding in meta.json) as tpch-scan
--columns-dir writes them. The columns become an in-memory DuckDB table with the
specification's SQL types (DATE, DECIMAL(15,2), one-character strings); the load is
timed on its own, then the specification's Q1 (DELTA = 90) and Q6 (DATE = 1994-01-01,
DISCOUNT = 0.06, QUANTITY = 24) run --runs times each. With --expect, the answers are
compared with the GPU's: sums exactly (as decimals), averages to 1e-9 relative.
"""
import argparse
import json
import sys
import time
from decimal import Decimal
from pathlib import Path

Q1 = """
select l_returnflag, l_linestatus,
       sum(l_quantity) as sum_qty,
       sum(l_extendedprice) as sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
       avg(l_quantity) as avg_qty,
       avg(l_extendedprice) as avg_price,
       avg(l_discount) as avg_disc,
       count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus
"""

Q6 = """
select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '1994-01-01'
  and l_shipdate < date '1994-01-01' + interval '1' year
  and l_discount between 0.06 - 0.01 and 0.06 + 0.01
  and l_quantity < 24
"""

DTYPES = {"l_shipdate": "<i4", "l_extendedprice": "<i4"}  # the others are u1


def load(con, d):
    import numpy as np
    import pandas as pd

    meta = json.loads((d / "meta.json").read_text())
    cols = {c["name"]: np.fromfile(d / f"{c['name']}.bin", dtype=DTYPES.get(c["name"], "u1")) for c in meta["columns"]}
    con.register("raw", pd.DataFrame(cols, copy=False))
    con.execute(
        """create table lineitem as select
             (date '1970-01-01' + l_shipdate) as l_shipdate,
             l_quantity::decimal(15,2) as l_quantity,
             (l_extendedprice * 0.01)::decimal(15,2) as l_extendedprice,
             (l_discount * 0.01)::decimal(15,2) as l_discount,
             (l_tax * 0.01)::decimal(15,2) as l_tax,
             chr(l_returnflag) as l_returnflag,
             chr(l_linestatus) as l_linestatus
           from raw"""
    )
    con.unregister("raw")
    return meta["rows"]


def timed(con, sql, runs):
    times, rows = [], None
    for _ in range(max(runs, 1)):
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        times.append(time.perf_counter() - t)
    return times, rows


def compare(q1_rows, q6_rows, exp):
    """Mismatches between DuckDB's answers and the GPU's (exp: tpch-scan --answers)."""
    bad = []
    got = {(r[0], r[1]): r for r in q1_rows}
    want = {(e["l_returnflag"], e["l_linestatus"]): e for e in exp["q1"]}
    if set(got) != set(want):
        bad.append(f"Q1 groups: duckdb {sorted(got)} gpu {sorted(want)}")
    for k in set(got) & set(want):
        r, e = got[k], want[k]
        for i, f in enumerate(["sum_qty", "sum_base_price", "sum_disc_price", "sum_charge"], start=2):
            if Decimal(str(r[i])) != Decimal(e[f]):
                bad.append(f"Q1 {k} {f}: duckdb {r[i]} gpu {e[f]}")
        for i, f in enumerate(["avg_qty", "avg_price", "avg_disc"], start=6):
            if abs(float(r[i]) - e[f]) > 1e-9 * max(1.0, abs(e[f])):
                bad.append(f"Q1 {k} {f}: duckdb {r[i]} gpu {e[f]}")
        if r[9] != e["count_order"]:
            bad.append(f"Q1 {k} count: duckdb {r[9]} gpu {e['count_order']}")
    q1_ok = not bad
    q6_ok = Decimal(str(q6_rows[0][0] or 0)) == Decimal(exp["q6"])
    if not q6_ok:
        bad.append(f"Q6: duckdb {q6_rows[0][0]} gpu {exp['q6']}")
    return q1_ok, q6_ok, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", required=True)
    ap.add_argument("--expect")
    a = ap.parse_args()
    try:
        import duckdb
    except ImportError:
        print("SKIPPED: duckdb is not installed")
        Path(a.json).write_text(json.dumps({"engine": "duckdb", "skipped": "duckdb is not installed"}))
        return 0
    con = duckdb.connect()
    con.execute(f"SET threads={a.threads}")
    t = time.perf_counter()
    rows = load(con, a.dir)
    load_s = time.perf_counter() - t
    t1, r1 = timed(con, Q1, a.runs)
    t6, r6 = timed(con, Q6, a.runs)
    match = {"q1": None, "q6": None}
    bad = []
    if a.expect:
        q1_ok, q6_ok, bad = compare(r1, r6, json.loads(Path(a.expect).read_text()))
        match = {"q1": q1_ok, "q6": q6_ok}
    out = {
        "engine": "duckdb",
        "version": duckdb.__version__,
        "threads": a.threads,
        "rows": rows,
        "load_s": load_s,
        "q1": {"runs": t1, "best_s": min(t1), "result": [[str(x) for x in r] for r in r1]},
        "q6": {"runs": t6, "best_s": min(t6), "result": str(r6[0][0])},
        "match": match,
        "mismatches": bad[:10],
    }
    Path(a.json).write_text(json.dumps(out, indent=2))
    print(
        f"DuckDB {duckdb.__version__}, {a.threads} threads, {rows} rows (loaded in {load_s:.2f} s): "
        f"Q1 best {min(t1):.4f} s, Q6 best {min(t6):.4f} s; answers vs GPU {match}"
    )
    return 0 if all(v in (None, True) for v in match.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
