#!/usr/bin/env bash
# What ptxas makes of the kernel suite's ported kernels: registers, stack, spills, and the
# local-memory loads left in the code, per kernel, for this tree and optionally for a git
# revision beside it. Runs on any machine with the CUDA compiler (no GPU needed):
#
#   scripts/kernel-registers.sh            # this tree
#   scripts/kernel-registers.sh a51800c    # this tree against a51800c
#   ARCH=sm_90 KERNELS='hist|rmw' scripts/kernel-registers.sh
#
# Why it exists: a change to array.cuh or cache.cuh is inlined into every ported kernel,
# and under the suite's register budgets (32 or 40 registers) a few more live values make
# ptxas keep a loop's variables in local memory. Such a value is reloaded from L2 after
# each acquire load empties L1, an extra round trip on every access (history: git show
# f700c74:docs/performance.md, "Why histogram and rmw stay below half"). Looking here first is cheaper than a device
# call. A spill is not always slower, and no spill is not always faster: measure what
# lands (`bam bench kernels`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ARCH=${ARCH:-sm_90}
KERNELS=${KERNELS:-.}
REV=${1:-}

find_tool() {
  local t=$1 dir
  if command -v "$t" > /dev/null; then command -v "$t"; return; fi
  for dir in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2> /dev/null); do
    if [ -x "$dir/nvidia/cu13/bin/$t" ]; then echo "$dir/nvidia/cu13/bin/$t"; return; fi
  done
  return 1
}
NVCC=${NVCC:-$(find_tool nvcc)} || { echo "nvcc not found: bash .ci/install-cuda.sh" >&2; exit 2; }
CUOBJDUMP=$(find_tool cuobjdump) || { echo "cuobjdump not found: bash .ci/install-cuda.sh" >&2; exit 2; }
# cuobjdump -sass needs nvdisasm beside it; without it every count below would read 0.
find_tool nvdisasm > /dev/null || { echo "nvdisasm not found (cuobjdump -sass needs it): bash .ci/install-cuda.sh" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# report TREE TAG: one line per kernel of TREE's suite, "kernel regs stack spill_st spill_ld ldl".
report() {
  local tree=$1 tag=$2 inc=$1/crates/bam/cuda/include
  # Revisions before the device library moved into crates/bam kept it in cuda/.
  [ -d "$inc" ] || inc=$tree/cuda/include
  "$NVCC" -std=c++17 -O3 -cubin -arch="$ARCH" -Xptxas -v -I "$inc" \
    "$tree/crates/bam-bench/cuda/suite.cu" -o "$WORK/$tag.cubin" > "$WORK/$tag.log" 2>&1 ||
    { cat "$WORK/$tag.log" >&2; exit 1; }
  # ptxas prints "Function properties for F" and then "N bytes stack frame, S bytes spill
  # stores, L bytes spill loads" for every function (kernels and the out-of-line ones they
  # call, interleaved), and "Used R registers" after an entry's "Compiling entry function".
  awk '
    /Compiling entry function/ { match($0, /\047[^\047]+\047/); e = substr($0, RSTART + 1, RLENGTH - 2) }
    /Function properties for/ { f = $NF }
    /bytes stack frame/ { st[f] = $1; ss[f] = $5; sl[f] = $9 }
    /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r[e] = $(i + 1) }
    END { for (k in r) print k, r[k], st[k] + 0, ss[k] + 0, sl[k] + 0 }
  ' "$WORK/$tag.log" | grep -E '^suite_[a-z]+_(plain|bam|bam8|bamu) ' | grep -E "$KERNELS" | sort |
    while read -r k regs stack sst sld; do
      local sass ldl
      # A failing disassembly stops the script: a count of 0 from no output is a lie.
      sass=$("$CUOBJDUMP" -sass -fun "$k" "$WORK/$tag.cubin" 2> "$WORK/sass.err") && [ -n "$sass" ] ||
        { echo "cuobjdump -sass failed for $k:" >&2; cat "$WORK/sass.err" >&2; exit 1; }
      ldl=$(grep -c ' LDL' <<< "$sass" || true)
      echo "$k $regs $stack $sst $sld $ldl"
    done > "$WORK/$tag.txt"
}

report "$ROOT" tree
if [ -z "$REV" ]; then
  printf '%-22s %5s %6s %9s %9s %5s\n' kernel regs stack spill_st spill_ld LDL
  while read -r k r s a b l; do printf '%-22s %5s %6s %9s %9s %5s\n' "$k" "$r" "$s" "$a" "$b" "$l"; done < "$WORK/tree.txt"
  exit 0
fi
# The revision's device library (crates/bam/cuda, or cuda/ before it moved there) and
# suite, checked out beside this tree.
mkdir -p "$WORK/rev"
lib=crates/bam/cuda
git -C "$ROOT" cat-file -e "$REV:$lib" 2> /dev/null || lib=cuda
git -C "$ROOT" archive "$REV" "$lib" crates/bam-bench/cuda | tar -x -C "$WORK/rev"
report "$WORK/rev" rev
printf '%-22s %13s %13s %17s %11s\n' kernel "regs rev/tree" "stack" "spill_st" "LDL"
join "$WORK/rev.txt" "$WORK/tree.txt" | while read -r k r1 s1 a1 b1 l1 r2 s2 a2 b2 l2; do
  mark=""
  [ "$a1/$l1" != "$a2/$l2" ] && mark="  <- changed"
  printf '%-22s %13s %13s %17s %11s%s\n' "$k" "$r1/$r2" "$s1/$s2" "$a1/$a2" "$l1/$l2" "$mark"
done
