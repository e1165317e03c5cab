//! How a CPU thread that serves GPU queues (the host-side controller's workers, the file
//! backend's service threads) waits when a loop finds nothing to do: it spins for a
//! while, then sleeps between looks, so that an idle array costs no core and a new
//! command waits at most one sleep.

use std::time::Duration;

/// Empty loops spun before the thread starts sleeping.
const SPINS: u32 = 2000;
/// The sleep between looks after that: the longest a new command then waits.
const SLEEP: Duration = Duration::from_micros(20);
/// The sleep between looks of a stalled thread (fault injection).
const STALLED: Duration = Duration::from_micros(200);

/// The empty loops a serving thread has made in a row.
#[derive(Default)]
pub(crate) struct IdleWait {
    empty: u32,
}

impl IdleWait {
    /// A loop that did work: spin again from the start.
    pub(crate) fn busy(&mut self) {
        self.empty = 0;
    }

    /// A loop that found nothing: spin, or after [`SPINS`] such loops sleep [`SLEEP`].
    pub(crate) fn idle(&mut self) {
        self.empty = self.empty.saturating_add(1);
        if self.empty > SPINS {
            std::thread::sleep(SLEEP);
        } else {
            std::hint::spin_loop();
        }
    }

    /// A stalled thread's wait between looks at its stall flag.
    pub(crate) fn stalled() {
        std::thread::sleep(STALLED);
    }
}
