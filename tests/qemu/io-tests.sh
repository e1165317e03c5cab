# Sourced by guest-tests.sh: whole-stack I/O through the bam_nvme module with the
# real `bam` CLI and the qemu-guest-io checker.  Every region written with a pattern
# file is announced as "BAMDATA <image> <byte offset> <file>" for the host to check
# in the image files after the guest has exited.  Block size: QEMU's default 512 B.
BS=512
D=/tests/data

pins() {
    echo 1 > /proc/sys/vm/stat_refresh
    awk '/^nr_foll_pin_acquired/ {a=$2} /^nr_foll_pin_released/ {r=$2} END {print a-r}' /proc/vmstat
}

t_list_kmod() {
    bam list || return 1
    bam list --json > /tmp/list.json || return 1
    grep -q "\"kmod:$DEV0\"" /tmp/list.json && grep -q "\"kmod:$DEV1\"" /tmp/list.json
}
run bam-list-kmod t_list_kmod

# bam doctor with both controllers on bam_nvme: no GPU in the guest, so it exits 1 (the
# GPU check FAILs), but it must see the module (and open its nodes: we are root) and
# both controllers bound to it. Its report goes to the console log.
t_doctor() {
    bam doctor > /tmp/doctor.txt 2>&1
    rc=$?
    cat /tmp/doctor.txt
    echo "bam doctor: exit code $rc"
    [ "$rc" = 1 ] || return 1
    grep -q '^FAIL  *gpu  *no NVIDIA GPU' /tmp/doctor.txt || return 1
    grep -q '^OK  *bam-module  *bam_nvme is loaded' /tmp/doctor.txt || return 1
    grep -q "^OK  *bam-module  *$DEV0 ($BDF0): ABI [0-9]* matches" /tmp/doctor.txt || return 1
    for b in $BDF0 $BDF1; do
        grep -q "^OK  *controllers  *$b .*bound to bam_nvme" /tmp/doctor.txt || return 1
    done
    bam --json doctor > /tmp/doctor.json 2>/dev/null
    [ $? = 1 ] || return 1
    grep -q '"bam-module"' /tmp/doctor.json && grep -q '"real_ssds_from_gpu"' /tmp/doctor.json
}
run bam-doctor t_doctor

t_info_kmod() {
    bam info --device "kmod:$DEV0" || return 1
    bam info --device "kmod:$BDF1" --json > /tmp/info.json || return 1
    cat /tmp/info.json
    grep -q '"kmod' /tmp/info.json
}
run bam-info-kmod t_info_kmod

t_write_read_kmod() {
    lba=2048
    bam write --device "kmod:$DEV0" --lba $lba --input $D/pattern1.bin || return 1
    bam read --device "kmod:$DEV0" --lba $lba --bytes 1M --output /tmp/back.bin || return 1
    cmp $D/pattern1.bin /tmp/back.bin || return 1
    echo "BAMDATA 0 $((lba * BS)) pattern1.bin"
}
run bam-write-read-kmod t_write_read_kmod

t_load_kmod() {
    off=4096
    bam load $D/pattern3.bin --device "kmod:$DEV1" --offset $off --verify || return 1
    echo "BAMDATA 1 $((off * BS)) pattern3.bin"
}
run bam-load-verify-kmod t_load_kmod

t_guest_io_kmod() {
    p0=$(pins)
    /tests/qemu-guest-io --queues 16 --depth 32 --ios "$GUEST_IOS" "kmod:$DEV0" "kmod:$DEV1" || return 1
    p1=$(pins)
    echo "pinned pages before $p0, after $p1"
    [ "$p0" = "$p1" ]
}
run guest-io-kmod t_guest_io_kmod

t_killed_mid_io() {
    p0=$(pins)
    /tests/qemu-guest-io --queues 8 --depth 32 --ios 100000000 "kmod:$DEV0" > /tmp/bg.log 2>&1 &
    pid=$!
    # wait until it owns the device and is doing I/O
    wait_for 30 sh -c "[ \$(cat /sys/class/bam-nvme/${DEV0#/dev/}/owner_pid) = $pid ]" || { cat /tmp/bg.log; return 1; }
    sleep 2
    kill -9 $pid
    wait $pid
    echo "killed $pid (status $?)"
    cat /tmp/bg.log
    # the module quiesced the controller and released everything
    /tests/kmod_test quiesced "$DEV0" || return 1
    p1=$(pins)
    echo "pinned pages before $p0, after $p1"
    [ "$p0" = "$p1" ] || return 1
    # and the controller comes up again, with correct data
    /tests/qemu-guest-io --queues 4 --depth 16 --ios 2000 "kmod:$DEV0"
}
run kmod-killed-mid-io t_killed_mid_io
