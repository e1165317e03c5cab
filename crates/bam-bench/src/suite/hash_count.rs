//! hash-count: a group-by count of u32 keys into an open-addressing hash table (linear
//! probing, u64 slots of key << 32 | count) that lives in storage too (storage arrays keys
//! and table): a free slot is claimed by compare-and-swap, a slot with the key gets an
//! atomic add, so where a thread writes depends on what it read. Checked after the runs
//! against what the keys counted since the table was placed predict: the counts' total,
//! the occupied slots (the distinct keys) and a fingerprint of every (key, count) pair.

use super::bench::{Bench, Workload};
use super::data::{generated_below, Elem, Master};
use super::exec::{Ctx, Exec, KArg, Run, BLOCK};
use super::options::{Form, Kernel, Variant};
use bam::cuda::DeviceBuffer;
use bam::Result;
use std::collections::HashMap;

/// What counting keys[0..end) into an empty table leaves there: the sum of mix64(key)
/// over those keys (wrapping) and the distinct keys among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Expect {
    print: u64,
    distinct: u64,
}

pub(super) struct HashCount {
    workload: Workload,
    n: u64,
    keys: u64,
    slots: u64,
    /// Expectations by the prefix counted (a full run's is computed once).
    expect: HashMap<u64, Expect>,
    /// Since the table was placed: keys counted, their fingerprint (wrapping sum), the
    /// longest prefix counted (its distinct keys are the occupied slots).
    counted: u64,
    print: u64,
    longest: u64,
    seen: DeviceBuffer,
    out: DeviceBuffer,
}

impl HashCount {
    pub(super) fn new(c: &Ctx, n: u64, keys: u64, slots: u64) -> Result<Self> {
        let k = generated_below(c, n, keys, 1, c.o.seed ^ 0x4a54)?;
        Ok(HashCount {
            workload: Workload {
                kernel: Kernel::HashCount,
                masters: vec![
                    Master {
                        name: "keys",
                        elem: Elem::U32,
                        len: n,
                        buf: k,
                    },
                    Master {
                        name: "table",
                        elem: Elem::U64,
                        len: slots,
                        buf: DeviceBuffer::zeroed(c.gpu, (8 * slots) as usize)?,
                    },
                ],
                full_work: n,
            },
            n,
            keys,
            slots,
            expect: HashMap::new(),
            counted: 0,
            print: 0,
            longest: 0,
            seen: DeviceBuffer::zeroed(c.gpu, (keys / 32 + 1) as usize * 4 + 4)?,
            out: DeviceBuffer::zeroed(c.gpu, 24)?,
        })
    }

    /// What counting keys[0..end) predicts, from the keys' source copy (computed on the
    /// GPU by suite_hcount_expect, once per prefix).
    fn expect(&mut self, x: &Exec, end: u64) -> Result<Expect> {
        if let Some(&e) = self.expect.get(&end) {
            return Ok(e);
        }
        self.seen.zero()?;
        self.out.zero()?;
        let name = "suite_hcount_expect";
        let a = [
            KArg::U64(self.workload.masters[0].buf.ptr()),
            KArg::U64(end),
            KArg::U64(self.seen.ptr()),
            KArg::U64(self.out.ptr()),
        ];
        // SAFETY: suite_hcount_expect(const uint32_t*, uint64_t, uint32_t*, unsigned long
        // long*) over the first `end` keys (each at most `keys`) of the source copy, a
        // bitmap of keys + 1 bits and two counters; all outlive the wait.
        unsafe { x.launch(name, x.grid(name)?, &a)? };
        x.wait()?;
        let mut r = [0u64; 2];
        self.out.read(0, &mut r)?;
        let e = Expect {
            print: r[0],
            distinct: r[1],
        };
        self.expect.insert(end, e);
        Ok(e)
    }
}

impl Bench for HashCount {
    fn workload(&self) -> &Workload {
        &self.workload
    }

    fn placed(&mut self) {
        self.counted = 0;
        self.print = 0;
        self.longest = 0;
    }

    fn run(&mut self, x: &Exec, st: &[KArg]) -> Result<Run> {
        let mask = self.slots - 1;
        // SAFETY: suite_hcount_<form>(K, T, uint64_t, uint64_t, uint64_t) with K the
        // form's u32 storage array of n keys and T its u64 table of mask + 1 slots (a
        // power of two); both outlive the run.
        let run = unsafe {
            x.timed_launches(Kernel::HashCount, self.n, BLOCK as u64, |lo, hi| {
                [st[0], st[1], KArg::U64(mask), KArg::U64(lo), KArg::U64(hi)]
            })?
        };
        let e = self.expect(x, run.work)?;
        self.counted = self.counted.wrapping_add(run.work);
        self.print = self.print.wrapping_add(e.print);
        self.longest = self.longest.max(run.work);
        Ok(run)
    }

    fn verify(&mut self, x: &Exec, st: &[KArg], _v: Variant) -> Result<(u64, Vec<String>)> {
        let distinct = self.expect(x, self.longest)?.distinct;
        let name = x.name("hcount_sum");
        self.out.zero()?;
        let a = [st[1], KArg::U64(self.slots), KArg::U64(self.out.ptr())];
        // SAFETY: suite_hcount_sum_<form>(T, uint64_t, unsigned long long*) with T the
        // form's u64 table of `slots` slots; `out` holds three counters; both outlive the
        // wait below.
        unsafe { x.launch(&name, x.grid(&name)?, &a)? };
        x.wait()?;
        if let Some(c) = x.cache {
            c.check_errors()?;
        }
        let mut r = [0u64; 3];
        self.out.read(0, &mut r)?;
        let checks = [
            ("counts in all", r[0], self.counted),
            ("occupied slots", r[1], distinct),
            ("fingerprint", r[2], self.print),
        ];
        let wrong = checks.iter().filter(|(_, got, want)| got != want).count() as u64;
        let through = if x.form == Form::Plain {
            ""
        } else {
            " (read back through the cache)"
        };
        let mut notes = vec![format!(
            "checked: the table{through} holds {} counts in all for the {} keys counted, {} \
             occupied slots of {} for {distinct} distinct keys (of {} values), and the \
             fingerprint of its (key, count) pairs",
            r[0], self.counted, r[1], self.slots, self.keys
        )];
        for (what, got, want) in checks.iter().filter(|(_, g, w)| g != w) {
            notes.push(format!("{what}: {got}, expected {want}"));
        }
        Ok((wrong, notes))
    }
}
