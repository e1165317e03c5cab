#!/bin/bash
# The baseline-mode probe twice (benches/probe/baseline_mode_probe.cu, built with the
# command in its header); output on stdout (baseline-mode-probe.log).
cd "$(dirname "$0")"
for r in 1 2; do timeout 100 ./baseline-mode-probe; echo rc=$?; done
