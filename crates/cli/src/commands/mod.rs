//! One module per subcommand. Each has an `XArgs` struct (clap `Args`) and
//! `run(&XArgs, &Global) -> CliResult<()>`; `main.rs` has the `Command` enum that lists
//! them. `bench/` is a folder: `bam bench` and its subcommands.

#[cfg(feature = "gpu")]
pub mod bench;
pub mod bind;
pub mod catalog;
pub mod doctor;
pub mod holders;
pub mod info;
pub mod list;
pub mod load;
pub mod plot;
pub mod read;
pub mod write;

use crate::device::DEFAULT_DEVICE;
use clap::Args;

/// `--device`, shared by the commands that talk to one controller.
#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// The controller: model:PATH[,size=SIZE][,lba=BYTES] (size= creates a missing
    /// image), model:ram:SIZE[,lba=BYTES], vfio:[DDDD:]BB:DD.F or kmod:/dev/bam-nvmeN (see
    /// `bam --help`)
    #[arg(short = 'd', long, value_name = "DEV", default_value = DEFAULT_DEVICE)]
    pub device: String,
}

/// `--nsid`, for the commands that do I/O.
#[derive(Args, Debug, Clone)]
pub struct NamespaceArgs {
    /// Namespace id (1 to 0xFFFFFFFE)
    #[arg(long, value_name = "NSID", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=0xFFFF_FFFE))]
    pub nsid: u32,
}

/// Bytes moved per I/O call of the CPU commands (a multiple of every block size).
pub const CHUNK_BYTES: usize = 4 << 20;

/// Queue depth of the single-threaded commands (read, write).
pub const SIMPLE_QUEUE_DEPTH: u32 = 64;

/// Reads until `buf` is full or the reader is at its end; returns the bytes read.
pub fn read_full(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
