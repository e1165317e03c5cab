# Sourced by guest-tests.sh (both controllers bound to bam_nvme, bam_p2p_stub loaded):
# the real backend's CUDA-free bring-up, bam::io::attach, with the stand-in's memory as
# "GPU memory" (tests/qemu-gpuio). Verified CPU-driven I/O through the queue pairs that
# attach created, then the I/O buffer freed under queued commands (--revoke), then two
# attachments sharing one controller (--shared). The DMAR
# fault lines that step checked (this controller, revoked addresses only) are collected
# in $GPUIO_ALLOWED_DMESG, the only IOMMU faults dmesg-clean accepts.
GPUIO_ALLOWED_DMESG=/tmp/gpuio-allowed-dmesg.txt

t_gpuio() {
    dev=$1
    shift
    c0=$(cat /sys/module/bam_p2p_stub/parameters/callbacks)
    /tests/qemu-gpuio --queues 4 --depth 32 --ios "$GPUIO_IOS" "$@" "kmod:$dev" || return 1
    echo "stub callbacks: $c0 -> $(cat /sys/module/bam_p2p_stub/parameters/callbacks)"
    # our exit left the controller quiesced (the module's release)
    /tests/kmod_test quiesced "$dev"
}
run gpuio-attach-kmod-0 t_gpuio "$DEV0"
run gpuio-attach-kmod-1 t_gpuio "$DEV1"
run gpuio-revoke-kmod-0 t_gpuio "$DEV0" --revoke --allowed-dmesg "$GPUIO_ALLOWED_DMESG"
# Two "GPUs" sharing one controller (IoArray::on_shared): queue pairs of each, verified
# I/O through both, one detaching (Delete I/O SQ/CQ) while the other goes on.
run gpuio-shared-kmod-1 t_gpuio "$DEV1" --shared
