//! SVG plots of benchmark reports (`bam bench`, `bench cache` and `bench kernels`, read
//! as the typed [`Report`] of `report.rs`), drawn with `plotters`' SVG backend: text is
//! written as SVG `<text>` and laid out by the viewer, so no font is needed here.
//!
//! * `bam bench`: IOPS (top) and latency (bottom: mean and p99) against the swept
//!   variable (threads, queues per SSD or SSDs), one line per combination of the others.
//! * `bam bench cache`: cache and raw GB/s for each study and pattern, one pair of bars
//!   per thread count (log scale: hits and misses differ by orders of magnitude).
//! * `bam bench kernels`: each variant's rate relative to the plain kernel in GPU memory
//!   (hbm = 1), one group of bars per kernel, one bar per variant (log scale: zero-copy
//!   and UVM are orders of magnitude below the hits).

use plotters::coord::combinators::LogCoord;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use std::path::Path;

mod report;

pub use report::Report;
use report::{CacheReport, KernelsReport, Origin, RawReport};

const WIDTH: u32 = 900;
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

impl Report {
    /// The command that writes this kind of report, after `bam `.
    pub fn kind(&self) -> &'static str {
        match self {
            Report::Raw(_) => "bench",
            Report::Cache(_) => "bench cache",
            Report::Kernels(_) => "bench kernels",
        }
    }

    /// Draws the report as an SVG file at `out`.
    pub fn draw(&self, out: &Path) -> Result<(), String> {
        match self {
            Report::Raw(r) => raw(r, out),
            Report::Cache(r) => cache(r, out),
            Report::Kernels(r) => kernels(r, out),
        }
    }
}

fn title(origin: &Origin, what: &str) -> String {
    let gpu = origin
        .gpu
        .as_deref()
        .or(origin.device.as_deref())
        .unwrap_or("");
    // "NVIDIA H100 80GB HBM3 (132 SMs)": the name is enough in a title.
    let gpu = gpu.split(" (").next().unwrap_or(gpu);
    let commit = origin.commit.as_deref().unwrap_or("");
    let mut t = what.to_string();
    if !gpu.is_empty() {
        t += &format!(" — {gpu}");
    }
    if !commit.is_empty() {
        t += &format!(" @ {}", &commit[..commit.len().min(7)]);
    }
    t
}

fn draw_err<E: std::fmt::Debug>(e: E) -> String {
    format!("cannot draw the plot: {e:?}")
}

/// The drawing area of a plot: an SVG file at `out`, WIDTH x `height`, white, `title` on
/// top.
fn canvas<'a>(
    out: &'a Path,
    height: u32,
    title: &str,
) -> Result<DrawingArea<SVGBackend<'a>, Shift>, String> {
    let root = SVGBackend::new(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    root.titled(title, ("sans-serif", 16)).map_err(draw_err)
}

/// A chart of bars grouped by category: one group per name along x (centred at 0, 1, ...),
/// a log y axis from `ymin` to `ymax` with its description and tick labels; the mesh is
/// drawn, the bars are the caller's.
type BarChart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;

/// Draws a [`BarChart`]'s axes on `area`.
fn bar_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    names: &[String],
    (ymin, ymax): (f64, f64),
    y_desc: &str,
    y_label: fn(f64) -> String,
) -> Result<BarChart<'a, 'b>, String> {
    let n = names.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5, (ymin..ymax).log_scale())
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len() + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .y_label_formatter(&|y| y_label(*y))
        .draw()
        .map_err(draw_err)?;
    Ok(chart)
}

/// Draws the legend of `chart`'s labelled series at `at`.
fn legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    at: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(draw_err)
}

/// A sweep axis: its name, its unit in series labels, and its value in a job.
type Axis = (&'static str, &'static str, fn(&Job) -> f64);

/// A line: label, color, drawn lighter (p99), points.
type Line = (String, RGBColor, bool, Vec<(f64, f64)>);

/// One job of a raw report: its sweep coordinates and results.
struct Job {
    threads: f64,
    queues: f64,
    ssds: f64,
    iops: f64,
    mean_us: f64,
    p99_us: f64,
}

/// The x axis of a raw report's panels: the swept variable.
struct XAxis {
    name: &'static str,
    log: bool,
    min: f64,
    max: f64,
}

fn raw(r: &RawReport, out: &Path) -> Result<(), String> {
    let jobs: Vec<Job> = r
        .jobs
        .iter()
        .map(|j| Job {
            threads: j.job.threads,
            queues: j.job.queues,
            ssds: j.job.ssds,
            iops: j.iops,
            mean_us: j.latency.mean_us,
            p99_us: j.latency.p99_us,
        })
        .collect();
    if jobs.is_empty() {
        return Err("the report has no jobs".into());
    }
    let first = &jobs[0];
    let varies = |g: fn(&Job) -> f64| jobs.iter().any(|j| g(j) != g(first));
    // The x axis: the first swept variable of threads, queues, SSDs (threads if none is).
    let axes: [Axis; 3] = [
        ("GPU threads", "threads", |j| j.threads),
        ("I/O queues per SSD", "queues/SSD", |j| j.queues),
        ("SSDs", "SSDs", |j| j.ssds),
    ];
    let x_axis = axes.iter().position(|(_, _, g)| varies(*g)).unwrap_or(0);
    let (x_name, _, x_of) = axes[x_axis];
    // One line per combination of the other two.
    let mut series: Vec<(String, Vec<&Job>)> = Vec::new();
    for j in &jobs {
        let label = axes
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != x_axis)
            .map(|(_, (_, unit, g))| format!("{} {unit}", g(j)))
            .collect::<Vec<_>>()
            .join(", ");
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(j),
            None => series.push((label, vec![j])),
        }
    }
    for (_, s) in &mut series {
        s.sort_by(|a, b| x_of(a).total_cmp(&x_of(b)));
    }
    let xs: Vec<f64> = jobs.iter().map(x_of).collect();
    let (xmin, xmax) = bounds(&xs);
    let x = XAxis {
        name: x_name,
        log: xmin > 0.0 && xmax / xmin >= 16.0,
        min: xmin,
        max: xmax,
    };
    let spec = &r.jobs[0].job;
    let what = format!(
        "bam bench {}, {} B, {}",
        spec.rw.as_deref().unwrap_or("?"),
        // As the JSON value prints: a missing block size (a multi-GPU report) is null.
        spec.bs
            .map_or_else(|| "null".to_string(), |b| b.to_string()),
        r.origin.device.as_deref().unwrap_or("?")
    );

    let root = canvas(out, 760, &title(&r.origin, &what))?;
    let (top, bottom) = root.split_vertically(360);

    let iops: Vec<f64> = jobs.iter().map(|j| j.iops / 1e6).collect();
    let (_, imax) = bounds(&iops);
    let lat: Vec<f64> = jobs.iter().flat_map(|j| [j.mean_us, j.p99_us]).collect();
    let (lmin, lmax) = bounds(&lat);

    let many = series.len() > 1;
    let iops_lines: Vec<_> = series
        .iter()
        .enumerate()
        .map(|(i, (label, s))| {
            let pts = s.iter().map(|j| (x_of(j), j.iops / 1e6)).collect();
            let label = if many {
                label.clone()
            } else {
                format!("IOPS ({label})")
            };
            (label, PALETTE[i % PALETTE.len()], false, pts)
        })
        .collect();
    panel(
        &top,
        &x,
        "million IOPS",
        0.0..imax * 1.1,
        false,
        &iops_lines,
    )?;

    let mut lat_lines = Vec::new();
    for (i, (label, s)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let prefix = if many {
            format!("{label}: ")
        } else {
            String::new()
        };
        lat_lines.push((
            format!("{prefix}mean"),
            color,
            false,
            s.iter().map(|j| (x_of(j), j.mean_us)).collect(),
        ));
        lat_lines.push((
            format!("{prefix}p99"),
            color,
            true,
            s.iter().map(|j| (x_of(j), j.p99_us)).collect(),
        ));
    }
    let log_lat = lmin > 0.0 && lmax / lmin >= 20.0;
    let lat_range = if log_lat {
        lmin / 1.3..lmax * 1.3
    } else {
        0.0..lmax * 1.1
    };
    panel(
        &bottom,
        &x,
        "latency per I/O, us",
        lat_range,
        log_lat,
        &lat_lines,
    )?;
    root.present().map_err(draw_err)
}

/// Draws one panel of a raw report on `area`: axes (log or linear) and `lines`.
fn panel(
    area: &DrawingArea<SVGBackend, Shift>,
    x: &XAxis,
    y_desc: &str,
    y_range: std::ops::Range<f64>,
    log_y: bool,
    lines: &[Line],
) -> Result<(), String> {
    let mut b = ChartBuilder::on(area);
    b.margin(12).x_label_area_size(40).y_label_area_size(70);
    let x_range = if x.log {
        x.min / 1.3..x.max * 1.3
    } else {
        pad(x.min, x.max)
    };
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x.name)
                .y_desc(y_desc)
                .x_label_formatter(&|x| short(*x))
                .y_labels(8)
                .y_label_formatter(&|y| short(*y))
                .draw()
                .map_err(draw_err)?;
            for (label, color, dashed, pts) in lines {
                let style = if *dashed {
                    color.mix(0.55).stroke_width(2)
                } else {
                    color.stroke_width(2)
                };
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), style))
                    .map_err(draw_err)?
                    .label(label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, style.color.filled())))
                    .map_err(draw_err)?;
            }
            legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        }};
    }
    match (x.log, log_y) {
        (true, true) => finish!(b
            .build_cartesian_2d(x_range.log_scale(), y_range.log_scale())
            .map_err(draw_err)?),
        (true, false) => finish!(b
            .build_cartesian_2d(x_range.log_scale(), y_range)
            .map_err(draw_err)?),
        (false, true) => finish!(b
            .build_cartesian_2d(x_range, y_range.log_scale())
            .map_err(draw_err)?),
        (false, false) => {
            finish!(b.build_cartesian_2d(x_range, y_range).map_err(draw_err)?)
        }
    }
    Ok(())
}

fn cache(r: &CacheReport, out: &Path) -> Result<(), String> {
    struct P {
        group: String,
        threads: u64,
        cache: f64,
        raw: f64,
    }
    let points: Vec<P> = r
        .points
        .iter()
        .map(|p| P {
            group: format!(
                "{} {}",
                p.study.as_deref().unwrap_or("?"),
                p.pattern.as_deref().unwrap_or("?")
            ),
            threads: p.threads,
            cache: p.cache_gbps,
            raw: p.raw_gbps,
        })
        .collect();
    if points.is_empty() {
        return Err("the report has no points".into());
    }
    let mut groups: Vec<String> = Vec::new();
    let mut threads: Vec<u64> = Vec::new();
    for p in &points {
        if !groups.contains(&p.group) {
            groups.push(p.group.clone());
        }
        if !threads.contains(&p.threads) {
            threads.push(p.threads);
        }
    }
    threads.sort_unstable();
    let vals: Vec<f64> = points
        .iter()
        .flat_map(|p| [p.cache, p.raw])
        .filter(|x| *x > 0.0)
        .collect();
    let (ymin, ymax) = bounds(&vals);
    let (ymin, ymax) = (ymin.max(1e-3) / 2.0, ymax * 2.0);
    let line = r.options.line_bytes;
    let what = format!("bam bench cache, {line} B lines: cache vs raw");

    let root = canvas(out, 520, &title(&r.origin, &what))?;
    let mut chart = bar_chart(
        &root,
        &groups,
        (ymin, ymax),
        "GB/s (decimal, 8-byte elements delivered)",
        short,
    )?;
    // Per group: for each thread count, a cache bar and a raw bar side by side.
    let slots = (threads.len() * 2) as f64;
    let width = 0.8 / slots;
    for (ti, &t) in threads.iter().enumerate() {
        for (k, is_cache) in [(0usize, true), (1, false)] {
            let color = PALETTE[(ti * 2 + k) % PALETTE.len()];
            let bars: Vec<_> = points
                .iter()
                .filter(|p| p.threads == t)
                .filter_map(|p| {
                    let gi = groups.iter().position(|g| *g == p.group)? as f64;
                    let y = if is_cache { p.cache } else { p.raw };
                    let x0 = gi - 0.4 + (ti * 2 + k) as f64 * width;
                    (y > 0.0).then(|| {
                        Rectangle::new([(x0, ymin), (x0 + width * 0.92, y)], color.filled())
                    })
                })
                .collect();
            let values: Vec<_> = points
                .iter()
                .filter(|p| p.threads == t)
                .filter_map(|p| {
                    let gi = groups.iter().position(|g| *g == p.group)? as f64;
                    let y = if is_cache { p.cache } else { p.raw };
                    let x = gi - 0.4 + ((ti * 2 + k) as f64 + 0.1) * width;
                    (y > 0.0).then(|| {
                        Text::new(
                            if y >= 10.0 {
                                format!("{y:.0}")
                            } else {
                                format!("{y:.1}")
                            },
                            (x, y * 1.12),
                            ("sans-serif", 10).into_font(),
                        )
                    })
                })
                .collect();
            chart.draw_series(values).map_err(draw_err)?;
            let label = format!(
                "{} at {} threads",
                if is_cache { "cache" } else { "raw" },
                t
            );
            chart
                .draw_series(bars)
                .map_err(draw_err)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(draw_err)
}

/// Colors of the kernel suite's variants (one more than PALETTE has): gray for the first
/// (hbm, the baseline), then PALETTE's in another order.
const VARIANT_COLORS: [RGBColor; 7] = [
    RGBColor(60, 60, 60),
    PALETTE[5],
    PALETTE[0],
    PALETTE[4],
    PALETTE[2],
    PALETTE[1],
    PALETTE[3],
];

fn kernels(r: &KernelsReport, out: &Path) -> Result<(), String> {
    struct Bar {
        kernel: usize,
        variant: usize,
        ratio: f64,
        partial: bool,
    }
    let mut names: Vec<String> = Vec::new();
    let mut variants: Vec<String> = Vec::new();
    let mut bars: Vec<Bar> = Vec::new();
    for k in &r.kernels {
        let name = k.kernel.as_deref().unwrap_or("?").to_string();
        // The line size of its ported variants (reports since the per-kernel profiles).
        let name = match k.cache.as_ref().and_then(|c| c.line_bytes) {
            Some(b) => format!("{name} ({} lines)", crate::units::line_size(b)),
            None => name,
        };
        names.push(name);
        for v in &k.variants {
            let vname = v.variant.as_deref().unwrap_or("?").to_string();
            let vi = match variants.iter().position(|x| *x == vname) {
                Some(i) => i,
                None => {
                    variants.push(vname);
                    variants.len() - 1
                }
            };
            // Failed variants have no ratio and get no bar.
            if let Some(ratio) = v.ratio_to_hbm.filter(|x| *x > 0.0) {
                bars.push(Bar {
                    kernel: names.len() - 1,
                    variant: vi,
                    ratio,
                    partial: v.complete == Some(false),
                });
            }
        }
    }
    if bars.is_empty() {
        return Err("the report has no variant with a ratio to hbm".into());
    }
    let ratios: Vec<f64> = bars.iter().map(|b| b.ratio).chain([1.0]).collect();
    let (ymin, ymax) = bounds(&ratios);
    let (ymin, ymax) = (ymin / 3.0, ymax * 3.0);
    let what = "bam bench kernels: rate relative to the plain kernel in GPU memory (hbm = 1)";
    let root = canvas(out, 520, &title(&r.origin, what))?;
    let mut chart = bar_chart(
        &root,
        &names,
        (ymin, ymax),
        "rate / hbm rate (log scale; * = cut by the time budget)",
        ratio_label,
    )?;
    let n = names.len() as f64;
    // hbm = 1.
    chart
        .draw_series(LineSeries::new(
            [(-0.5, 1.0), (n - 0.5, 1.0)],
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(draw_err)?;
    let width = 0.84 / variants.len() as f64;
    for (vi, vname) in variants.iter().enumerate() {
        let color = VARIANT_COLORS[vi % VARIANT_COLORS.len()];
        let mine: Vec<&Bar> = bars.iter().filter(|b| b.variant == vi).collect();
        let x0 = |b: &Bar| b.kernel as f64 - 0.42 + vi as f64 * width;
        chart
            .draw_series(mine.iter().map(|b| {
                Rectangle::new(
                    [(x0(b), ymin), (x0(b) + width * 0.9, b.ratio)],
                    color.filled(),
                )
            }))
            .map_err(draw_err)?
            .label(vname.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        chart
            .draw_series(mine.iter().map(|b| {
                Text::new(
                    ratio_label(b.ratio) + if b.partial { "*" } else { "" },
                    (x0(b), b.ratio * 1.15),
                    ("sans-serif", 9).into_font(),
                )
            }))
            .map_err(draw_err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(draw_err)
}

/// A ratio as a label: 179, 0.75, 0.069, 0.004, 2e-5 (scientific below 0.001, where the
/// kernel suite's log axis reaches with UVM).
fn ratio_label(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 0.1 {
        format!("{x:.2}")
    } else if x >= 0.001 {
        format!("{x:.3}")
    } else {
        format!("{x:.0e}")
    }
}

/// The smallest and largest of `xs` (0..1 when empty).
fn bounds(xs: &[f64]) -> (f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if min.is_finite() && max.is_finite() {
        (min, max.max(min + f64::EPSILON))
    } else {
        (0.0, 1.0)
    }
}

fn pad(min: f64, max: f64) -> std::ops::Range<f64> {
    let d = ((max - min) * 0.05).max(0.5);
    (min - d).max(0.0)..max + d
}

/// A tick label: 65536 → 64K, 0.5 → 0.5, 1200 → 1.2K.
fn short(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 && (x / 1048576.0).fract() == 0.0 {
        format!("{}M", x / 1048576.0)
    } else if a >= 1024.0 && (x / 1024.0).fract() == 0.0 {
        format!("{}K", x / 1024.0)
    } else if a >= 1e3 {
        format!("{:.3}", x / 1e3)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
            + "k"
    } else if a >= 10.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_labels() {
        assert_eq!(ratio_label(179.3), "179");
        assert_eq!(ratio_label(0.751), "0.75");
        assert_eq!(ratio_label(1.0), "1.00");
        assert_eq!(ratio_label(0.069), "0.069");
        assert_eq!(ratio_label(0.0042), "0.004");
        assert_eq!(ratio_label(2.3e-5), "2e-5");
        assert_eq!(ratio_label(1e-3), "0.001");
    }

    #[test]
    fn tick_labels() {
        assert_eq!(short(65536.0), "64K");
        assert_eq!(short(1024.0), "1K");
        assert_eq!(short(1500.0), "1.5k");
        assert_eq!(short(32.0), "32");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(2097152.0), "2M");
    }

    #[test]
    fn unknown_reports_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x.svg");
        let read = |v| Report::from_value(v);
        assert_eq!(
            read(serde_json::json!({"x": 1})).unwrap_err(),
            report::NOT_A_REPORT
        );
        assert!(read(serde_json::json!({"jobs": 1})).is_err());
        let r = read(serde_json::json!({"jobs": []})).unwrap();
        assert_eq!(r.kind(), "bench");
        assert_eq!(r.draw(&out).unwrap_err(), "the report has no jobs");
        let r = read(serde_json::json!({"kernels": []})).unwrap();
        assert_eq!(r.kind(), "bench kernels");
        assert!(r.draw(&out).is_err());
        assert!(!out.exists());
    }

    #[test]
    fn reports_are_told_apart_and_read_leniently() {
        // Absent and null fields read as nothing; unknown fields are ignored.
        let r = Report::from_value(serde_json::json!({
            "device": "sim",
            "gpu": "NVIDIA H100 (132 SMs)",
            "jobs": [{"job": {"rw": "RandRead", "bs": 512, "threads": 1024},
                      "iops": 1.5e6, "latency": {"mean_us": null, "p99_us": 9.0},
                      "extra": true}, {}]
        }))
        .unwrap();
        let Report::Raw(raw) = r else {
            panic!("not raw")
        };
        assert_eq!(raw.jobs[0].job.threads, 1024.0);
        assert_eq!(raw.jobs[0].job.bs, Some(512));
        assert_eq!(raw.jobs[0].latency.mean_us, 0.0);
        assert_eq!(raw.jobs[1].iops, 0.0);
        assert_eq!(title(&raw.origin, "x"), "x — NVIDIA H100");
        let r = Report::from_value(serde_json::json!({
            "device": "NVIDIA H100", "commit": "0123456789", "options": {"line_bytes": 4096},
            "points": [{"study": "hit", "pattern": "random", "threads": 4096,
                        "cache_gbps": 10.0, "raw_gbps": 20.0}]
        }))
        .unwrap();
        let Report::Cache(cache) = r else {
            panic!("not cache")
        };
        assert_eq!(cache.options.line_bytes, 4096);
        assert_eq!(title(&cache.origin, "x"), "x — NVIDIA H100 @ 0123456");
        let r = Report::from_value(serde_json::json!({
            "kernels": [{"kernel": "gather", "cache": {"line_bytes": 512},
                         "variants": [{"variant": "hbm", "ratio_to_hbm": 1.0},
                                      {"variant": "uvm-2x", "ratio_to_hbm": null,
                                       "complete": false}]}]
        }))
        .unwrap();
        assert_eq!(r.kind(), "bench kernels");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("k.svg");
        r.draw(&out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.contains("gather (512 B lines)"), "{svg}");
    }
}
