# Sourced by guest-tests.sh: the file backend's CPU service (bam::storage::file, driven by
# bam-file-check without a GPU) on storage the kernel exposes. A Linux nvmet target
# serves a file-backed namespace over NVMe/TCP on 127.0.0.1, the kernel's initiator
# connects to it (what `nvme connect -t tcp` does: a line written to /dev/nvme-fabrics),
# and the service's verification runs on the namespace's block device, through the page
# cache and with O_DIRECT. Then a device-mapper error target in the middle of that
# namespace must fail exactly there (media errors, the rest verified; through the page
# cache the writes there must fail at the flush), and a file larger
# than its file system must end in Capacity Exceeded, never in a lost write.
FILE_NQN=bam-file-check
NVMET=/sys/kernel/config/nvmet

new_nvme_block() { # the nvme block device that is not in $1 (not a hidden path
    for b in /sys/block/nvme*; do # of native multipath, nvmeXcYnZ: it has no node)
        n=${b##*/}
        case "$n" in nvme*c*n*) continue ;; esac
        case " $1 " in *" $n "*) ;; *) echo "$n"; return 0 ;; esac
    done
    return 1
}

t_file_nvmet_tcp() {
    modprobe configfs 2>/dev/null
    [ -d /sys/kernel/config/nvmet ] || mount -t configfs none /sys/kernel/config 2>/dev/null
    modprobe nvmet && modprobe nvmet-tcp && modprobe nvme-tcp || return 1
    ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up || return 1
    truncate -s 64M /tmp/nvmet.img || return 1
    S=$NVMET/subsystems/$FILE_NQN
    mkdir $S && echo 1 > $S/attr_allow_any_host || return 1
    mkdir $S/namespaces/1 || return 1
    echo /tmp/nvmet.img > $S/namespaces/1/device_path
    echo 1 > $S/namespaces/1/buffered_io   # tmpfs has no O_DIRECT
    echo 1 > $S/namespaces/1/enable || return 1
    P=$NVMET/ports/1
    mkdir $P && echo tcp > $P/addr_trtype && echo ipv4 > $P/addr_adrfam &&
        echo 127.0.0.1 > $P/addr_traddr && echo 4420 > $P/addr_trsvcid || return 1
    ln -s $S $P/subsystems/$FILE_NQN || return 1
    before=$(ls /sys/block | grep '^nvme' | tr '\n' ' ')
    echo "transport=tcp,traddr=127.0.0.1,trsvcid=4420,nqn=$FILE_NQN" > /dev/nvme-fabrics || return 1
    i=0
    until FILE_DEV=$(new_nvme_block "$before"); do
        i=$((i + 1))
        [ $i -le 10 ] || { echo "no new namespace 10 s after connecting"; return 1; }
        sleep 1
    done
    echo "$FILE_DEV" > /tmp/file-dev   # for the next steps (each runs in a subshell)
    echo "NVMe/TCP namespace: /dev/$FILE_DEV ($(cat /sys/block/$FILE_DEV/size) sectors)"
    /tests/bam-file-check /dev/$FILE_DEV --bytes 32M || return 1
    /tests/bam-file-check /dev/$FILE_DEV --bytes 32M --direct
}
run file-nvmet-tcp t_file_nvmet_tcp

t_file_dm_error() {
    FILE_DEV=$(cat /tmp/file-dev 2>/dev/null)
    [ -n "$FILE_DEV" ] || { echo "no NVMe/TCP namespace (file-nvmet-tcp failed)"; return 1; }
    modprobe dm-mod || return 1
    n=$(cat /sys/block/$FILE_DEV/size)
    # sectors 2048..2175 (bytes 1 MiB .. 1 MiB + 64 KiB) fail; the rest maps through
    printf '0 2048 linear /dev/%s 0\n2048 128 error\n2176 %d linear /dev/%s 2176\n' \
        "$FILE_DEV" $((n - 2176)) "$FILE_DEV" > /tmp/dm-table
    DM_DISABLE_UDEV=1 /tests/dmsetup create bam-file-err < /tmp/dm-table || return 1
    /tests/bam-file-check /dev/mapper/bam-file-err --bytes 8M --error-range 1M:64K --direct &&
        /tests/bam-file-check /dev/mapper/bam-file-err --bytes 8M --error-range 1M:64K
    rc=$?
    DM_DISABLE_UDEV=1 /tests/dmsetup remove bam-file-err || return 1
    return $rc
}
run file-dm-error t_file_dm_error

t_file_enospc() {
    mkdir -p /tmp/small && mount -t tmpfs -o size=1m tmpfs /tmp/small || return 1
    truncate -s 4M /tmp/small/f || return 1
    /tests/bam-file-check /tmp/small/f --bytes 4M --expect-full
    rc=$?
    umount /tmp/small
    return $rc
}
run file-enospc t_file_enospc

t_file_disconnect() {
    for c in /sys/class/nvme/nvme*; do
        [ "$(cat $c/subsysnqn 2>/dev/null)" = "$FILE_NQN" ] && echo 1 > $c/delete_controller
    done
    rm -f $NVMET/ports/1/subsystems/$FILE_NQN
    rmdir $NVMET/ports/1 $NVMET/subsystems/$FILE_NQN/namespaces/1 $NVMET/subsystems/$FILE_NQN
}
run file-nvmet-disconnect t_file_disconnect
