# Sourced by guest-tests.sh: the same I/O checks through VFIO (vfio-pci) under the
# emulated IOMMU (intel-iommu, intel_iommu=on).
t_vfio_bind() {
    modprobe vfio-pci || return 1
    modprobe vfio_iommu_type1 || return 1
    for b in $BDF0 $BDF1; do
        if [ "$HAVE_BAM_BIND" = 1 ]; then
            bam bind "$b" --driver vfio-pci || return 1
        else
            bind_to "$b" vfio-pci || return 1
        fi
        g=$(basename "$(readlink /sys/bus/pci/devices/$b/iommu_group)")
        echo "$b: driver $(driver_of "$b"), iommu group $g"
        [ -c /dev/vfio/$g ] || return 1
    done
}
run vfio-bind t_vfio_bind

t_list_vfio() {
    bam list || return 1
    bam list --json > /tmp/list.json || return 1
    grep -q "\"vfio:$BDF0\"" /tmp/list.json && grep -q "\"vfio:$BDF1\"" /tmp/list.json
}
run bam-list-vfio t_list_vfio

t_vfio_info() {
    bam info --device "vfio:$BDF0"
}
run bam-info-vfio t_vfio_info

t_vfio_write_read() {
    lba=32768
    bam write --device "vfio:$BDF1" --lba $lba --input $D/pattern2.bin || return 1
    bam read --device "vfio:$BDF1" --lba $lba --bytes $(stat -c %s $D/pattern2.bin) --output /tmp/back2.bin || return 1
    cmp $D/pattern2.bin /tmp/back2.bin || return 1
    echo "BAMDATA 1 $((lba * BS)) pattern2.bin"
}
run bam-write-read-vfio t_vfio_write_read

t_vfio_load() {
    off=65536
    bam load $D/pattern1.bin --device "vfio:$BDF0" --offset $off --verify || return 1
    echo "BAMDATA 0 $((off * BS)) pattern1.bin"
}
run bam-load-verify-vfio t_vfio_load

run guest-io-vfio /tests/qemu-guest-io --queues 16 --depth 32 --ios "$GUEST_IOS" "vfio:$BDF0" "vfio:$BDF1"

t_back_to_kmod() {
    for b in $BDF0 $BDF1; do
        bind_to "$b" bam_nvme || return 1
        devnode_of "$b" || return 1
    done
}
run rebind-to-module t_back_to_kmod
