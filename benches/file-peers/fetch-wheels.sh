#!/usr/bin/env bash
# Downloads KvikIO for CUDA 13 and its runtime dependencies as wheels for one CPython
# version (x86_64 Linux), to carry to the GPU machine, which has no PyPI. There:
#   bash install-wheels.sh DIR kvikio-py /opt/torch/.venv/bin/python
# Usage: fetch-wheels.sh DIR [PYTHON_VERSION]   (PYTHON_VERSION: 3.12 unless given; the
# GPU machine's: /opt/torch/.venv/bin/python -V)
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || $1 == -h || $1 == --help ]]; then
    echo "usage: $0 DIR [PYTHON_VERSION (default 3.12)]" >&2
    exit 2
fi
dir=$1
pyver=${2:-3.12}
if [[ ! $pyver =~ ^3\.[0-9]+$ ]]; then
    echo "fetch-wheels: PYTHON_VERSION must look like 3.12, not '$pyver'" >&2
    exit 2
fi
abi=cp${pyver/./}
pip=${PIP:-python3 -m pip}

# kvikio 26.10 as measured in shared/notes/file-backend.md; nvidia-cufile 1.15.1.6 is the
# cuFile of CUDA 13.0 (cuda-toolkit[cufile]==13.0.*), the 580 driver's CUDA. cupy, which
# kvikio's metadata asks for, is not needed to read into torch tensors: --no-deps.
wheels=(
    'kvikio-cu13==26.10.*'
    'libkvikio-cu13==26.10.*'
    'rapids-logger==0.3.*'
    'nvidia-cufile==1.15.1.6.*'
    'cuda-pathfinder'
    'numpy>=2.0,<3'
    'packaging'
)

mkdir -p "$dir"
for w in "${wheels[@]}"; do
    if ! $pip download --quiet --no-deps --only-binary=:all: \
        --python-version "$pyver" --implementation cp --abi "$abi" --abi abi3 --abi none \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 \
        --dest "$dir" "$w"; then
        echo "fetch-wheels: no wheel of '$w' for CPython $pyver on x86_64 Linux" \
            "(kvikio-cu13 26.10 needs CPython >= 3.11; is $pyver the GPU machine's?)" >&2
        exit 1
    fi
done
ls -l "$dir"
du -sh "$dir"
