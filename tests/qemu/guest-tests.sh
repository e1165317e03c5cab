#!/bin/sh
# Guest side of `cargo xtask qemu-test`: runs inside the QEMU guest (Debian
# kernel, busybox), drives two emulated NVMe controllers through the bam_nvme
# kernel module and through VFIO, and reports every step on the console as
#
#   BAMTEST PASS <name>      or      BAMTEST FAIL <name>
#
# followed by "BAMTEST-DONE <passed> passed, <failed> failed".  The host side
# (xtask/src/qemu.rs) checks that every expected step passed and then checks
# the disk images for the data written here.
set -u
PASS=0
FAIL=0
T=/tests
M=/lib/modules/extra
CFG=/tests/config          # written by the host: variables below
. $CFG

say() { echo "# $*"; }

# run NAME CMD...: like step, with the real exit status of CMD.  With ONLY set
# (xtask --only), a step neither in ONLY nor in ALWAYS is skipped.
run() {
    name=$1
    shift
    if [ -n "${ONLY:-}" ]; then
        case " $ONLY $ALWAYS " in
        *" $name "*) ;;
        *) echo "BAMTEST SKIP $name (not selected)"; return 0 ;;
        esac
    fi
    say "--- $name: $*"
    start=$(date +%s)
    ( "$@" ; echo $? > /tmp/rc ) 2>&1 | sed 's/^/    /'
    rc=$(cat /tmp/rc)
    end=$(date +%s)
    if [ "$rc" = 0 ]; then
        echo "BAMTEST PASS $name ($((end - start)) s)"
        PASS=$((PASS + 1))
    else
        echo "BAMTEST FAIL $name (exit $rc)"
        FAIL=$((FAIL + 1))
    fi
}

skip() {
    echo "BAMTEST SKIP $1 ($2)"
}

driver_of() {
    d=/sys/bus/pci/devices/$1/driver
    if [ -e "$d" ]; then basename "$(readlink "$d")"; else echo none; fi
}

# the bam-nvme char device of a BDF
devnode_of() {
    for c in /sys/bus/pci/devices/$1/bam-nvme/bam-nvme*; do
        [ -e "$c" ] && { echo "/dev/$(basename "$c")"; return 0; }
    done
    return 1
}

nvme_bdfs() {
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/class")" = 0x010802 ] && basename "$d"
    done
}

wait_for() {  # wait_for SECONDS CMD...
    n=$1
    shift
    i=0
    while [ $i -lt $((n * 10)) ]; do
        "$@" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

bind_to() {  # bind_to BDF DRIVER
    bdf=$1
    drv=$2
    echo "$drv" > /sys/bus/pci/devices/$bdf/driver_override || return 1
    cur=$(driver_of "$bdf")
    if [ "$cur" != none ] && [ "$cur" != "$drv" ]; then
        echo "$bdf" > /sys/bus/pci/drivers/$cur/unbind || return 1
    fi
    if [ "$(driver_of "$bdf")" != "$drv" ]; then
        echo "$bdf" > /sys/bus/pci/drivers/$drv/bind || return 1
    fi
    [ "$(driver_of "$bdf")" = "$drv" ]
}

# ---------------------------------------------------------------------------

BDFS=$(nvme_bdfs)
set -- $BDFS
BDF0=${1:-}
BDF1=${2:-}
say "NVMe controllers: $BDFS"
say "cmdline: $(cat /proc/cmdline)"

t_two_controllers() { [ -n "$BDF0" ] && [ -n "$BDF1" ]; }
run two-controllers t_two_controllers

t_iommu_on() {
    ls /sys/kernel/iommu_groups/ | wc -l
    [ -e /sys/bus/pci/devices/$BDF0/iommu_group ] && [ -e /sys/bus/pci/devices/$BDF1/iommu_group ]
}
run iommu-groups t_iommu_on

t_nvme_driver() {
    modprobe nvme || return 1
    wait_for 20 sh -c "[ -e /sys/bus/pci/drivers/nvme/$BDF0 ] && [ -e /sys/bus/pci/drivers/nvme/$BDF1 ]"
}
run nvme-driver-binds t_nvme_driver

t_load_module() {
    insmod $M/bam_nvme.ko || return 1
    # loading must not take any controller away from nvme
    [ "$(driver_of "$BDF0")" = nvme ] && [ "$(driver_of "$BDF1")" = nvme ] || return 1
    [ -d /sys/bus/pci/drivers/bam_nvme ] && [ -d /sys/class/bam-nvme ]
}
run module-load-grabs-nothing t_load_module

t_refuse_non_nvme() {
    # an unbound non-NVMe function, if the machine has one
    for d in /sys/bus/pci/devices/*; do
        b=$(basename "$d")
        [ "$(cat "$d/class")" = 0x010802 ] && continue
        [ -e "$d/driver" ] && continue
        echo bam_nvme > "$d/driver_override"
        if echo "$b" > /sys/bus/pci/drivers/bam_nvme/bind 2>/dev/null; then
            echo "bam_nvme bound non-NVMe $b"
            return 1
        fi
        echo > "$d/driver_override"
        echo "refused $b (class $(cat "$d/class"))"
        return 0
    done
    echo "no unbound non-NVMe function to try"
    return 0
}
run module-refuses-non-nvme t_refuse_non_nvme

# the block device (nvmeXnY) of BDF's first namespace, under the nvme driver
ns_of() {
    for n in /sys/bus/pci/devices/$1/nvme/nvme*/nvme*n1; do
        [ -e "$n/dev" ] && { basename "$n"; return 0; }
    done
    return 1
}

# bind_refused WHAT: `bam bind $BDF0` must fail, name WHAT, and leave the controller
# with nvme
bind_refused() {
    out=$(bam bind "$BDF0" 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" != 0 ] || { echo "bind succeeded (exit 0)"; return 1; }
    echo "$out" | grep -q "$1" || { echo "the refusal does not name: $1"; return 1; }
    [ "$(driver_of "$BDF0")" = nvme ] || { echo "driver now $(driver_of "$BDF0")"; return 1; }
}

# `bam bind` refuses a controller whose namespace is in use (issue 45): swap, a mounted
# file system (whose file stays readable), a device-mapper holder; the namespace is
# zeroed afterwards, as the image was.
t_bind_refuses_in_use() {
    n=$(ns_of "$BDF0") || { echo "no namespace of $BDF0"; return 1; }
    ok=0
    mkswap /dev/$n >/dev/null && swapon /dev/$n || return 1
    bind_refused "$n used as swap" || ok=1
    swapoff /dev/$n
    modprobe crc32c_generic 2>/dev/null
    modprobe ext4 || return 1
    mke2fs -F /dev/$n >/dev/null && mkdir -p /mnt/ns && mount -t ext2 /dev/$n /mnt/ns || return 1
    echo kept > /mnt/ns/file
    bind_refused "$n mounted on /mnt/ns" || ok=1
    [ "$(cat /mnt/ns/file)" = kept ] || { echo "the mounted file system lost its file"; ok=1; }
    umount /mnt/ns
    modprobe dm-mod || return 1
    echo "0 $(cat /sys/block/$n/size) linear /dev/$n 0" > /tmp/bindhold-table
    DM_DISABLE_UDEV=1 /tests/dmsetup create bindhold < /tmp/bindhold-table || return 1
    bind_refused "$n held by dm-[0-9]* (bindhold)" || ok=1
    DM_DISABLE_UDEV=1 /tests/dmsetup remove bindhold
    dd if=/dev/zero of=/dev/$n bs=1M count=$(( $(cat /sys/block/$n/size) / 2048 )) conv=fsync 2>/dev/null
    return $ok
}
if [ "$HAVE_BAM_BIND" = 1 ]; then
    run bind-refuses-in-use t_bind_refuses_in_use
else
    skip bind-refuses-in-use "the guest has no bam"
fi

t_bind() {
    for b in $BDF0 $BDF1; do
        if [ -x /bin/bam ] && [ "$HAVE_BAM_BIND" = 1 ]; then
            bam bind "$b" || return 1
        else
            bind_to "$b" bam_nvme || return 1
        fi
        devnode_of "$b" || return 1
        [ -c "$(devnode_of "$b")" ] || return 1
    done
}
run bind-both t_bind
DEV0=$(devnode_of "$BDF0")
DEV1=$(devnode_of "$BDF1")
say "DEV0=$DEV0 DEV1=$DEV1"

run kmod-info-0 $T/kmod_test info "$DEV0" "$BDF0"
run kmod-info-1 $T/kmod_test info "$DEV1" "$BDF1"
run kmod-nocap $T/kmod_test nocap "$DEV0"
run kmod-bar $T/kmod_test bar "$DEV0"
run kmod-badinput $T/kmod_test badinput "$DEV0"
run kmod-gpu-absent $T/kmod_test gpu-absent "$DEV0"
run kmod-map-leak-loop $T/kmod_test leak "$DEV1" "$BDF1" "$LEAK_ITERATIONS"
run stub-load insmod $M/bam_p2p_stub.ko
run kmod-gpu-stub $T/kmod_test gpu "$DEV0"
run kmod-gpu-race $T/kmod_test gpu-race "$DEV0" 200
t_revoke_mid_io() {
    $T/kmod_test revoke-io "$DEV0" || return 1
    # the next owner finds the controller disabled and nothing mapped
    $T/kmod_test quiesced "$DEV0"
}
run kmod-revoke-mid-io t_revoke_mid_io
# UNMAP with reads in flight: deferred (force_deferred_unmap=1) until the controller
# stops; then under the strict IOMMU without deferral (typed ends, faults only at the
# unmapped buffer of this controller: those lines go to the list dmesg-clean accepts)
UNMAP_ALLOWED_DMESG=/tmp/unmap-allowed-dmesg.txt
run kmod-unmap-mid-io $T/kmod_test unmap-io "$DEV0"
run kmod-unmap-mid-io-strict $T/kmod_test unmap-io-strict "$DEV0" "$BDF0" "$UNMAP_ALLOWED_DMESG"
run kmod-close-with-mappings $T/kmod_test close "$DEV0"
run kmod-owner-killed $T/kmod_test killed "$DEV0"

if [ -f $T/io-tests.sh ]; then
    . $T/io-tests.sh
fi
if [ -f $T/gpuio-tests.sh ]; then
    . $T/gpuio-tests.sh
fi
if [ -f $T/file-tests.sh ]; then
    . $T/file-tests.sh
fi

run kmod-unbind-while-mapped $T/kmod_test unbind "$DEV1" "$BDF1"
DEV1=$(devnode_of "$BDF1")
run kmod-rebound-works $T/kmod_test info "$DEV1" "$BDF1"
# unbound while open (BAR mapped): BAR0 stays reserved, nvme cannot bind until the
# file's last reference (the BAR mapping) is gone
run kmod-unbind-blocks-nvme $T/kmod_test unbind-nvme "$DEV1" "$BDF1"
DEV1=$(devnode_of "$BDF1")

# no IOMMU translation: the group switched to an identity domain (passthrough);
# open is refused unless allow_unsafe_noiommu=1, which taints the kernel
t_noiommu() {
    g=/sys/bus/pci/devices/$BDF1/iommu_group
    echo "$BDF1" > /sys/bus/pci/drivers/bam_nvme/unbind || return 1
    old=$(cat $g/type)
    echo "group $(basename "$(readlink $g)"): $old, devices: $(ls $g/devices | tr '\n' ' ')"
    rc=1
    if echo identity > $g/type; then
        echo "$BDF1" > /sys/bus/pci/drivers/bam_nvme/bind || return 1
        dev=$(devnode_of "$BDF1")
        echo "iommu attribute: $(cat /sys/class/bam-nvme/$(basename "$dev")/iommu)"
        $T/kmod_test noiommu "$dev"
        rc=$?
        echo "$BDF1" > /sys/bus/pci/drivers/bam_nvme/unbind || return 1
    else
        echo "cannot switch the IOMMU group to identity"
    fi
    echo "${old%-FQ}" > $g/type || return 1
    echo "group type back to: $(cat $g/type)"
    echo "$BDF1" > /sys/bus/pci/drivers/bam_nvme/bind || return 1
    [ "$rc" = 0 ] && $T/kmod_test info "$(devnode_of "$BDF1")" "$BDF1"
}
run kmod-noiommu t_noiommu
DEV1=$(devnode_of "$BDF1")

# Two more controllers sit behind a PCIe-to-PCI bridge (xtask puts them there), so
# they share one IOMMU group. With one of them bound to nvme, opening the other
# through bam_nvme is refused unless allow_shared_iommu_group=1; with it unbound
# (no driver), the open is allowed.
t_shared_group() {
    set -- $BDFS
    shift 2
    G0=${1:-}
    G1=${2:-}
    [ -n "$G0" ] && [ -n "$G1" ] || { echo "no controllers behind the bridge: $BDFS"; return 1; }
    g0=$(basename "$(readlink /sys/bus/pci/devices/$G0/iommu_group)")
    g1=$(basename "$(readlink /sys/bus/pci/devices/$G1/iommu_group)")
    echo "$G0 in group $g0, $G1 in group $g1: $(ls /sys/kernel/iommu_groups/$g0/devices | tr '\n' ' ')"
    [ "$g0" = "$g1" ] || return 1
    wait_for 20 sh -c "[ -e /sys/bus/pci/drivers/nvme/$G1 ]" || return 1
    bind_to "$G0" bam_nvme || return 1
    dev=$(devnode_of "$G0")
    $T/kmod_test shared-group "$dev" "$G0" || return 1
    dmesg | grep -F "open refused: the IOMMU group is shared with $G1 (bound to nvme)" | tail -n 1 | grep . || return 1
    # the other controller without a driver: nothing else can use the translations
    echo "$G1" > /sys/bus/pci/drivers/nvme/unbind || return 1
    $T/kmod_test info "$dev" "$G0" || return 1
    echo > /sys/bus/pci/devices/$G0/driver_override
    bind_to "$G0" nvme && bind_to "$G1" nvme
}
run kmod-shared-group t_shared_group

# A fifth controller sits alone behind a PCIe root port with AER ($AER_PORT, QEMU id
# $AER_QMP_ID; xtask puts it there). kmod_test asks the host (a BAMQMP console line)
# to inject an uncorrectable error at that port through QEMU's monitor; the kernel's
# AER driver runs the recovery over the devices below the port, so the module's
# error handler runs with the file open, the BAR mapped, host memory mapped and the
# controller enabled. MALF_TLP is fatal by default (frozen: the port's link is
# reset), POISON_TLP non-fatal (no reset).
aer_bdf() {
    for d in /sys/bus/pci/devices/$AER_PORT/0000:*; do
        [ -e "$d/class" ] && [ "$(cat "$d/class")" = 0x010802 ] && { basename "$d"; return 0; }
    done
    return 1
}
t_aer() {
    bdf=$(aer_bdf) || { echo "no controller below $AER_PORT"; return 1; }
    echo "$bdf below $AER_PORT: $(driver_of "$bdf")"
    bind_to "$bdf" bam_nvme || return 1
    $T/kmod_test aer "$(devnode_of "$bdf")" "$bdf" "$AER_QMP_ID" "$1"
}
run kmod-aer-fatal t_aer MALF_TLP
run kmod-aer-nonfatal t_aer POISON_TLP
# Removal (sysfs remove) of that controller with the file open, the BAR and host
# and GPU memory mapped; then a rescan brings it back (nvme binds it).
t_remove() {
    bdf=$(aer_bdf) || { echo "no controller below $AER_PORT"; return 1; }
    bind_to "$bdf" bam_nvme || return 1
    $T/kmod_test remove "$(devnode_of "$bdf")" "$bdf" || return 1
    wait_for 20 sh -c "[ -e /sys/bus/pci/drivers/nvme/$bdf ]" || return 1
    echo "$bdf back after rescan: $(driver_of "$bdf")"
}
run kmod-remove-while-open t_remove
run kmod-rmmod-busy $T/kmod_test rmmod-busy "$DEV0"

if [ -f $T/vfio-tests.sh ]; then
    . $T/vfio-tests.sh
fi

# last use of the module's nodes: lockdown is one-way for the rest of the boot
run kmod-lockdown $T/kmod_test lockdown "$DEV0"

t_rmmod() {
    rmmod bam_p2p_stub || return 1
    rmmod bam_nvme || return 1
    [ ! -d /sys/bus/pci/drivers/bam_nvme ] || return 1
    for b in $BDF0 $BDF1; do
        d=$(driver_of "$b")
        echo "$b: $d"
        [ "$d" != bam_nvme ] || return 1
    done
}
run rmmod-clean t_rmmod

t_unbind_to_nvme() {
    for b in $BDF0 $BDF1; do
        bam unbind "$b" || return 1
        wait_for 10 sh -c "[ -e /sys/bus/pci/drivers/nvme/$b ]" || return 1
    done
    bam list
}
if [ "$HAVE_BAM_BIND" = 1 ]; then
    run bam-unbind-to-nvme t_unbind_to_nvme
fi

t_dmesg() {
    dmesg > /tmp/dmesg.txt
    # The only IOMMU faults allowed: the exact lines gpuio-revoke-kmod-0 logged and
    # checked (its controller, addresses of the buffer it had just revoked).
    # ... and those of kmod-unmap-mid-io-strict (its controller, its unmapped buffer).
    cp /tmp/dmesg.txt /tmp/dmesg-checked.txt
    cat "${GPUIO_ALLOWED_DMESG:-/nonexistent}" "${UNMAP_ALLOWED_DMESG:-/nonexistent}" \
        > /tmp/dmesg-allowed.txt 2>/dev/null
    if [ -s /tmp/dmesg-allowed.txt ]; then
        echo "allowing $(grep -c . /tmp/dmesg-allowed.txt) DMAR lines of the revocation and strict-unmap steps"
        grep -vxF -f /tmp/dmesg-allowed.txt /tmp/dmesg.txt > /tmp/dmesg-checked.txt
    fi
    if grep -nE 'WARNING:|BUG:|Oops|Call Trace|general protection|KASAN|UBSAN|refcount_t:|list_add corruption|list_del corruption|Poison overwritten|Redzone overwritten|Padding overwritten|Object already free|BUG [a-zA-Z0-9_:-]+ \(|DMAR: DRHD: handling fault|DMAR:.*fault|IO_PAGE_FAULT|kernel BUG|Trying to free nonexistent resource' /tmp/dmesg-checked.txt; then
        return 1
    fi
    grep -c . /tmp/dmesg.txt
}
run dmesg-clean t_dmesg
say "--- dmesg (bam lines)"
grep -E 'bam|nvme|vfio|DMAR' /tmp/dmesg.txt | tail -n 80 | sed 's/^/    /'

echo "BAMTEST-DONE $PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
