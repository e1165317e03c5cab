//! Host side of the TPC-H example: the project's own generator of lineitem's Q1/Q6
//! columns (TPC-H 3.0.1, clause 4.2.3), the CPU reference of Q1 and Q6 in exact integer
//! arithmetic, the raw column files other engines (DuckDB) load, and the table file the
//! GPU reads in place through the file backend (`--device file:PATH`, [`table_layout`]).
//!
//! Storage encoding (compact columnar, little-endian):
//!
//! | column | type | unit |
//! |---|---|---|
//! | l_shipdate | i32 | days since 1970-01-01 |
//! | l_quantity | u8 | units (1..=50) |
//! | l_extendedprice | i32 | cents |
//! | l_discount | u8 | hundredths (0..=10) |
//! | l_tax | u8 | hundredths (0..=8) |
//! | l_returnflag | u8 | ASCII `A`, `N`, `R` |
//! | l_linestatus | u8 | ASCII `F`, `O` |
//!
//! ```
//! let li = tpch_scan::generate(0.001, 1, &|_| {}).unwrap();
//! let q1 = tpch_scan::q1(&li, 90);
//! assert_eq!(q1.iter().map(|r| r.count).sum::<u64>() <= li.rows() as u64, true);
//! ```

use anyhow::{bail, Context, Result};
use example_support::SplitMix64;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stored columns: name and bytes per value, in the order Q1's kernel takes them.
pub const COLUMNS: [(&str, usize); 7] = [
    ("l_shipdate", 4),
    ("l_quantity", 1),
    ("l_extendedprice", 4),
    ("l_discount", 1),
    ("l_tax", 1),
    ("l_returnflag", 1),
    ("l_linestatus", 1),
];

/// Orders per generator block (each block has its own random stream).
const BLOCK_ORDERS: u64 = 1 << 16;

/// The lineitem columns that Q1 and Q6 read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lineitem {
    /// Days since 1970-01-01.
    pub shipdate: Vec<i32>,
    /// Units.
    pub quantity: Vec<u8>,
    /// Cents.
    pub extendedprice: Vec<i32>,
    /// Hundredths.
    pub discount: Vec<u8>,
    /// Hundredths.
    pub tax: Vec<u8>,
    /// ASCII.
    pub returnflag: Vec<u8>,
    /// ASCII.
    pub linestatus: Vec<u8>,
}

impl Lineitem {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.shipdate.len()
    }

    /// A column's raw little-endian bytes, by name (see [`COLUMNS`]).
    pub fn column_bytes(&self, name: &str) -> Option<&[u8]> {
        Some(match name {
            "l_shipdate" => bytemuck::cast_slice(&self.shipdate),
            "l_quantity" => &self.quantity,
            "l_extendedprice" => bytemuck::cast_slice(&self.extendedprice),
            "l_discount" => &self.discount,
            "l_tax" => &self.tax,
            "l_returnflag" => &self.returnflag,
            "l_linestatus" => &self.linestatus,
            _ => return None,
        })
    }

    fn append(&mut self, o: Lineitem) {
        self.shipdate.extend(o.shipdate);
        self.quantity.extend(o.quantity);
        self.extendedprice.extend(o.extendedprice);
        self.discount.extend(o.discount);
        self.tax.extend(o.tax);
        self.returnflag.extend(o.returnflag);
        self.linestatus.extend(o.linestatus);
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days(y: i32, m: u32, d: u32) -> i32 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i32 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of days since 1970-01-01.
pub fn civil(days: i32) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i32::from(m <= 2), m, d)
}

/// Uniform in [lo, hi].
fn range(r: &mut SplitMix64, lo: u64, hi: u64) -> u64 {
    lo + r.below32(hi - lo + 1)
}

/// P_RETAILPRICE of a part in cents (clause 4.2.3).
fn retail_cents(partkey: u64) -> u64 {
    90_000 + ((partkey / 10) % 20_001) + 100 * (partkey % 1000)
}

fn generate_block(sf: f64, seed: u64, block: u64, orders: u64) -> Lineitem {
    let mut r = SplitMix64::new(seed, block, 0x5851_F42D_4C95_7F2D);
    let parts = ((sf * 200_000.0).round() as u64).max(1);
    let start = days(1992, 1, 1) as u64;
    let last_order = (days(1998, 12, 31) - 151) as u64;
    let current = days(1995, 6, 17);
    let mut li = Lineitem::default();
    for _ in 0..orders {
        let orderdate = range(&mut r, start, last_order) as i32;
        for _ in 0..range(&mut r, 1, 7) {
            let partkey = range(&mut r, 1, parts);
            let qty = range(&mut r, 1, 50);
            let ship = orderdate + range(&mut r, 1, 121) as i32;
            let receipt = ship + range(&mut r, 1, 30) as i32;
            li.shipdate.push(ship);
            li.quantity.push(qty as u8);
            // qty x retail price: at most 50 x 209,998.99 cents, within i32.
            li.extendedprice.push((qty * retail_cents(partkey)) as i32);
            li.discount.push(range(&mut r, 0, 10) as u8);
            li.tax.push(range(&mut r, 0, 8) as u8);
            li.returnflag.push(if receipt <= current {
                if r.next_u64() & 1 == 0 {
                    b'R'
                } else {
                    b'A'
                }
            } else {
                b'N'
            });
            li.linestatus.push(if ship > current { b'O' } else { b'F' });
        }
    }
    li
}

/// lineitem's Q1/Q6 columns for scale factor `sf` (SF x 1.5 M orders of 1 to 7 lines).
/// The same rows for the same (sf, seed) on any number of threads: blocks of 2^16
/// orders, each with its own random stream. `progress` gets the orders done so far.
pub fn generate(sf: f64, seed: u64, progress: &(dyn Fn(u64) + Sync)) -> Result<Lineitem> {
    if !(sf > 0.0 && sf <= 10_000.0) {
        bail!("scale factor {sf} must be in (0, 10000]");
    }
    let orders = ((sf * 1_500_000.0).round() as u64).max(1);
    let done = AtomicU64::new(0);
    let blocks: Vec<Lineitem> = (0..orders.div_ceil(BLOCK_ORDERS))
        .into_par_iter()
        .map(|b| {
            let n = (orders - b * BLOCK_ORDERS).min(BLOCK_ORDERS);
            let li = generate_block(sf, seed, b, n);
            progress(done.fetch_add(n, Ordering::Relaxed) + n);
            li
        })
        .collect();
    let rows: usize = blocks.iter().map(Lineitem::rows).sum();
    let mut out = Lineitem {
        shipdate: Vec::with_capacity(rows),
        quantity: Vec::with_capacity(rows),
        extendedprice: Vec::with_capacity(rows),
        discount: Vec::with_capacity(rows),
        tax: Vec::with_capacity(rows),
        returnflag: Vec::with_capacity(rows),
        linestatus: Vec::with_capacity(rows),
    };
    for b in blocks {
        out.append(b);
    }
    Ok(out)
}

/// One group of Q1's answer. Sums are exact: prices in cents, discounted prices in
/// cents x hundredths (price x (100 - discount)), charges in cents x hundredths^2
/// (price x (100 - discount) x (100 + tax)), discounts in hundredths.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Q1Row {
    /// L_RETURNFLAG.
    pub returnflag: char,
    /// L_LINESTATUS.
    pub linestatus: char,
    /// sum(l_quantity).
    pub sum_qty: u64,
    /// sum(l_extendedprice), cents.
    pub sum_base_price: u64,
    /// sum(l_extendedprice * (1 - l_discount)), cents x 100.
    pub sum_disc_price: u128,
    /// sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)), cents x 10^4.
    pub sum_charge: u128,
    /// sum(l_discount), hundredths.
    pub sum_disc: u64,
    /// count(*).
    pub count: u64,
}

impl Q1Row {
    /// avg(l_quantity).
    pub fn avg_qty(&self) -> f64 {
        self.sum_qty as f64 / self.count as f64
    }
    /// avg(l_extendedprice), currency units.
    pub fn avg_price(&self) -> f64 {
        self.sum_base_price as f64 / 100.0 / self.count as f64
    }
    /// avg(l_discount).
    pub fn avg_disc(&self) -> f64 {
        self.sum_disc as f64 / 100.0 / self.count as f64
    }
    /// The row as JSON: sums as exact decimal strings, averages as numbers.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "l_returnflag": self.returnflag.to_string(), "l_linestatus": self.linestatus.to_string(),
            "sum_qty": self.sum_qty.to_string(),
            "sum_base_price": format_scaled(self.sum_base_price as u128, 2),
            "sum_disc_price": format_scaled(self.sum_disc_price, 4),
            "sum_charge": format_scaled(self.sum_charge, 6),
            "avg_qty": self.avg_qty(), "avg_price": self.avg_price(), "avg_disc": self.avg_disc(),
            "count_order": self.count,
        })
    }
}

/// `v / 10^decimals` as a decimal string: `format_scaled(12345, 2)` is `123.45`.
pub fn format_scaled(v: u128, decimals: u32) -> String {
    if decimals == 0 {
        return v.to_string();
    }
    let p = 10u128.pow(decimals);
    format!("{}.{:0width$}", v / p, v % p, width = decimals as usize)
}

fn group_of(rf: u8, ls: u8) -> Option<usize> {
    let r = match rf {
        b'A' => 0,
        b'N' => 1,
        b'R' => 2,
        _ => return None,
    };
    let l = match ls {
        b'F' => 0,
        b'O' => 1,
        _ => return None,
    };
    Some(r * 2 + l)
}

/// Q1 with `delta_days` (the spec's DELTA, 90 by default): rows with l_shipdate <=
/// 1998-12-01 - DELTA, grouped by (returnflag, linestatus), in group order.
pub fn q1(li: &Lineitem, delta_days: i32) -> Vec<Q1Row> {
    let cutoff = days(1998, 12, 1) - delta_days;
    type Acc = [[u128; 6]; 6];
    let add = |mut a: Acc, b: Acc| {
        for g in 0..6 {
            for f in 0..6 {
                a[g][f] += b[g][f];
            }
        }
        a
    };
    let sums = (0..li.rows())
        .into_par_iter()
        .fold(
            || [[0u128; 6]; 6],
            |mut a, i| {
                if li.shipdate[i] <= cutoff {
                    if let Some(g) = group_of(li.returnflag[i], li.linestatus[i]) {
                        let price = li.extendedprice[i] as u128;
                        let disc = li.discount[i] as u128;
                        let dp = price * (100 - disc);
                        let x = &mut a[g];
                        x[0] += li.quantity[i] as u128;
                        x[1] += price;
                        x[2] += dp;
                        x[3] += dp * (100 + li.tax[i] as u128);
                        x[4] += disc;
                        x[5] += 1;
                    }
                }
                a
            },
        )
        .reduce(|| [[0u128; 6]; 6], add);
    q1_rows(&sums)
}

/// Q1's groups in their order: (returnflag, linestatus).
pub const Q1_GROUPS: [(char, char); 6] = [
    ('A', 'F'),
    ('A', 'O'),
    ('N', 'F'),
    ('N', 'O'),
    ('R', 'F'),
    ('R', 'O'),
];

/// The rows of the non-empty groups from per-group sums in the order sum_qty,
/// sum_base_price, sum_disc_price, sum_charge, sum_disc, count (the GPU kernels' order).
pub fn q1_rows(sums: &[[u128; 6]; 6]) -> Vec<Q1Row> {
    (0..6)
        .filter(|&g| sums[g][5] > 0)
        .map(|g| Q1Row {
            returnflag: Q1_GROUPS[g].0,
            linestatus: Q1_GROUPS[g].1,
            sum_qty: sums[g][0] as u64,
            sum_base_price: sums[g][1] as u64,
            sum_disc_price: sums[g][2],
            sum_charge: sums[g][3],
            sum_disc: sums[g][4] as u64,
            count: sums[g][5] as u64,
        })
        .collect()
}

/// Q6: sum(l_extendedprice * l_discount) over l_shipdate in [date, date + 1 year),
/// l_discount in [disc - 0.01, disc + 0.01], l_quantity < qty; in cents x hundredths.
pub fn q6(li: &Lineitem, date: i32, disc_hundredths: u8, qty: u8) -> u128 {
    let (y, m, d) = civil(date);
    let end = days(y + 1, m, d);
    let (lo, hi) = (
        disc_hundredths.saturating_sub(1),
        disc_hundredths.saturating_add(1),
    );
    (0..li.rows())
        .into_par_iter()
        .map(|i| {
            let s = li.shipdate[i];
            let dc = li.discount[i];
            if s >= date && s < end && dc >= lo && dc <= hi && li.quantity[i] < qty {
                li.extendedprice[i] as u128 * dc as u128
            } else {
                0
            }
        })
        .sum()
}

/// Writes each column to `dir/<name>.bin` (raw little-endian) and `dir/meta.json`.
pub fn write_columns(li: &Lineitem, dir: &std::path::Path, sf: f64, seed: u64) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, width) in COLUMNS {
        let bytes = li.column_bytes(name).context("column")?;
        let p = dir.join(format!("{name}.bin"));
        std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))?;
        debug_assert_eq!(bytes.len(), li.rows() * width);
    }
    let meta = serde_json::json!({
        "rows": li.rows(), "sf": sf, "seed": seed,
        "columns": COLUMNS.iter().map(|(n, w)| serde_json::json!({"name": n, "bytes": w})).collect::<Vec<_>>(),
        "encoding": "l_shipdate i32 days since 1970-01-01; l_extendedprice i32 cents; l_quantity u8; \
                     l_discount and l_tax u8 hundredths; flags u8 ASCII",
    });
    std::fs::write(dir.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
    Ok(())
}

/// Alignment of every column in a table file ([`write_table`]): a multiple of the stripe
/// unit of any scan with up to 4 Mi rows per chunk (4-byte columns: 16 MiB slots), so that
/// each column is a span of its own (`bam::scan::Spans::in_place_at`).
pub const TABLE_ALIGN: u64 = 16 << 20;

/// One column of a table file: its name, byte offset and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableColumn {
    pub name: &'static str,
    pub offset: u64,
    pub bytes: u64,
}

/// Where the columns of a table of `rows` rows lie in its table file: [`COLUMNS`] in order,
/// each starting on a multiple of [`TABLE_ALIGN`], zeros between them. Returns the columns
/// and the file's length (the last column's end, rounded up to 4 KiB).
pub fn table_layout(rows: u64) -> (Vec<TableColumn>, u64) {
    let mut at = 0u64;
    let mut end = 0u64;
    let cols = COLUMNS
        .iter()
        .map(|&(name, w)| {
            let c = TableColumn {
                name,
                offset: at,
                bytes: rows * w as u64,
            };
            end = c.offset + c.bytes;
            at = end.div_ceil(TABLE_ALIGN) * TABLE_ALIGN;
            c
        })
        .collect();
    (cols, end.div_ceil(4096) * 4096)
}

/// Writes `li` as one table file at `path` ([`table_layout`]): what `tpch-scan --device
/// file:PATH` reads in place, each column a span of its own.
pub fn write_table(li: &Lineitem, path: &std::path::Path) -> Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let (cols, len) = table_layout(li.rows() as u64);
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    for c in &cols {
        let bytes = li.column_bytes(c.name).context("column")?;
        f.seek(SeekFrom::Start(c.offset))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {} to {}", c.name, path.display()))?;
    }
    f.set_len(len)?;
    f.sync_all().ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_file_puts_each_column_at_its_offset() {
        let li = generate(0.001, 3, &|_| {}).unwrap();
        let rows = li.rows() as u64;
        let (cols, len) = table_layout(rows);
        assert_eq!(cols.len(), COLUMNS.len());
        assert!(cols.iter().all(|c| c.offset % TABLE_ALIGN == 0));
        assert!(cols
            .windows(2)
            .all(|w| w[0].offset + w[0].bytes <= w[1].offset));
        let dir = std::env::temp_dir().join(format!("tpch-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("lineitem.tbl");
        write_table(&li, &p).unwrap();
        let file = std::fs::read(&p).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(file.len() as u64, len);
        for c in &cols {
            let at = c.offset as usize;
            assert_eq!(
                &file[at..at + c.bytes as usize],
                li.column_bytes(c.name).unwrap(),
                "{}",
                c.name
            );
        }
    }

    #[test]
    fn dates() {
        assert_eq!(days(1970, 1, 1), 0);
        assert_eq!(days(1992, 1, 1), 8035);
        assert_eq!(days(2000, 3, 1) - days(2000, 2, 28), 2); // leap year
        assert_eq!(days(1900, 3, 1) - days(1900, 2, 28), 1); // not a leap year
        for d in [0, 8035, 10_592, -1, 11_000, 20_000] {
            let (y, m, dd) = civil(d);
            assert_eq!(days(y, m, dd), d);
        }
        assert_eq!(civil(days(1998, 12, 31)), (1998, 12, 31));
    }

    #[test]
    fn generator_follows_the_spec() {
        let li = generate(0.01, 5, &|_| {}).unwrap();
        let n = li.rows();
        assert!((n as f64 - 60_000.0).abs() < 600.0, "{n} rows");
        let current = days(1995, 6, 17);
        for i in 0..n {
            assert!((1..=50).contains(&li.quantity[i]));
            assert!(li.discount[i] <= 10 && li.tax[i] <= 8);
            let p = li.extendedprice[i] as u64;
            assert!(p >= li.quantity[i] as u64 * 90_000 && p <= li.quantity[i] as u64 * 210_000);
            let s = li.shipdate[i];
            assert!(s > days(1992, 1, 1) && s <= days(1998, 12, 31) - 151 + 121);
            assert_eq!(li.linestatus[i], if s > current { b'O' } else { b'F' });
            assert!(matches!(li.returnflag[i], b'A' | b'R' | b'N'));
            if s > current {
                assert_eq!(li.returnflag[i], b'N');
            }
        }
        assert_eq!(li, generate(0.01, 5, &|_| {}).unwrap());
        assert!(generate(0.0, 5, &|_| {}).is_err());
    }

    fn table(rows: &[(i32, u8, i32, u8, u8, u8, u8)]) -> Lineitem {
        let mut li = Lineitem::default();
        for &(s, q, p, d, t, r, l) in rows {
            li.shipdate.push(s);
            li.quantity.push(q);
            li.extendedprice.push(p);
            li.discount.push(d);
            li.tax.push(t);
            li.returnflag.push(r);
            li.linestatus.push(l);
        }
        li
    }

    #[test]
    fn queries_on_a_hand_made_table() {
        let d = days(1994, 6, 1);
        let li = table(&[
            (d, 10, 100_000, 6, 2, b'A', b'F'),
            (d, 30, 200_000, 5, 0, b'A', b'F'),
            (d, 5, 50_000, 8, 8, b'N', b'O'),
            (days(1998, 11, 30), 1, 1_000, 0, 0, b'N', b'O'), // after the Q1 cutoff
            (days(1995, 1, 1), 1, 7_000, 6, 0, b'R', b'F'),   // outside Q6's year
        ]);
        let q = q1(&li, 90);
        assert_eq!(q.len(), 3);
        assert_eq!(
            (q[0].returnflag, q[0].linestatus, q[0].count, q[0].sum_qty),
            ('A', 'F', 2, 40)
        );
        assert_eq!(q[0].sum_base_price, 300_000);
        assert_eq!(q[0].sum_disc_price, 100_000 * 94 + 200_000 * 95);
        assert_eq!(q[0].sum_charge, 100_000 * 94 * 102 + 200_000 * 95 * 100);
        assert_eq!(q[0].to_json()["sum_base_price"], "3000.00");
        // Q6: rows 1 (disc 6, qty 10) only: row 2 has qty 30, row 3 disc 8.
        assert_eq!(q6(&li, days(1994, 1, 1), 6, 24), 100_000 * 6);
        assert_eq!(format_scaled(600_000, 4), "60.0000");
        assert_eq!(format_scaled(5, 2), "0.05");
    }

    #[test]
    fn queries_match_a_naive_loop() {
        let li = generate(0.02, 9, &|_| {}).unwrap();
        let cutoff = days(1998, 9, 2);
        let mut count = 0u64;
        let mut charge = 0u128;
        for i in 0..li.rows() {
            if li.shipdate[i] <= cutoff {
                count += 1;
                charge += li.extendedprice[i] as u128
                    * (100 - li.discount[i] as u128)
                    * (100 + li.tax[i] as u128);
            }
        }
        let q = q1(&li, 90);
        assert_eq!(q.iter().map(|r| r.count).sum::<u64>(), count);
        assert_eq!(q.iter().map(|r| r.sum_charge).sum::<u128>(), charge);
        let (lo, hi) = (days(1994, 1, 1), days(1995, 1, 1));
        let naive: u128 = (0..li.rows())
            .filter(|&i| {
                li.shipdate[i] >= lo
                    && li.shipdate[i] < hi
                    && (5..=7).contains(&li.discount[i])
                    && li.quantity[i] < 24
            })
            .map(|i| li.extendedprice[i] as u128 * li.discount[i] as u128)
            .sum();
        assert_eq!(q6(&li, lo, 6, 24), naive);
    }

    /// Writes SF 0.01 columns and their answers to $TPCH_SAMPLE_DIR (for trying
    /// duckdb_peer.py: `TPCH_SAMPLE_DIR=/tmp/li cargo test -p tpch-scan -- --ignored`).
    #[test]
    #[ignore]
    fn write_sample_for_duckdb() {
        let Some(dir) = std::env::var_os("TPCH_SAMPLE_DIR") else {
            return;
        };
        let dir = std::path::PathBuf::from(dir);
        let li = generate(0.01, 1, &|_| {}).unwrap();
        write_columns(&li, &dir, 0.01, 1).unwrap();
        let answers = serde_json::json!({
            "q1": q1(&li, 90).iter().map(Q1Row::to_json).collect::<Vec<_>>(),
            "q6": format_scaled(q6(&li, days(1994, 1, 1), 6, 24), 4),
        });
        std::fs::write(dir.join("answers.json"), answers.to_string()).unwrap();
    }
}
