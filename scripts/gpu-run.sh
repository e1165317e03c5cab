#!/usr/bin/env bash
# GPU test/bench driver.
#   scripts/gpu-run.sh build          build the release binaries here and stage them in .devrun/
#   scripts/gpu-run.sh remote PLAN    on the GPU machine: run a plan, logs and JSON under $OUT
# Plans: tests | bench | littles-law | all. The device tool runs: `bash scripts/gpu-run.sh remote all`
# with carry [".devrun"].
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
build)
    cargo build --release -p bam --example bam-bench --bin bam-gpu-tests
    mkdir -p .devrun
    cp target/release/examples/bam-bench target/release/bam-gpu-tests .devrun/
    git rev-parse HEAD > .devrun/commit
    if ! git diff --quiet HEAD -- cuda crates/bam crates/cli/src/commands/bench.rs; then echo dirty >> .devrun/commit; fi
    strip .devrun/bam-bench .devrun/bam-gpu-tests
    # Micro-measurements (benches/probe/gpu_probe.cu): nanosleep, globaltimer, hand-off.
    nvcc="$(sed -n 's/^.*BAM_NVCC=//p' target/release/build/bam-*/output 2>/dev/null | head -1)"
    if [[ -x "$nvcc" ]]; then
        "$nvcc" -O3 -arch=sm_90 -std=c++17 benches/probe/gpu_probe.cu -o .devrun/gpu-probe \
            -L"$(dirname "$nvcc")/../lib" -cudart static && strip .devrun/gpu-probe
    fi
    ls -la .devrun
    ;;
remote)
    plan="${2:-all}"
    OUT="${OUT:-/tmp/out}"
    mkdir -p "$OUT"
    export BAM_COMMIT="$(tr '\n' ' ' < .devrun/commit)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
    B=.devrun/bam-bench
    run() { local name=$1; shift; echo "== $name: bam bench $*" | tee -a "$OUT/bench.log"; timeout 100 $B "$@" --output "$OUT/$name.json" 2>&1 | tee -a "$OUT/bench.log" || echo "BENCH $name FAILED" | tee -a "$OUT/bench.log"; }
    if [[ "$plan" == bench || "$plan" == all ]]; then
        run ideal-hbm-512-threads --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 --threads 1,32,1024,4096,16384,32768,65536 --runtime 0.5 --verify
        run ideal-hbm-512-queues --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 1,8,32,128 --threads 65536 --runtime 0.5
        run ideal-hbm-512-queues-131072 --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 1,128 --threads 131072 --runtime 0.5
        run host-4k --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 4k --queues 64 --threads 65536 --runtime 1 --verify --baseline
        run host-512 --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --baseline
        run host-512-simsms32 --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --sim-sms 32 --baseline
        run optane-qd --device sim:optane-p5800x,media=hbm --rw randread --bs 4k --queues 32 --threads 256,1024,4096 --runtime 0.5
        run optane-scaling --device sim:optane-p5800x,media=hbm --ssds 1,2,4,8 --rw randread --bs 512 --queues 128 --threads 65536 --runtime 0.5
    fi
    if [[ "$plan" == littles-law || "$plan" == all ]]; then
        # Modelled drives at an outstanding count near IOPS x latency (Little's law), so
        # that measured IOPS and mean latency can both be compared with the model.
        # Every thread in its own warp (--threads-per-block 1) keeps N outstanding. N at
        # the knee K = IOPS x latency (= (L + s) / s) and at about 2K (queueing regime).
        run littles-law-optane-512 --device sim:optane-p5800x,media=hbm --rw randread --bs 512 --queues 4 --threads 32,128 --threads-per-block 1 --runtime 1
        run littles-law-optane-4k --device sim:optane-p5800x,media=hbm --rw randread --bs 4k --queues 4 --threads 12,48 --threads-per-block 1 --runtime 1
        run littles-law-980pro-512 --device sim:samsung-980pro,media=hbm --rw randread --bs 512 --queues 4 --threads 64,128 --threads-per-block 1 --runtime 1
        run littles-law-pm1743-4k --device sim:pm1743,media=hbm --rw randread --bs 4k --queues 4 --threads 208,416 --threads-per-block 1 --runtime 1
    fi
    if [[ "$plan" == tests || "$plan" == all ]]; then
        timeout 150 .devrun/bam-gpu-tests 2>&1 | tee "$OUT/gpu-tests.log" || echo "GPU TESTS FAILED rc=$?"
    fi
    ;;
*)
    echo "usage: $0 build | remote [tests|bench|littles-law|all]" >&2
    exit 2
    ;;
esac
