#!/usr/bin/env python3
"""The kvikio peer: KvikIO reads of one file into a torch CUDA tensor.

Random mode reads the pieces `bam-file-peers --emit-offsets` wrote (little-endian u64
offsets), `--inflight` CuFile.pread futures at a time, one slice of the tensor each.
`--large` reads the file sequentially in `--piece`-sized CuFile.read calls (1 GiB).
Prints one JSON line like bam-file-peers. Run with the GPU machine's torch Python:

  KVIKIO_COMPAT_MODE=ON PYTHONPATH=kvikio-py /opt/torch/.venv/bin/python \\
      kvikio_read.py FILE --offsets offsets.bin [--threads 8] [--verify]
"""

import argparse
import ctypes
import json
import os
import resource
import sys
import time

# The pattern of bam-file-peers --make-file: the u64 word at offset o is o ^ KEY.
KEY = 0xB5AD_4ECE_DA1C_E2A9


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="the file or block device to read")
    p.add_argument("--offsets", help="offsets file from bam-file-peers --emit-offsets (random mode)")
    p.add_argument("--bs", type=int, default=4096, help="bytes per random piece (as --bs given to --emit-offsets)")
    p.add_argument("--inflight", type=int, default=128, help="pread futures in flight (random mode)")
    p.add_argument("--threads", type=int, help="KvikIO's thread pool size (KVIKIO_NTHREADS)")
    p.add_argument("--large", action="store_true", help="sequential reads of --piece bytes instead")
    p.add_argument("--piece", type=int, default=1 << 30, help="bytes per read with --large (1 GiB)")
    p.add_argument("--seconds", type=float, help="--large: run this long (5 s); random: stop early after this long")
    p.add_argument("--direct", action="store_true", help="let KvikIO read with O_DIRECT (auto_direct_io_read)")
    p.add_argument("--verify", action="store_true", help="check the last pieces in GPU memory against the pattern")
    a = p.parse_args()
    if not a.large and not a.offsets:
        p.error("random mode needs --offsets (bam-file-peers FILE --emit-offsets OUT), or give --large")
    for name in ("bs", "inflight", "piece"):
        if getattr(a, name) <= 0:
            p.error(f"--{name} must be positive")
    if a.threads is not None and a.threads <= 0:
        p.error("--threads must be positive")
    if a.seconds is not None and not a.seconds > 0:
        p.error("--seconds must be positive")
    return a


def fail(msg, code=2):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


def preload_cufile():
    """Loads the first nvidia/cu13/lib/libcufile.so.0 on sys.path (the wheels' folder
    comes first): cuda.pathfinder, which libkvikio asks for cuFile, searches only
    site-packages and system paths, never PYTHONPATH, but takes a library already loaded."""
    for d in sys.path:
        lib = os.path.join(d or ".", "nvidia", "cu13", "lib", "libcufile.so.0")
        if os.path.isfile(lib):
            ctypes.CDLL("librt.so.1", mode=ctypes.RTLD_GLOBAL)
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
            return lib
    return None


def load(args):
    """Imports numpy, torch and kvikio, configured; SKIPPED without a GPU."""
    os.environ.setdefault("KVIKIO_COMPAT_MODE", "ON")
    if args.threads:
        os.environ["KVIKIO_NTHREADS"] = str(args.threads)
    try:
        args.cufile = preload_cufile()
    except OSError as e:
        fail(f"loading libcufile.so.0 from the wheels: {e}")
    try:
        import numpy
        import kvikio
        import kvikio.defaults
    except ImportError as e:
        fail(f"{e} (Python {sys.version.split()[0]}; PYTHONPATH={os.environ.get('PYTHONPATH', '')!r}: "
             "install the wheels of fetch-wheels.sh for this Python with install-wheels.sh)")
    try:
        import torch
    except ImportError as e:
        fail(f"{e}: run with the torch Python (/opt/torch/.venv/bin/python)")
    if not torch.cuda.is_available():
        print("SKIPPED: kvikio needs a GPU (torch.cuda.is_available() is False)")
        sys.exit(0)
    if args.threads:
        kvikio.defaults.set("num_threads", args.threads)
    if args.direct:
        kvikio.defaults.set("auto_direct_io_read", True)
    return numpy, torch, kvikio


def pattern(np, off, n):
    """The bytes of a --make-file file at 8-aligned offset `off`, `n` (a multiple of 8) long."""
    return (np.arange(off, off + n, 8, dtype=np.uint64) ^ np.uint64(KEY)).astype("<u8").view(np.uint8)


class Memory:
    """The destination: a torch CUDA tensor."""

    def __init__(self, np, torch, nbytes):
        self.np, self.torch = np, torch
        self.buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    def slice(self, start, n):
        return self.buf[start:start + n]

    def sync(self):
        self.torch.cuda.synchronize()

    def matches(self, start, n, off):
        """True when bytes [start, start+n) hold the pattern of file offset `off`."""
        got = self.slice(start, n).cpu().numpy()
        return bool(self.np.array_equal(got, pattern(self.np, off, n)))


def random_reads(args, np, f, mem, offsets, deadline):
    """Reads every offset once (or until the deadline), `inflight` at a time."""
    bs, depth = args.bs, args.inflight
    slots = [None] * depth  # (future, offset) per slice of the destination
    ops = 0
    for i, off in enumerate(offsets):
        j = i % depth
        if slots[j] is not None:
            ops += finish(slots[j], bs)
        if deadline is not None and i % depth == 0 and time.perf_counter() >= deadline:
            slots[j] = None
            break
        slots[j] = (f.pread(mem.slice(j * bs, bs), bs, int(off)), int(off))
    for s in slots:
        if s is not None:
            ops += finish(s, bs)
    mem.sync()
    return ops, [(j * bs, bs, s[1]) for j, s in enumerate(slots) if s is not None]


def finish(slot, bs):
    n = slot[0].get()
    if n != bs:
        fail(f"pread at offset {slot[1]} returned {n} of {bs} bytes")
    return 1


def large_reads(args, f, mem, size, deadline):
    """Reads `piece`-sized pieces from the start of the file, wrapping, until the deadline."""
    piece = args.piece
    if size < piece:
        fail(f"the file ({size} B) is smaller than --piece {piece}")
    off, ops = 0, 0
    while True:
        n = f.read(mem.slice(0, piece), piece, off)
        if n != piece:
            fail(f"read at offset {off} returned {n} of {piece} bytes")
        ops += 1
        last = off
        off = off + piece if off + 2 * piece <= size else 0
        if time.perf_counter() >= deadline:
            break
    mem.sync()
    return ops, [(0, piece, last)]


def main():
    args = parse_args()
    np, torch, kvikio = load(args)
    size = os.stat(args.file).st_size
    if size == 0:  # a block device
        with open(args.file, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
    if args.large:
        mem = Memory(np, torch, args.piece)
        bs, depth, mode = args.piece, 1, "seqread"
    else:
        offsets = np.fromfile(args.offsets, dtype="<u8")
        if len(offsets) == 0:
            fail(f"{args.offsets} holds no offsets")
        if int(offsets.max()) + args.bs > size:
            fail(f"{args.offsets} names pieces past the end of {args.file}: emitted for another file or --bs?")
        mem = Memory(np, torch, args.inflight * args.bs)
        bs, depth, mode = args.bs, args.inflight, "randread"
    f = kvikio.CuFile(args.file, "r")
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if args.large:
        ops, last = large_reads(args, f, mem, size, t0 + (args.seconds or 5.0))
    else:
        deadline = None if args.seconds is None else t0 + args.seconds
        ops, last = random_reads(args, np, f, mem, offsets, deadline)
    secs = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    f.close()
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    iops, busy = ops / secs, cpu / secs
    line = {
        "peer": "kvikio",
        "mode": mode,
        "direct": bool(kvikio.defaults.get("auto_direct_io_read")),
        "threads": int(kvikio.defaults.get("num_threads")),
        "depth": depth,
        "bs": bs,
        "ops": ops,
        "seconds": round(secs, 4),
        "iops": round(iops, 1),
        "gbps": round(iops * bs / 1e9, 4),
        "cpu_cores_busy": round(busy, 3),
        "cores_per_miops": round(busy / (iops / 1e6), 3) if ops else None,
    }
    errors = 0
    if args.verify:
        errors = sum(not mem.matches(start, n, off) for start, n, off in last)
        line["verify_errors"] = errors
    print(json.dumps(line))
    print(f"kvikio {kvikio.__version__}, compat_mode {kvikio.defaults.get('compat_mode')}, "
          f"cuFile {args.cufile or 'from the system'}, Python {sys.version.split()[0]}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
