//! The controller's register handshakes: CSTS checks, bounded waits on CSTS, disabling
//! (CC.EN=0) and the orderly shutdown (CC.SHN).

use crate::spec::registers::{offset, ShutdownNotification, SHST_COMPLETE};
use crate::spec::{Cap, Cc, Csts};
use crate::transport::Transport;
use crate::{Error, Result};
use std::time::{Duration, Instant};

/// Reads CSTS and fails if the controller is gone (registers read all ones) or reports a
/// fatal error (CSTS.CFS). `during` says what was going on, for the error.
fn check_alive(t: &dyn Transport, during: &str) -> Result<Csts> {
    let csts = Csts(t.read32(offset::CSTS));
    if csts.0 == u32::MAX {
        return Err(Error::DeviceUnavailable {
            device: t.describe(),
            reason: "controller registers read as all ones: the device is gone or not responding"
                .into(),
        });
    }
    if csts.fatal() {
        return Err(Error::ControllerFatal {
            during: during.into(),
        });
    }
    Ok(csts)
}

/// As [`check_alive`], and fails with [`Error::ControllerNotReady`] if CSTS.RDY reads 0
/// while the driver has the controller enabled (it was reset behind the driver's back;
/// no command will complete).
pub(crate) fn check_running(t: &dyn Transport, during: &str) -> Result<Csts> {
    let csts = check_alive(t, during)?;
    if !csts.ready() {
        return Err(Error::ControllerNotReady {
            during: during.into(),
        });
    }
    Ok(csts)
}

/// Waits (bounded) until `done(CSTS)`. Registers reading all ones fail at once; so does
/// CSTS.CFS when `fatal_fails` (a controller being disabled may show CFS until RDY=0).
pub(super) fn wait_until(
    transport: &dyn Transport,
    timeout: Duration,
    what: &str,
    fatal_fails: bool,
    mut done: impl FnMut(Csts) -> bool,
) -> Result<Csts> {
    let start = Instant::now();
    loop {
        let csts = Csts(transport.read32(offset::CSTS));
        if csts.0 != u32::MAX && done(csts) {
            return Ok(csts);
        }
        match check_alive(transport, &format!("while waiting for {what}")) {
            Err(Error::ControllerFatal { .. }) if !fatal_fails => {}
            r => {
                r?;
            }
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                what: what.into(),
                after: timeout,
            });
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// How long to wait for CSTS.RDY and for a shutdown: CAP.TO, at least 500 ms.
pub(super) fn ready_timeout(cap: Cap) -> Duration {
    Duration::from_millis(cap.timeout_ms().max(500))
}

/// Disables the controller (CC.EN=0) and waits (bounded) for CSTS.RDY=0. Once it
/// returns Ok the controller has stopped processing: it no longer reads or writes any
/// queue or data memory, and every queue is deleted. CSTS.CFS does not fail the wait
/// (disabling is how a fatal status is cleared); a device that is gone does.
pub(super) fn disable(t: &dyn Transport, timeout: Duration) -> Result<()> {
    let cc = Cc(t.read32(offset::CC));
    if cc.0 == u32::MAX {
        check_alive(t, "while disabling the controller")?;
    }
    if cc.enabled() {
        // SAFETY: clearing CC.EN stops the controller; it points it at no memory.
        unsafe { t.write32(offset::CC, cc.with_enabled(false).0) };
    }
    wait_until(
        t,
        timeout,
        "the controller to reset (CSTS.RDY=0)",
        false,
        |s| !s.ready(),
    )?;
    Ok(())
}

/// Orderly shutdown: CC.SHN = normal and a bounded wait for SHST = complete (CSTS.CFS set
/// with it fails), then [`disable`]. A controller that is not enabled is left as it is.
pub(super) fn shutdown_now(t: &dyn Transport, timeout: Duration) -> Result<()> {
    let cc = Cc(t.read32(offset::CC));
    if cc.0 == u32::MAX {
        check_alive(t, "at shutdown")?;
    }
    if !cc.enabled() {
        return Ok(());
    }
    // SAFETY: CC.SHN asks the controller to shut down; it points it at no memory.
    unsafe { t.write32(offset::CC, cc.with_shn(ShutdownNotification::Normal).0) };
    let csts = wait_until(t, timeout, "shutdown to complete (CSTS.SHST)", true, |s| {
        s.shst() == SHST_COMPLETE
    })?;
    // SHST = complete with CFS set: the shutdown did not complete cleanly (e.g. the
    // data could not be made durable). wait_until returns as soon as SHST says
    // complete, so check CFS on that same value.
    if csts.fatal() {
        return Err(Error::ControllerFatal {
            during: "at shutdown (CSTS.SHST=complete with CSTS.CFS=1)".into(),
        });
    }
    // Then disable it (CC.EN=0, bounded wait for CSTS.RDY=0): a disabled controller
    // touches no memory, so what was mapped for it can be released at once (the
    // kernel module defers releases while CC.EN or CSTS.RDY is set and no strict
    // IOMMU protects the memory).
    disable(t, timeout)
}
