#!/usr/bin/env python3
"""Plots the multi-GPU runs from the JSON reports `bam bench --gpus` wrote
(one `gpu-run.sh remote multigpu` run, mg-*.json): for each run, the first GPU alone
next to every GPU at once (stacked per GPU), with the ratio over the bars; the ported
gather through bam::array (warm and cold caches) in a second panel.

    python3 scripts/plot_multi_gpu.py benches/baselines/multi-gpu-h200x2-COMMIT docs/multi-gpu.svg
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# (file, label) in the order drawn; missing files are left out.
RAW = [
    ("mg-sim-private-512", "512 B, sim\nprivate arrays"),
    ("mg-host-4k", "4 KiB, host media\nprivate arrays"),
    ("mg-sim-shared-512", "512 B, one shared\narray, 16 ctrl SMs"),
    ("mg-sim-shared-512-sms32", "512 B, shared\n32 ctrl SMs"),
    ("mg-sim-shared-512-sms64", "512 B, shared\n64 ctrl SMs"),
    ("mg-host-4k-shared", "4 KiB, host media\nshared array"),
    ("mg-hostctl-shared-4k", "4 KiB, hostctl\n(CPU controllers)"),
]
COLOURS = ["#4878a8", "#e4a33a", "#6aa56a", "#b55d5d"]


def main(d, out):
    d = Path(d)
    raw = [(json.loads((d / f"{f}.json").read_text()), lab) for f, lab in RAW if (d / f"{f}.json").exists()]
    gather_src = d / "mg-sim-shared-gather.json"
    gather = json.loads(gather_src.read_text())["gather"] if gather_src.exists() else []
    fig, axes = plt.subplots(1, 2, figsize=(16, 5.5), gridspec_kw={"width_ratios": [len(raw) or 1, max(len(gather), 1)]})
    ax = axes[0]
    for x, (rep, _) in enumerate(raw):
        job = rep["jobs"][0]
        # Normalised to the one-GPU figure: the runs differ by orders of magnitude.
        one = job["one"]["iops"]
        ax.bar(x - 0.2, 1.0, 0.38, color="#999999", label="first GPU alone" if x == 0 else None)
        bottom = 0.0
        for g, e in enumerate(job["each"]):
            h = e["iops"] / one
            ax.bar(x + 0.2, h, 0.38, bottom=bottom, color=COLOURS[g % len(COLOURS)],
                   label=f"GPU {g}, both at once" if x == 0 else None)
            bottom += h
        ax.text(x + 0.2, bottom + 0.03, f"{job['ratio']:.2f}x", ha="center", fontsize=9)
        ax.text(x - 0.2, 1.03, f"{one / 1e6:.1f}M", ha="center", fontsize=7, color="#555555")
    ax.set_xticks(range(len(raw)))
    ax.set_xticklabels([lab for _, lab in raw], fontsize=8)
    ax.axhline(1.8, color="#cc3333", linestyle=":", linewidth=1)
    ax.text(len(raw) - 0.5, 1.82, "1.8x target", color="#cc3333", fontsize=8, ha="right")
    ax.set_ylabel("random-read IOPS / first GPU alone")
    ax.set_title("Raw GPU-initiated reads, 2 GPUs (numbers over grey bars: one GPU's IOPS)")
    ax.legend(fontsize=8, loc="upper right")
    ax = axes[1]
    for x, g in enumerate(gather):
        one = g["one"]["reads_per_s"]
        ax.bar(x - 0.2, 1.0, 0.38, color="#999999")
        # Every GPU reads its share; the run lasts as long as the slowest GPU: the bar is
        # all reads over that time, split by each GPU's share of the reads, with each
        # GPU's own rate written in its part.
        bottom = 0.0
        for i, e in enumerate(g["each"]):
            h = g["ratio"] * e["reads"] / g["options"]["reads"]
            ax.bar(x + 0.2, h, 0.38, bottom=bottom, color=COLOURS[i % len(COLOURS)])
            ax.text(x + 0.2, bottom + h / 2, f"{e['reads_per_s'] / 1e6:.0f}M/s", ha="center", fontsize=7, color="white")
            bottom += h
        ax.text(x + 0.2, bottom + 0.03, f"{g['ratio']:.2f}x", ha="center", fontsize=9)
        ax.text(x - 0.2, 1.03, f"{one / 1e6:.0f}M/s", ha="center", fontsize=7, color="#555555")
    ax.set_xticks(range(len(gather)))
    ax.set_xticklabels([f"{g['study']} caches\n(hits {g['one']['hit_rate']:.2f})" for g in gather], fontsize=8)
    ax.set_title("Ported gather through bam::array<u64>:\none shared array, a cache per GPU", fontsize=10)
    ax.set_ylabel("reads/s / first GPU alone")
    commit = (raw[0][0] if raw else {}).get("commit", "")
    fig.suptitle(f"{(raw[0][0]['gpus'] if raw else [''])[0].split(': ')[-1]} x2, commit {commit[:7]}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
