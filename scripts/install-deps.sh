#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (run as root, or with sudo):
#   - Debian packages listed in .ci/apt-packages.txt (kernel headers, QEMU, busybox, ...)
#   - the CUDA compiler as pinned pip wheels (.ci/install-cuda.sh), when nvcc is missing.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ -f .ci/apt-packages.txt ] && command -v apt-get >/dev/null; then
  mapfile -t pkgs < <(grep -v '^\s*#' .ci/apt-packages.txt | sed '/^\s*$/d')
  missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Headers of a newer kernel too, so CI compiles the module's compat shims for 6.12
  # (the exact version changes with Debian's updates: take the newest listed).
  newest_612() {
    apt-cache search --names-only '^linux-headers-6\.12\.[0-9]+\+deb12-amd64$' 2>/dev/null \
      | awk '{print $1}' | sort -V | tail -n 1
  }
  updated=0
  if [ -z "$(newest_612)" ]; then $SUDO apt-get update -qq; updated=1; fi
  h612=$(newest_612)
  if [ -n "$h612" ] && ! ls -d /usr/src/linux-headers-6.12.*-amd64 >/dev/null 2>&1; then
    missing+=("$h612")
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: apt-get install ${missing[*]}"
    [ $updated = 1 ] || $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

if [ -f .ci/install-cuda.sh ]; then
  bash .ci/install-cuda.sh
fi
