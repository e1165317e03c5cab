//! The command line, and the help that teaches it.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

const ABOUT: &str = "Reads one file or block device the ways a user could without bam, and \
prints one JSON line per case: the peers the file backend is measured against.";

const LONG_ABOUT: &str = "\
Reads one file or block device the ways a user could without bam, and prints one JSON \
line per case: the peers the file backend's benchmark is compared with, in the same run \
on the same file.

PEERS
  uring         CPU io_uring reads into plain page-aligned host memory, what fio
                ioengine=io_uring rw=randread does: --threads threads, one ring each,
                --depth reads in flight per ring, every completion answered by the next
                read. Random --bs-aligned pieces, or with --seq each thread reads its own
                contiguous region in --bs pieces.
  pread-memcpy  What a user writes first: each thread preads a piece into its pinned host
                buffer (cuMemHostAlloc) and copies it into GPU memory with one synchronous
                cuMemcpyHtoD, one piece at a time (so its depth is 1). Without a GPU it
                prints `SKIPPED: pread-memcpy needs a GPU (reason)` and counts as success.
  kvikio        Not in this binary: kvikio_read.py beside it reads the pieces that
                --emit-offsets writes into a torch CUDA tensor with KvikIO (README.md).

Both peers in the binary read the same pieces for the same --seed, --bs and file: piece i
is a SplitMix64 hash of (seed, i), thread t of T reads pieces t, t+T, ..., so --ops N reads
pieces 0..N whatever the thread count.";

const EXAMPLES: &str = "\
EXAMPLES (the cases of shared/notes/file-backend.md)
  Make a test file (16 GiB; each 8-byte word is its offset ^ a key, so --verify works):
    bam-file-peers --make-file /data/peers.bin --size 16G

  4 KiB random reads, O_DIRECT, QD 32 (run with --threads 1, 4 and 16):
    bam-file-peers /data/peers.bin --direct --bs 4K --depth 32 --threads 4

  4 KiB random reads through the page cache, QD 32, 8 threads (--warm reads the file
  once first, so the pieces are cached; the file must fit in memory):
    bam-file-peers /data/peers.bin --warm --bs 4K --depth 32 --threads 8

  1 MiB sequential reads, O_DIRECT, QD 8, 8 threads (drop --direct and take
  --threads 16 --warm for the page-cached case):
    bam-file-peers /data/peers.bin --seq --bs 1M --depth 8 --threads 8 --direct

  Only one peer, for a fixed number of pieces, checking every byte read:
    bam-file-peers /data/peers.bin --peer uring --ops 1000000 --verify

  The same 4 KiB pieces for KvikIO (1 GiB reads: kvikio_read.py --large; the wheels
  installed by install-wheels.sh, README.md):
    bam-file-peers /data/peers.bin --emit-offsets /data/offsets.bin --ops 200000
    KVIKIO_COMPAT_MODE=ON PYTHONPATH=/tmp/kvikio-py /opt/torch/.venv/bin/python \\
        kvikio_read.py /data/peers.bin --offsets /data/offsets.bin --threads 8

OUTPUT
  One JSON object per line and case: peer, mode (randread|seqread), direct, threads,
  depth, bs, ops, seconds, iops, gbps (decimal GB/s), cpu_cores_busy ((user+sys CPU
  time of this process, getrusage) / wall time), cores_per_miops (cpu_cores_busy per
  million reads a second), and verify_errors with --verify.

EXIT STATUS
  0 done (a SKIPPED case included), 1 --verify found wrong bytes, 2 an error.

SIZES
  --bs and --size take a byte count with an optional binary suffix: 4096, 4K, 1M, 16G,
  1T (K = KiB = 1024).";

/// A reader compared with the file backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Peer {
    /// CPU io_uring reads into host memory (fio's io_uring engine).
    Uring,
    /// pread into pinned memory, then a synchronous cuMemcpyHtoD.
    PreadMemcpy,
}

impl Peer {
    /// As the JSON line names it.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Uring => "uring",
            Peer::PreadMemcpy => "pread-memcpy",
        }
    }
}

#[derive(Parser, Debug)]
#[command(name = "bam-file-peers", version, about = ABOUT, long_about = LONG_ABOUT,
          after_long_help = EXAMPLES)]
pub struct Args {
    /// The file or block device to read.
    #[arg(required_unless_present = "make_file", conflicts_with = "make_file")]
    pub path: Option<PathBuf>,

    /// Peers to run, in this order (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Peer::Uring, Peer::PreadMemcpy])]
    pub peer: Vec<Peer>,

    /// Reader threads (io_uring: one ring each).
    #[arg(long, default_value_t = 8)]
    pub threads: usize,

    /// Reads in flight per thread (uring only).
    #[arg(long, default_value_t = 32)]
    pub depth: usize,

    /// Bytes per read; offsets are multiples of it.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    pub bs: u64,

    /// Run each case this long.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,

    /// Stop each case after this many reads in all instead (pieces 0..N).
    #[arg(long)]
    pub ops: Option<u64>,

    /// Seed of the random offsets.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Open with O_DIRECT (bypass the page cache; --bs a multiple of the logical block size).
    #[arg(long)]
    pub direct: bool,

    /// Sequential reads: each thread reads its own contiguous region, wrapping around.
    #[arg(long)]
    pub seq: bool,

    /// Check every piece read against the pattern of --make-file (exit 1 on a difference).
    #[arg(long)]
    pub verify: bool,

    /// Read the whole file once through the page cache before the cases.
    #[arg(long)]
    pub warm: bool,

    /// Write a pattern file of --size bytes at PATH, then exit.
    #[arg(long, value_name = "PATH", requires = "size")]
    pub make_file: Option<PathBuf>,

    /// Size of --make-file's file.
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,

    /// Write the random offsets of pieces 0..--ops (default 1048576) as little-endian
    /// u64s to FILE, for kvikio_read.py, then exit.
    #[arg(long, value_name = "FILE")]
    pub emit_offsets: Option<PathBuf>,
}

/// A byte count: digits with an optional binary suffix (K, KiB, M, MiB, G, GiB, T, TiB),
/// in the device grammar's one size parser (`bam_nvme::device::parse_size`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    bam_nvme::device::parse_size(s.trim()).map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("16g"), Ok(16 << 30));
    }

    #[test]
    fn bad_sizes_are_errors() {
        for s in ["", "K", "4X", "-1", "1.5G", "99999999999T"] {
            assert!(parse_size(s).is_err(), "{s}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
