//! Ctrl-C (SIGINT) for the commands that move data (`read`, `write`, `load`): the first
//! one asks the command to stop after the I/O in flight, flush what it wrote and say how
//! far it got (exit code 130, as a shell reports a process killed by SIGINT); a second
//! one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Catches SIGINT from now on (once per process; later calls do nothing).
pub fn catch() {
    let _ = ctrlc::set_handler(|| {
        if REQUESTED.swap(true, Ordering::SeqCst) {
            // The second Ctrl-C: the user does not want to wait for the flush.
            std::process::exit(crate::error::EXIT_INTERRUPTED);
        }
    });
}

/// Whether Ctrl-C was pressed.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}
