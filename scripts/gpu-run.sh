#!/usr/bin/env bash
# GPU test/bench driver.
#   scripts/gpu-run.sh build          build the release binaries here and stage them in .devrun/
#   scripts/gpu-run.sh remote PLAN    on the GPU machine: run a plan, logs and JSON under $OUT
# Plans: tests | bench | littles-law | all (the I/O stack), workloads (the workload examples
# against their peers), cache-tests | cache-bench | random-access | cache (the cache),
# kernels (`bam bench kernels`: the kernel suite, plain against ported), hostctl (the
# host-side controller backend: GPU and cache tests on both backends, hostctl benches),
# multigpu (on a machine with two GPUs: the multi-GPU tests, bench --gpus 0,1 private and
# shared, host media, the ported gather, then the single-GPU suites as a regression check).
# The device tool runs e.g. `bash scripts/gpu-run.sh remote cache` with carry [".devrun"].
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
build)
    # The lent machine is an H100: sm_90 only keeps the carried binaries small.
    export BAM_CUDA_ARCHS=90
    cargo build --release -p bam-tests --bin bam-gpu-tests --bin bam-cache-tests --bin bam-multi-gpu-tests
    cargo build --release -p random-access
    cargo build --release --manifest-path examples/out-of-tree/Cargo.toml --target-dir target
    cargo build --release -p bam-cli
    # The workload examples (plan `workloads`).
    cargo build --release -p billion-rows -p tpch-scan -p graph-analytics
    rm -rf .devrun && mkdir -p .devrun
    cp target/release/bam-gpu-tests target/release/bam-cache-tests target/release/bam-multi-gpu-tests \
        target/release/random-access target/release/bam target/release/bam-out-of-tree-example \
        target/release/billion-rows target/release/tpch-scan target/release/graph-analytics .devrun/
    git rev-parse HEAD > .devrun/commit
    if ! git diff --quiet HEAD -- crates examples; then echo dirty >> .devrun/commit; fi
    strip .devrun/bam-gpu-tests .devrun/bam-cache-tests .devrun/bam-multi-gpu-tests .devrun/random-access .devrun/bam .devrun/bam-out-of-tree-example \
        .devrun/billion-rows .devrun/tpch-scan .devrun/graph-analytics
    # Micro-measurements (benches/probe/gpu_probe.cu): nanosleep, globaltimer, hand-off.
    nvcc="$(sed -n 's/^.*BAM_NVCC=//p' target/release/build/bam-*/output 2>/dev/null | head -1)"
    if [[ -x "$nvcc" ]]; then
        "$nvcc" -O3 -arch=sm_90 -std=c++17 benches/probe/gpu_probe.cu -o .devrun/gpu-probe \
            -L"$(dirname "$nvcc")/../lib" -cudart static && strip .devrun/gpu-probe
        # Memory-system latencies behind one miss (benches/probe/latency_probe.cu).
        "$nvcc" -O3 -arch=sm_90 -std=c++17 benches/probe/latency_probe.cu -o .devrun/latency-probe \
            -L"$(dirname "$nvcc")/../lib" -cudart static && strip .devrun/latency-probe
    fi
    ls -la .devrun
    ;;
remote)
    plan="${2:-all}"
    OUT="${OUT:-/tmp/out}"
    mkdir -p "$OUT"
    export BAM_COMMIT="$(tr '\n' ' ' < .devrun/commit)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
    B=".devrun/bam bench"
    run() { local name=$1; shift; echo "== $name: bam bench $*" | tee -a "$OUT/bench.log"; timeout 100 $B "$@" --output "$OUT/$name.json" 2>&1 | tee -a "$OUT/bench.log" || echo "BENCH $name FAILED" | tee -a "$OUT/bench.log"; }
    if [[ "$plan" == bench || "$plan" == all ]]; then
        run ideal-hbm-512-threads --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 --threads 1,32,1024,4096,16384,32768,65536 --runtime 0.5 --verify
        run ideal-hbm-512-queues --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 1,8,32,128 --threads 65536 --runtime 0.5
        run ideal-hbm-512-queues-131072 --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 1,128 --threads 131072 --runtime 0.5
        run host-4k --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 4k --queues 64 --threads 65536 --runtime 1 --verify --baseline
        run host-512 --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --baseline
        # The same 1 GiB of host memory in all, over 8 SSDs or 1 (the span read changes the rate).
        run host-512-cap128M --device sim:ideal,ssds=8,media=host,capacity=128M --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --baseline
        run host-512-1ssd --device sim:ideal,ssds=1,media=host,capacity=1G --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --baseline
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
    export CUDA_MODULE_LOADING=EAGER
    if [[ "$plan" == cache-tests || "$plan" == cache ]]; then
        timeout "${CACHE_TEST_TIMEOUT:-420}" .devrun/bam-cache-tests sim > "$OUT/cache-tests.log" 2>&1 || echo "CACHE TESTS FAILED rc=$?" | tee -a "$OUT/cache-tests.log"
        grep -E "^(PASS|FAIL|FATAL|all cache)" "$OUT/cache-tests.log" || true
    fi
    if [[ "$plan" == random-access || "$plan" == cache ]]; then
        for v in ref coalesced; do
            echo "== random_access ($v reads of data)" | tee -a "$OUT/random-access.log"
            if [[ $v == coalesced ]]; then envs=(RA_COALESCED=1); else envs=(-u RA_COALESCED); fi
            timeout 90 env "${envs[@]}" .devrun/random-access 2>&1 | tee -a "$OUT/random-access.log" || echo "RANDOM ACCESS ($v) FAILED rc=$?" | tee -a "$OUT/random-access.log"
        done
    fi
    if [[ "$plan" == cache-bench ]]; then
        # CACHE_BENCH_ARGS: extra `bam bench cache` flags (default: the 256 MiB study).
        timeout 500 .devrun/bam --json bench cache ${CACHE_BENCH_ARGS:---hit-size 256M --miss-size 256M --threads 65536,262144} \
            --output "$OUT/cache-bench.json" > "$OUT/cache-bench.log" 2>&1 || echo "CACHE BENCH FAILED rc=$?" | tee -a "$OUT/cache-bench.log"
    fi
    if [[ "$plan" == kernels ]]; then
        # The kernel suite, defaults (UVM included; bam-quarter and the UVM variants stop at
        # their 15 s budget). The timeout keeps the whole command under the device's 600 s;
        # the JSON is rewritten after every kernel, so a run that is cut keeps what it
        # measured.
        # KERNELS_ARGS: extra `bam bench kernels` flags (e.g. --no-uvm, --scale 0.5).
        timeout 480 .devrun/bam bench kernels ${KERNELS_ARGS:-} --output "$OUT/kernels.json" --plot "$OUT/kernels.svg" \
            > "$OUT/kernels.log" 2>&1 || echo "KERNELS BENCH FAILED rc=$?" | tee -a "$OUT/kernels.log"
        cat "$OUT/kernels.log"
    fi
    if [[ "$plan" == workloads ]]; then
        # The workloads: the billion-row challenge, TPC-H Q1/Q6 and BFS/CC, each against its
        # peers in the same run. DuckDB comes from a wheel carried in .whl (no network
        # there). Sizes: BRC_ROWS, TPCH_SF, GRAPH_SCALE; extra flags: TPCH_ARGS, GRAPH_ARGS;
        # WORKLOADS picks some of brc tpch graph.
        if ls .whl/duckdb-*.whl > /dev/null 2>&1; then
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/duckdb-*.whl \
                && export PYTHONPATH=/tmp/site
        fi
        data=/tmp/bam-workloads && mkdir -p "$data"
        for w in ${WORKLOADS:-brc tpch graph}; do
            case $w in
            brc)
                timeout 400 .devrun/billion-rows --rows "${BRC_ROWS:-1e9}" --write-file "$data/measurements.txt" \
                    --json "$OUT/brc.json" --output "$data/brc.txt" 2>&1 | tee -a "$OUT/workloads.log" || echo "BRC FAILED" | tee -a "$OUT/workloads.log"
                timeout 300 python3 examples/billion_rows/duckdb_peer.py "$data/measurements.txt" --threads "$(nproc)" --runs 2 \
                    --json "$OUT/brc-duckdb.json" --expect "$data/brc.txt" 2>&1 | tee -a "$OUT/workloads.log" || echo "BRC DUCKDB FAILED" | tee -a "$OUT/workloads.log"
                rm -f "$data/measurements.txt" ;;
            tpch)
                timeout 400 .devrun/tpch-scan --sf "${TPCH_SF:-30}" ${TPCH_ARGS:-} --columns-dir "$data/lineitem" --answers "$data/tpch-answers.json" \
                    --json "$OUT/tpch.json" 2>&1 | tee -a "$OUT/workloads.log" || echo "TPCH FAILED" | tee -a "$OUT/workloads.log"
                timeout 300 python3 examples/tpch/duckdb_peer.py "$data/lineitem" --threads "$(nproc)" --runs 3 \
                    --json "$OUT/tpch-duckdb.json" --expect "$data/tpch-answers.json" 2>&1 | tee -a "$OUT/workloads.log" || echo "TPCH DUCKDB FAILED" | tee -a "$OUT/workloads.log"
                rm -rf "$data/lineitem" ;;
            graph)
                timeout 500 .devrun/graph-analytics --scale "${GRAPH_SCALE:-26}" ${GRAPH_ARGS:---line 4096,512} --json "$OUT/graph.json" 2>&1 \
                    | tee -a "$OUT/workloads.log" || echo "GRAPH FAILED" | tee -a "$OUT/workloads.log" ;;
            esac
        done
    fi
    if [[ "$plan" == tests || "$plan" == all ]]; then
        timeout 150 .devrun/bam-gpu-tests --backend sim 2>&1 | tee "$OUT/gpu-tests.log" || echo "GPU TESTS FAILED rc=$?"
    fi
    if [[ "$plan" == multigpu ]]; then
        nvidia-smi topo -m > "$OUT/topo.txt" 2>&1 || true
        timeout 300 .devrun/bam-multi-gpu-tests > "$OUT/multi-gpu-tests.log" 2>&1 || echo "MULTI-GPU TESTS FAILED rc=$?" | tee -a "$OUT/multi-gpu-tests.log"
        grep -E "^(PASS|FAIL|FATAL|SKIP|all|GPU)" "$OUT/multi-gpu-tests.log" || true
        mg() { local name=$1; shift; echo "== $name: bam bench $*" | tee -a "$OUT/bench.log"; timeout 240 $B "$@" --output "$OUT/$name.json" 2>&1 | tee -a "$OUT/bench.log" || echo "BENCH $name FAILED" | tee -a "$OUT/bench.log"; }
        # 512 B random reads, ideal simulated SSDs: each GPU its own array, then one array
        # (on GPU 0) serving both GPUs' queues through peer access.
        mg mg-sim-private-512 --gpus 0,1 --sharing private --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1
        mg mg-sim-shared-512 --gpus 0,1 --sharing shared --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1
        # 4 KiB reads from host media: each GPU over its own PCIe link.
        mg mg-host-4k --gpus 0,1 --sharing private --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 4k --queues 64 --threads 65536 --runtime 1 --verify
        # The ported gather through bam::array, each GPU its own cache over one shared array.
        mg mg-sim-shared-gather --gpus 0,1 --sharing shared --device sim:ideal,ssds=8,capacity=1G --rw randread --bs 512 --queues 32 --threads 65536 --runtime 0.5 --gather
        # What limits the shared array: its controller kernel's SMs on GPU 0 (16 above).
        mg mg-sim-shared-512-sms32 --gpus 0,1 --sharing shared --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --sim-sms 32
        mg mg-sim-shared-512-sms64 --gpus 0,1 --sharing shared --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 64 --threads 131072 --runtime 1 --sim-sms 64
        # Host media served from GPU 0 to both GPUs: one PCIe link for all the data.
        mg mg-host-4k-shared --gpus 0,1 --sharing shared --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 4k --queues 64 --threads 65536 --runtime 1 --verify
        mg mg-hostctl-shared-4k --gpus 0,1 --sharing shared --device hostctl:ssds=2,capacity=1G,workers=8 --rw randread --bs 4k --queues 8 --qdepth 256 --threads 4096 --runtime 1 --verify
        # Single-GPU regression check of the changed I/O layer, simulator and cache.
        timeout 200 .devrun/bam-gpu-tests --rounds 1 --backend sim > "$OUT/gpu-tests.log" 2>&1 || echo "GPU TESTS FAILED rc=$?" | tee -a "$OUT/gpu-tests.log"
        grep -E "^(FAIL|all|SKIP)" "$OUT/gpu-tests.log" || true
        timeout 240 .devrun/bam-cache-tests sim > "$OUT/cache-tests.log" 2>&1 || echo "CACHE TESTS FAILED rc=$?" | tee -a "$OUT/cache-tests.log"
        grep -E "^(FAIL|FATAL|all cache)" "$OUT/cache-tests.log" || true
    fi
    if [[ "$plan" == hostctl ]]; then
        # Both backends, one round each: the GPU I/O suite and the cache suite.
        timeout 200 .devrun/bam-gpu-tests --rounds 1 2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^(PASS|FAIL|all|SKIP)" || echo "GPU TESTS FAILED rc=$?"
        timeout 300 .devrun/bam-cache-tests sim hostctl > "$OUT/cache-tests.log" 2>&1 || echo "CACHE TESTS FAILED rc=$?" | tee -a "$OUT/cache-tests.log"
        grep -E "^(PASS|FAIL|FATAL|all cache)" "$OUT/cache-tests.log" || true
        # The regression figures (512 B ideal sim; 4 KiB host media against zero-copy), then
        # GPU threads driving the host-side controllers, verified.
        run ideal-hbm-512 --device sim:ideal,ssds=8,media=hbm --rw randread --bs 512 --queues 128 --threads 131072 --runtime 0.5
        run host-4k --device sim:ideal,ssds=8,media=host,capacity=1G --rw randread --bs 4k --queues 64 --threads 65536 --runtime 1 --verify --baseline
        run hostctl-randread-4k --device hostctl:ssds=2,capacity=1G,workers=8 --rw randread --bs 4k --queues 8 --qdepth 256 --threads 256,4096 --runtime 1 --verify
        run hostctl-randwrite-4k --device hostctl:ssds=2,capacity=1G,workers=8 --rw randwrite --bs 4k --queues 8 --qdepth 256 --threads 4096 --runtime 1 --verify
        run hostctl-randread-512-qd1 --device hostctl:ssds=1,capacity=256M,workers=1 --rw randread --bs 512 --queues 1 --threads 1 --ios 2000 --verify
        # The cache study on the host-side controllers (small: every miss is a few CUDA copies).
        timeout 200 .devrun/bam bench cache --device hostctl:ssds=2,workers=8 --hit-size 64M --miss-size 64M \
            --miss-slots 4096 --threads 4096,16384 --latency-samples 50 --output "$OUT/cache-hostctl.json" \
            > "$OUT/cache-hostctl.log" 2>&1 || echo "HOSTCTL CACHE BENCH FAILED rc=$?" | tee -a "$OUT/cache-hostctl.log"
        timeout 60 .devrun/bam --json doctor > "$OUT/doctor.json" 2>&1 || true
    fi
    ;;
*)
    echo "usage: $0 build | remote [tests|bench|littles-law|all|workloads|cache-tests|cache-bench|random-access|cache|kernels|hostctl|multigpu]" >&2
    exit 2
    ;;
esac
