#!/bin/bash
# The prefetch-hit probe twice (benches/probe/prefetch_hit_probe.cu, built with the
# command in its header), output on stdout (prefetch-hit-probe.log).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for r in 1 2; do ./prefetch-hit-probe; done
