#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, then `cargo xtask ci`
# (format, clippy, unit and integration tests, CUDA build, kernel module, QEMU guest tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo xtask ci "$@"
