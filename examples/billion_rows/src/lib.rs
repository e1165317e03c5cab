//! Host side of the One Billion Row Challenge example: the measurements file's generator
//! (synthetic stations or a `name;mean` list), the CPU reference that aggregates a file
//! and validates it against the challenge's rules, and the challenge's output format.
//!
//! The rules: one row per line, `STATION;VALUE\n`; a station name is 1 to 100 bytes of
//! UTF-8 without `;` or a newline, at most 10,000 distinct names; a value has exactly one
//! fractional digit and lies in [-99.9, 99.9]. The output is `{name=min/mean/max, ...}`
//! sorted by name, one fractional digit each, the mean rounded half up.
//!
//! ```
//! let st = billion_rows::synthetic_stations(10, 7).unwrap();
//! let file = billion_rows::generate(&st, 1000, 7, &|_| {});
//! let agg = billion_rows::aggregate(&file).unwrap();
//! assert_eq!(agg.values().map(|a| a.count).sum::<u64>(), 1000);
//! println!("{}", billion_rows::format_results(&agg));
//! ```

use anyhow::{bail, Context, Result};
use example_support::SplitMix64;
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// Most distinct stations the rules allow.
pub const MAX_STATIONS: usize = 10_000;
/// Longest station name in bytes.
pub const MAX_NAME: usize = 100;
/// Rows generated per block (each block has its own random stream).
const BLOCK_ROWS: u64 = 1 << 20;

/// A weather station and its mean temperature (degrees).
#[derive(Clone, Debug, PartialEq)]
pub struct Station {
    /// Name (1 to 100 bytes of UTF-8, no `;` or newline).
    pub name: String,
    /// Mean temperature the generator draws around.
    pub mean: f64,
}

/// The generator's random numbers: stream `stream` of `seed` (its first number skipped).
fn rng(seed: u64, stream: u64) -> SplitMix64 {
    let mut r = SplitMix64::new(seed, stream, 0);
    r.next_u64();
    r
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME {
        bail!(
            "station name of {} bytes (1 to {MAX_NAME} allowed)",
            name.len()
        );
    }
    if name.iter().any(|&b| b == b';' || b == b'\n') {
        bail!("station name contains ';' or a newline");
    }
    std::str::from_utf8(name).context("station name is not UTF-8")?;
    Ok(())
}

/// `n` synthetic stations (deterministic from `seed`): unique names of 3 to 40 bytes,
/// a few longer ones up to 100 bytes, some with non-ASCII letters; means in [-20, 35].
pub fn synthetic_stations(n: usize, seed: u64) -> Result<Vec<Station>> {
    if n == 0 || n > MAX_STATIONS {
        bail!("{n} stations: the rules allow 1 to {MAX_STATIONS}");
    }
    const SYL: [&str; 24] = [
        "ka", "lo", "mar", "ben", "sa", "tor", "vi", "dun", "el", "gra", "no", "ri", "shé", "pol",
        "ün", "ha", "qu", "zø", "fen", "ña", "ross", "ße", "al", "Åm",
    ];
    let mut rng = rng(seed, u64::MAX);
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        // Mostly one word, a quarter two, every 97th up to twelve (long names): about 8
        // bytes on average, near the challenge's own station list (13.8 bytes a row).
        let words = if out.len() % 97 == 0 {
            1 + rng.below32(12) as usize
        } else {
            1 + usize::from(rng.below32(4) == 0)
        };
        let mut name = String::new();
        for w in 0..words {
            if w > 0 {
                name.push(' ');
            }
            let syl = 2 + rng.below32(2) as usize;
            let mut word = String::new();
            for _ in 0..syl {
                word.push_str(SYL[rng.below32(SYL.len() as u64) as usize]);
            }
            let mut c = word.chars();
            if let Some(f) = c.next() {
                name.extend(f.to_uppercase());
                name.push_str(c.as_str());
            }
        }
        while name.len() > MAX_NAME {
            name.pop();
        }
        let name = name.trim_end().to_string();
        if name.len() >= 2 && check_name(name.as_bytes()).is_ok() && seen.insert(name.clone()) {
            let mean = -20.0 + 55.0 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            out.push(Station { name, mean });
        }
    }
    Ok(out)
}

/// Reads stations from `name;mean` lines (lines starting with `#` are comments).
pub fn read_stations(path: &std::path::Path) -> Result<Vec<Station>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, mean) = line
            .rsplit_once(';')
            .with_context(|| format!("{}:{}: expected `name;mean`", path.display(), i + 1))?;
        check_name(name.as_bytes()).with_context(|| format!("{}:{}", path.display(), i + 1))?;
        let mean: f64 = mean.trim().parse().with_context(|| {
            format!(
                "{}:{}: mean `{mean}` is not a number",
                path.display(),
                i + 1
            )
        })?;
        if !(-99.9..=99.9).contains(&mean) {
            bail!(
                "{}:{}: mean {mean} outside [-99.9, 99.9]",
                path.display(),
                i + 1
            );
        }
        if !seen.insert(name.to_string()) {
            bail!("{}:{}: station {name} listed twice", path.display(), i + 1);
        }
        out.push(Station {
            name: name.to_string(),
            mean,
        });
    }
    if out.is_empty() || out.len() > MAX_STATIONS {
        bail!(
            "{}: {} stations (1 to {MAX_STATIONS} allowed)",
            path.display(),
            out.len()
        );
    }
    Ok(out)
}

/// Appends tenths `t` as the challenge writes values: `-12.3`, `0.7`.
fn push_tenths(out: &mut Vec<u8>, t: i32) {
    if t < 0 {
        out.push(b'-');
    }
    let a = t.unsigned_abs();
    if a >= 100 {
        out.push(b'0' + (a / 100) as u8);
    }
    out.push(b'0' + (a / 10 % 10) as u8);
    out.push(b'.');
    out.push(b'0' + (a % 10) as u8);
}

/// One block of rows.
fn generate_block(stations: &[Station], rows: u64, seed: u64, block: u64) -> Vec<u8> {
    let mut rng = rng(seed, block);
    let mut out = Vec::with_capacity(rows as usize * 16);
    let n = stations.len() as u64;
    for _ in 0..rows {
        let s = &stations[rng.below32(n) as usize];
        // Normal(0, 1), approximately: the sum of four uniform 16-bit numbers, centred
        // and scaled (Irwin-Hall), cheap and symmetric.
        let r = rng.next_u64();
        let sum: u64 = (0..4).map(|k| (r >> (16 * k)) & 0xffff).sum();
        let z = (sum as f64 - 131_070.0) / 37_837.0;
        let t = ((s.mean + 10.0 * z) * 10.0).round().clamp(-999.0, 999.0) as i32;
        out.extend_from_slice(s.name.as_bytes());
        out.push(b';');
        push_tenths(&mut out, t);
        out.push(b'\n');
    }
    out
}

/// The measurements file: `rows` rows, each a station chosen uniformly at random and a
/// value drawn around its mean (standard deviation 10), rounded to a tenth, clamped to
/// [-99.9, 99.9]. The same bytes for the same (stations, rows, seed) on any number of
/// threads: blocks of 2^20 rows, each with its own random stream. `progress` gets the
/// rows done so far (from any thread).
pub fn generate(
    stations: &[Station],
    rows: u64,
    seed: u64,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<u8> {
    if stations.is_empty() {
        return Vec::new();
    }
    let done = AtomicU64::new(0);
    let blocks: Vec<Vec<u8>> = (0..rows.div_ceil(BLOCK_ROWS))
        .into_par_iter()
        .map(|b| {
            let n = (rows - b * BLOCK_ROWS).min(BLOCK_ROWS);
            let v = generate_block(stations, n, seed, b);
            progress(done.fetch_add(n, Ordering::Relaxed) + n);
            v
        })
        .collect();
    // Concatenate in parallel: each block into its own part of the output.
    let total: usize = blocks.iter().map(Vec::len).sum();
    let mut out = vec![0u8; total];
    let mut parts = Vec::with_capacity(blocks.len());
    let mut rest = out.as_mut_slice();
    for b in &blocks {
        let (head, tail) = rest.split_at_mut(b.len());
        parts.push(head);
        rest = tail;
    }
    parts
        .into_par_iter()
        .zip(blocks.par_iter())
        .for_each(|(dst, src)| dst.copy_from_slice(src));
    out
}

/// Aggregates of one station, in tenths of a degree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Agg {
    /// Smallest value.
    pub min: i32,
    /// Largest value.
    pub max: i32,
    /// Sum of the values.
    pub sum: i64,
    /// Rows.
    pub count: u64,
}

impl Agg {
    /// One value.
    pub fn single(v: i32) -> Agg {
        Agg {
            min: v,
            max: v,
            sum: v as i64,
            count: 1,
        }
    }
    /// Adds `other`'s rows.
    pub fn merge(&mut self, other: &Agg) {
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.count += other.count;
    }
    /// The mean in tenths, rounded half up (towards +infinity), in exact integers:
    /// floor((2 sum + count) / (2 count)).
    pub fn mean_tenths(&self) -> i64 {
        let c = self.count.max(1) as i128;
        (2 * self.sum as i128 + c).div_euclid(2 * c) as i64
    }
}

/// Parses one row's value (`-?d?d.d`) into tenths.
fn parse_value(v: &[u8]) -> Option<i32> {
    let (neg, d) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        _ => (false, v),
    };
    let ok = |b: u8| b.is_ascii_digit();
    let t = match d {
        [a, b'.', f] if ok(*a) && ok(*f) => (a - b'0') as i32 * 10 + (f - b'0') as i32,
        [a, b, b'.', f] if ok(*a) && ok(*b) && ok(*f) && *a != b'0' => {
            (a - b'0') as i32 * 100 + (b - b'0') as i32 * 10 + (f - b'0') as i32
        }
        _ => return None,
    };
    Some(if neg { -t } else { t })
}

/// Aggregates `data[lo..hi)` (whole rows); errors name the byte offset of the first bad row.
fn aggregate_part(data: &[u8], lo: usize, hi: usize) -> Result<HashMap<&[u8], Agg>> {
    let mut m: HashMap<&[u8], Agg> = HashMap::new();
    let mut p = lo;
    while p < hi {
        let nl = data[p..hi]
            .iter()
            .position(|&b| b == b'\n')
            .with_context(|| format!("byte {p}: the last row has no newline"))?;
        let row = &data[p..p + nl];
        let semi = row
            .iter()
            .rposition(|&b| b == b';')
            .with_context(|| format!("byte {p}: row without ';'"))?;
        let (name, value) = (&row[..semi], &row[semi + 1..]);
        if name.is_empty() || name.len() > MAX_NAME || name.contains(&b';') {
            bail!(
                "byte {p}: station name of {} bytes (1 to {MAX_NAME}, no ';')",
                name.len()
            );
        }
        let v = parse_value(value).with_context(|| {
            format!(
                "byte {p}: value `{}` is not -99.9..99.9 with one decimal",
                String::from_utf8_lossy(value)
            )
        })?;
        match m.get_mut(name) {
            Some(a) => a.merge(&Agg::single(v)),
            None => {
                m.insert(name, Agg::single(v));
            }
        }
        p += nl + 1;
    }
    Ok(m)
}

/// The CPU reference: parses and aggregates the whole file on every core (pieces cut at
/// newlines), validating each row and the station names (UTF-8, at most 10,000).
pub fn aggregate(data: &[u8]) -> Result<BTreeMap<Vec<u8>, Agg>> {
    let pieces = (rayon::current_num_threads() * 8).max(1);
    let mut cuts = vec![0usize];
    for k in 1..pieces {
        let mut c = (data.len() * k / pieces).max(*cuts.last().unwrap_or(&0));
        while c < data.len() && c > 0 && data[c - 1] != b'\n' {
            c += 1;
        }
        cuts.push(c);
    }
    cuts.push(data.len());
    let parts: Vec<HashMap<&[u8], Agg>> = cuts
        .windows(2)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|w| aggregate_part(data, w[0], w[1]))
        .collect::<Result<_>>()?;
    let mut out: BTreeMap<Vec<u8>, Agg> = BTreeMap::new();
    for part in parts {
        for (name, a) in part {
            match out.get_mut(name) {
                Some(x) => x.merge(&a),
                None => {
                    out.insert(name.to_vec(), a);
                }
            }
        }
    }
    for name in out.keys() {
        check_name(name).with_context(|| format!("station {:?}", String::from_utf8_lossy(name)))?;
    }
    if out.len() > MAX_STATIONS {
        bail!(
            "{} distinct stations: the rules allow {MAX_STATIONS}",
            out.len()
        );
    }
    Ok(out)
}

/// Tenths as the challenge prints them: `-12.3`, `0.0` (never `-0.0`), `7.5`.
pub fn format_tenths(t: i64) -> String {
    let sign = if t < 0 { "-" } else { "" };
    format!("{sign}{}.{}", t.unsigned_abs() / 10, t.unsigned_abs() % 10)
}

/// The challenge's output line: `{name=min/mean/max, ...}` sorted by name bytes.
pub fn format_results(results: &BTreeMap<Vec<u8>, Agg>) -> String {
    let items: Vec<String> = results
        .iter()
        .map(|(n, a)| {
            format!(
                "{}={}/{}/{}",
                String::from_utf8_lossy(n),
                format_tenths(a.min as i64),
                format_tenths(a.mean_tenths()),
                format_tenths(a.max as i64)
            )
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_rows_follow_the_rules_and_are_deterministic() {
        let st = synthetic_stations(413, 3).unwrap();
        assert_eq!(st.len(), 413);
        assert!(
            st.iter().any(|s| !s.name.is_ascii()),
            "some names are not ASCII"
        );
        assert!(st.iter().all(|s| check_name(s.name.as_bytes()).is_ok()));
        let a = generate(&st, 100_000, 9, &|_| {});
        assert_eq!(a, generate(&st, 100_000, 9, &|_| {}));
        assert_ne!(a, generate(&st, 100_000, 10, &|_| {}));
        let agg = aggregate(&a).unwrap();
        assert_eq!(agg.values().map(|x| x.count).sum::<u64>(), 100_000);
        // About the challenge's own file: 13.8 bytes a row.
        let per_row = a.len() as f64 / 100_000.0;
        assert!((12.0..16.0).contains(&per_row), "{per_row} bytes a row");
        assert!(agg.values().all(|x| x.min >= -999 && x.max <= 999));
        // Rows across block boundaries are whole (generate's blocks are 2^20 rows).
        let big = generate(&st[..3], BLOCK_ROWS + 5, 1, &|_| {});
        assert_eq!(
            aggregate(&big)
                .unwrap()
                .values()
                .map(|x| x.count)
                .sum::<u64>(),
            BLOCK_ROWS + 5
        );
    }

    #[test]
    fn rounding_and_format() {
        let m = |sum, count| {
            Agg {
                min: 0,
                max: 0,
                sum,
                count,
            }
            .mean_tenths()
        };
        assert_eq!(
            (m(-1, 2), m(-3, 2), m(3, 2), m(5, 10), m(-5, 10)),
            (0, -1, 2, 1, 0)
        );
        assert_eq!(format_tenths(0), "0.0");
        assert_eq!(format_tenths(-123), "-12.3");
        assert_eq!(format_tenths(7), "0.7");
        let f = b"B;1.0\nA;-2.5\nA;3.0\nB;-0.1\n";
        assert_eq!(
            format_results(&aggregate(f).unwrap()),
            "{A=-2.5/0.3/3.0, B=-0.1/0.5/1.0}"
        );
    }

    #[test]
    fn malformed_rows_are_errors() {
        for bad in [
            &b"A1.0\n"[..],
            b"A;1.25\n",
            b"A;100.0\n",
            b";1.0\n",
            b"A;1.0",
            b"A;01.0\n",
            b"A;+1.0\n",
        ] {
            assert!(
                aggregate(bad).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!("{};1.0\n", "x".repeat(101));
        assert!(aggregate(long.as_bytes()).is_err());
        let ok = format!("{};1.0\n", "x".repeat(100));
        assert!(aggregate(ok.as_bytes()).is_ok());
    }

    #[test]
    fn station_files() {
        let p = std::env::temp_dir().join(format!("brc-stations-{}.txt", std::process::id()));
        std::fs::write(&p, "# comment\nAbc;12.5\nDé f;-3\n").unwrap();
        let s = read_stations(&p).unwrap();
        assert_eq!(
            s,
            vec![
                Station {
                    name: "Abc".into(),
                    mean: 12.5
                },
                Station {
                    name: "Dé f".into(),
                    mean: -3.0
                }
            ]
        );
        std::fs::write(&p, "Abc;12.5\nAbc;1\n").unwrap();
        assert!(read_stations(&p).is_err());
        std::fs::remove_file(&p).ok();
    }
}
