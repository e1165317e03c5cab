#!/usr/bin/env python3
"""Plots the workloads from the JSON files one `gpu-run.sh remote workloads`
run wrote (brc.json, brc-duckdb.json, tpch.json, tpch-duckdb.json, graph.json): time to
result of each workload on the simulated SSDs next to its peers measured in the same run,
one SVG per workload (PREFIX-brc.svg, PREFIX-tpch.svg, PREFIX-graph.svg).

    python3 scripts/plot_workloads.py benches/baselines/workloads-h100/COMMIT docs/workloads
"""
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(d, name):
    p = Path(d) / name
    return json.loads(p.read_text()) if p.exists() else None


def bars(ax, title, groups, series):
    """groups: x labels; series: [(label, [value or None per group], colour)]."""
    n = len(series)
    width = 0.8 / max(n, 1)
    for i, (label, vals, colour) in enumerate(series):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ys = [v if v is not None else 0 for v in vals]
        b = ax.bar(xs, ys, width, label=label, color=colour)
        for rect, v in zip(b, vals):
            if v is not None:
                ax.annotate(f"{v:.3g}", (rect.get_x() + rect.get_width() / 2, v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, frameon=False)


def figure(title_suffix, draw, out):
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    draw(ax)
    fig.suptitle(title_suffix, fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    if os.environ.get("PLOT_PNG"):
        fig.savefig(out.replace(".svg", ".png"), dpi=80)
    plt.close(fig)
    print(f"wrote {out}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, prefix = sys.argv[1], sys.argv[2]
    brc, brc_db = load(d, "brc.json"), load(d, "brc-duckdb.json")
    tpch, tpch_db = load(d, "tpch.json"), load(d, "tpch-duckdb.json")
    graph = load(d, "graph.json")
    if not (brc or tpch or graph):
        sys.exit(f"no results in {d}")
    duck = lambda j: j.get("best_s") if j and "best_s" in j else None  # noqa: E731
    where = lambda j: f"{j['run']['gpu']}, commit {j['run']['commit'][:7]}, time to result (lower is better)"  # noqa: E731
    if brc:
        series = [
            ("bam scan (8 sim SSDs, host media)", [brc["scan"]["best_s"]], "tab:blue"),
            ("same parser, file in HBM", [brc["hbm"]["best_s"]], "tab:green"),
            ("zero-copy read of the file", [brc["zero_copy_read"]["best_s"]], "tab:gray"),
            (f"DuckDB, {(brc_db or {}).get('threads', '?')} threads", [duck(brc_db)], "tab:orange"),
        ]
        title = f"One Billion Row Challenge: {brc['rows']:.3g} rows, {brc['bytes'] / 1e9:.1f} GB"
        figure(where(brc), lambda ax: bars(ax, title, ["time to result"], series), f"{prefix}-brc.svg")
    if tpch:
        q = lambda name, key: tpch[name][key]  # noqa: E731
        dq = lambda name: (tpch_db or {}).get(name, {}).get("best_s")  # noqa: E731
        series = [
            ("bam scan (8 sim SSDs, host media)", [q("q1", "scan_best_s"), q("q6", "scan_best_s")], "tab:blue"),
            ("columns in HBM", [q("q1", "hbm_best_s"), q("q6", "hbm_best_s")], "tab:green"),
            ("zero-copy time of the columns read", [q("q1", "zero_copy_s"), q("q6", "zero_copy_s")], "tab:gray"),
            (f"DuckDB, {(tpch_db or {}).get('threads', '?')} threads", [dq("q1"), dq("q6")], "tab:orange"),
        ]
        title = f"TPC-H SF {tpch['sf']:g}, lineitem {tpch['rows'] / 1e6:.0f} M rows"
        figure(where(tpch), lambda ax: bars(ax, title, ["Q1", "Q6"], series), f"{prefix}-tpch.svg")
    if graph:
        v = graph["variants"]
        get = lambda var, key: v.get(var, {}).get(key)  # noqa: E731
        colours = ["tab:blue", "tab:purple", "tab:cyan", "tab:olive"]
        series = [
            (f"bam::array, {name[4:]} B lines, cache {graph['config']['cache_fraction']:.0%} of edges",
             [get(name, "bfs_best_s"), get(name, "cc_best_s")], colours[i % len(colours)])
            for i, name in enumerate(sorted((k for k in v if k.startswith("bam")), key=lambda k: int(k[4:])))
        ]
        series += [
            ("edges in pinned host memory", [get("pinned", "bfs_best_s"), get("pinned", "cc_best_s")], "tab:gray"),
            ("edges in HBM", [get("hbm", "bfs_best_s"), get("hbm", "cc_best_s")], "tab:green"),
        ]
        g = graph["graph"]
        title = f"{g['kind']} scale {g['scale']}: {g['csr_entries'] / 1e9:.2f} G CSR entries"
        figure(where(graph), lambda ax: bars(ax, title, ["BFS", "CC"], series), f"{prefix}-graph.svg")


if __name__ == "__main__":
    main()
