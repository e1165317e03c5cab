#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler from pip wheels, pinned together (an unpinned
# nvidia-nvvm emits PTX that the 580 driver rejects). crates/bam/build.rs finds nvcc
# under <site-packages>/nvidia/cu13/bin.
set -euo pipefail
python3 -m pip install --quiet \
    'nvidia-cuda-nvcc==13.0.*' 'nvidia-nvvm==13.0.*' 'nvidia-cuda-crt==13.0.*' \
    'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-cccl==13.0.*'
# cuobjdump lists the architectures in the fatbins (cargo xtask ci checks them). It only
# reads files, and no 13.0 wheel of it exists: the 13.2 one, without dependencies.
python3 -m pip install --quiet --no-deps 'nvidia-cuda-cuobjdump==13.2.*'
# `cuobjdump -sass` disassembles through nvdisasm (scripts/kernel-registers.sh counts local
# loads with it); likewise no 13.0 wheel, the 13.2 one.
python3 -m pip install --quiet --no-deps 'nvidia-cuda-nvdisasm==13.2.*'
