#!/usr/bin/env bash
# Run 9: the embedding-bag probe with 16-byte elements beside run 7's forms
# (benches/probe/embag_access_probe.cu, forms 5 and 6: the table read as float4, plain and
# through bam::array<float4> over a resident view), twice. Built here as run 7's (run7.sh).
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.log"
for r in 1 2; do timeout 120 .devrun/embag-probe 2>&1 | tee -a "$OUT/summary.log"; done
