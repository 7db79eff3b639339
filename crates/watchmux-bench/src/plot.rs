//! PNG plots of bench results.
//!
//! Drawn with `plotters` on its bitmap backend. Text is rendered by `ab_glyph` from a TrueType
//! font read at run time from the Debian package `fonts-dejavu-core`
//! (`crates/watchmux-bench/scripts/install-fonts` installs it); no font is shipped with the crate
//! and no system C library is needed.
//!
//! Drawing only: the caller passes the points; nothing here reads or computes results.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::combinators::WithKeyPoints;
use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters::style::text_anchor;

/// The font every text of a plot is drawn in.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
/// The Debian package that provides [`FONT_PATH`].
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";
/// The family name the font is registered under; plotters' own defaults (mesh labels) use it.
const FAMILY: &str = "sans-serif";

/// Size of the fan-out PNG, pixels.
const WIDTH: u32 = 1400;
const HEIGHT: u32 = 560;
/// Width of the shared legend column on the right.
const LEGEND_WIDTH: u32 = 170;

/// One measured point of a fan-out scenario.
#[derive(Debug, Clone)]
pub struct FanoutPoint {
    /// "watchmux", "direct", "nginx" or "limit" (one line per target).
    pub target: String,
    /// Watchers connected.
    pub watchers: u64,
    /// Median delivery latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile delivery latency, milliseconds.
    pub p99_ms: f64,
    /// CPU-seconds of the process(es) under test per million deliveries.
    pub cpu_s_per_million: f64,
}

/// Why the plot could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No points were given.
    #[error("nothing to plot: no points were given")]
    NoData,
    /// The font file could not be read.
    #[error(
        "cannot read the plot font {}: {source} (install the Debian package {package}, \
         e.g. with crates/watchmux-bench/scripts/install-fonts)",
        path.display()
    )]
    FontMissing {
        /// The font file.
        path: PathBuf,
        /// The Debian package that installs it.
        package: &'static str,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The font file is not a usable TrueType font.
    #[error("the plot font {} is not a usable TrueType font", path.display())]
    FontInvalid {
        /// The font file.
        path: PathBuf,
    },
    /// plotters failed to draw or write the PNG.
    #[error("drawing {}: {message}", path.display())]
    Draw {
        /// The PNG being written.
        path: PathBuf,
        /// plotters' error.
        message: String,
    },
}

fn read_font(path: &Path) -> Result<Vec<u8>, PlotError> {
    std::fs::read(path).map_err(|source| PlotError::FontMissing {
        path: path.to_path_buf(),
        package: FONT_PACKAGE,
        source,
    })
}

/// Registers [`FONT_PATH`] with plotters once per process. Not cached on failure, so a font
/// installed later is picked up by the next call.
fn ensure_font() -> Result<(), PlotError> {
    // Plots are drawn outside any async task, after the runs.
    static REGISTERED: parking_lot::Mutex<bool> = parking_lot::Mutex::new(false);
    let mut registered = REGISTERED.lock();
    if *registered {
        return Ok(());
    }
    let path = PathBuf::from(FONT_PATH);
    let bytes = read_font(&path)?;
    // plotters keeps fonts in a process-wide table that wants `'static` data; this happens at
    // most once per process (guarded by `REGISTERED`), so the leak is bounded.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| PlotError::FontInvalid { path: path.clone() })?;
    plotters::style::register_font(FAMILY, FontStyle::Bold, bytes)
        .map_err(|_| PlotError::FontInvalid { path })?;
    *registered = true;
    Ok(())
}

/// The colour of a target: fixed for the known targets, a palette for the rest.
fn target_colour(target: &str, other_index: usize) -> RGBColor {
    const OTHERS: [RGBColor; 6] = [
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
        RGBColor(188, 189, 34),
    ];
    match target {
        "watchmux" => RGBColor(31, 119, 180),
        "direct" => RGBColor(44, 160, 44),
        "nginx" => RGBColor(255, 127, 14),
        "limit" => RGBColor(90, 90, 90),
        _ => OTHERS[other_index % OTHERS.len()],
    }
}

/// Targets in legend order (the known ones first, then the others in order of appearance),
/// each with its colour and its points sorted by watchers.
fn group_targets(points: &[FanoutPoint]) -> Vec<(String, RGBColor, Vec<FanoutPoint>)> {
    const KNOWN: [&str; 4] = ["watchmux", "direct", "nginx", "limit"];
    let mut order: Vec<&str> = Vec::new();
    let mut by_target: BTreeMap<&str, Vec<FanoutPoint>> = BTreeMap::new();
    for p in points {
        by_target
            .entry(p.target.as_str())
            .or_insert_with(|| {
                order.push(p.target.as_str());
                Vec::new()
            })
            .push(p.clone());
    }
    order.sort_by_key(|t| KNOWN.iter().position(|k| k == t).unwrap_or(KNOWN.len()));
    let mut other_index = 0;
    order
        .into_iter()
        .map(|t| {
            let colour = target_colour(t, other_index);
            if !KNOWN.contains(&t) {
                other_index += 1;
            }
            let mut pts = by_target.remove(t).unwrap_or_default();
            pts.sort_by_key(|p| p.watchers);
            (t.to_string(), colour, pts)
        })
        .collect()
}

/// Whether a value can be placed on a log axis.
fn plottable(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// Consecutive runs of plottable `(watchers, value)` points: an unplottable point breaks the
/// line rather than being bridged.
fn runs(points: &[FanoutPoint], value: impl Fn(&FanoutPoint) -> f64) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for p in points {
        let (x, y) = (p.watchers as f64, value(p));
        if plottable(x) && plottable(y) {
            current.push((x, y));
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A log-axis range around `[min, max]`: padded so edge points are not cut, never degenerate,
/// and always containing a power of ten (plotters puts its major ticks there).
fn log_range(min: f64, max: f64) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = (min / 1.4, max * 1.4);
    if hi / lo < 4.0 {
        let mid = (lo * hi).sqrt();
        lo = mid / 2.0;
        hi = mid * 2.0;
    }
    let decade_below_hi = 10f64.powf(hi.log10().floor());
    if decade_below_hi < lo {
        lo = decade_below_hi;
    }
    lo..hi
}

/// Ticks for a log axis over `range`: labelled ones (decades, or 1-2-5 or 1..9 per decade when
/// that gives fewer than `min_labels`; every n-th decade when there are too many), and
/// unlabelled grid lines at 1..9 per decade.
fn log_ticks(range: &std::ops::Range<f64>, min_labels: usize) -> (Vec<f64>, Vec<f64>) {
    const MAX_LABELS: usize = 8;
    let (lo, hi) = (range.start, range.end);
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let ticks = |mults: &[f64], step: usize| -> Vec<f64> {
        (first..=last)
            .step_by(step.max(1))
            .flat_map(|k| {
                // Divide for negative exponents: 0.5 stays exactly 0.5.
                let scale = 10f64.powi(k.abs());
                mults
                    .iter()
                    .map(move |m| if k >= 0 { m * scale } else { m / scale })
            })
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    const ONES: [f64; 1] = [1.0];
    const ONE_TWO_FIVE: [f64; 3] = [1.0, 2.0, 5.0];
    const ALL: [f64; 9] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let decades = ticks(&ONES, 1);
    let labelled = if decades.len() > MAX_LABELS {
        ticks(&ONES, decades.len().div_ceil(MAX_LABELS))
    } else if decades.len() >= min_labels {
        decades
    } else {
        let one_two_five = ticks(&ONE_TWO_FIVE, 1);
        if one_two_five.len() >= min_labels {
            one_two_five
        } else {
            ticks(&ALL, 1)
        }
    };
    let light = if last - first <= 8 {
        ticks(&ALL, 1)
    } else {
        Vec::new()
    };
    (labelled, light)
}

/// Compact label: 3 significant digits, k/M/G suffixes for large values, scientific notation
/// for very large or very small ones.
fn fmt_num(v: f64) -> String {
    fn sig(v: f64) -> String {
        if v == 0.0 || !v.is_finite() {
            return format!("{v}");
        }
        let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
        let s = format!("{v:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
    let a = v.abs();
    if !a.is_finite() || a == 0.0 {
        sig(v)
    } else if !(1e-3..999.5e9).contains(&a) {
        let exp = a.log10().floor() as i32;
        format!("{}e{exp}", sig(v / 10f64.powi(exp)))
    } else if a >= 999.5e6 {
        format!("{}G", sig(v / 1e9))
    } else if a >= 999_500.0 {
        format!("{}M", sig(v / 1e6))
    } else if a >= 999.5 {
        format!("{}k", sig(v / 1e3))
    } else {
        sig(v)
    }
}

/// One series of a panel: its colour, runs of points, and whether it is drawn dashed with
/// hollow markers (p50) or solid with filled markers.
struct Series {
    colour: RGBColor,
    runs: Vec<Vec<(f64, f64)>>,
    dashed: bool,
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// A log axis around `[min, max]` with our own ticks.
fn log_axis(min: f64, max: f64, min_labels: usize) -> WithKeyPoints<LogCoord<f64>> {
    let range = log_range(min, max);
    let (labelled, light) = log_ticks(&range, min_labels);
    range
        .log_scale()
        .with_key_points(labelled)
        .with_light_points(light)
}

/// Draws one log/log chart (or, with nothing plottable, its caption and a note).
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    y_desc: &str,
    series: &[Series],
) -> DrawResult<DB> {
    let all = series.iter().flat_map(|s| s.runs.iter().flatten());
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    let mut any = false;
    for &(x, y) in all {
        any = true;
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if !any {
        let inner = area.margin(12, 12, 12, 12).titled(caption, (FAMILY, 18))?;
        let (w, h) = inner.dim_in_pixel();
        let style = TextStyle::from((FAMILY, 16).into_font())
            .color(&RGBColor(110, 110, 110))
            .pos(text_anchor::Pos::new(
                text_anchor::HPos::Center,
                text_anchor::VPos::Center,
            ));
        inner.draw(&Text::new(
            "no plottable values (all zero, negative or not finite)",
            (w as i32 / 2, h as i32 / 3),
            style,
        ))?;
        return Ok(());
    }

    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(log_axis(x_min, x_max, 3), log_axis(y_min, y_max, 5))?;
    chart
        .configure_mesh()
        .x_desc("watchers (log scale)")
        .y_desc(y_desc)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(BLACK.mix(0.05))
        .bold_line_style(BLACK.mix(0.15))
        .draw()?;

    for s in series {
        let line = s.colour.stroke_width(2);
        for run in &s.runs {
            if s.dashed {
                chart.draw_series(DashedLineSeries::new(run.iter().copied(), 8, 5, line))?;
                chart.draw_series(
                    run.iter()
                        .map(|&p| Circle::new(p, 4, s.colour.stroke_width(2))),
                )?;
            } else {
                chart.draw_series(LineSeries::new(run.iter().copied(), line))?;
                chart.draw_series(run.iter().map(|&p| Circle::new(p, 4, s.colour.filled())))?;
            }
        }
    }
    Ok(())
}

/// The legend column: one colour per target, then the meaning of the line styles.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    targets: &[(String, RGBColor, Vec<FanoutPoint>)],
) -> DrawResult<DB> {
    let font = (FAMILY, 15).into_font();
    let text = TextStyle::from(font.clone()).pos(text_anchor::Pos::new(
        text_anchor::HPos::Left,
        text_anchor::VPos::Center,
    ));
    let heading = TextStyle::from((FAMILY, 15).into_font().style(FontStyle::Bold));
    let (x0, mut y) = (10, 60);
    area.draw(&Text::new("target", (x0, y - 10), heading.clone()))?;
    y += 20;
    for (name, colour, _) in targets {
        area.draw(&PathElement::new(
            vec![(x0, y), (x0 + 30, y)],
            colour.stroke_width(2),
        ))?;
        area.draw(&Circle::new((x0 + 15, y), 4, colour.filled()))?;
        let name = if name.is_empty() { "(unnamed)" } else { name };
        area.draw(&Text::new(name, (x0 + 40, y), text.clone()))?;
        y += 24;
    }
    y += 16;
    area.draw(&Text::new("latency", (x0, y - 10), heading))?;
    y += 20;
    let grey = RGBColor(60, 60, 60);
    area.draw(&PathElement::new(
        vec![(x0, y), (x0 + 30, y)],
        grey.stroke_width(2),
    ))?;
    area.draw(&Circle::new((x0 + 15, y), 4, grey.filled()))?;
    area.draw(&Text::new("p99", (x0 + 40, y), text.clone()))?;
    y += 24;
    for (a, b) in [(x0, x0 + 10), (x0 + 20, x0 + 30)] {
        area.draw(&PathElement::new(
            vec![(a, y), (b, y)],
            grey.stroke_width(2),
        ))?;
    }
    area.draw(&Circle::new((x0 + 15, y), 4, grey.stroke_width(2)))?;
    area.draw(&Text::new("p50", (x0 + 40, y), text))?;
    Ok(())
}

fn draw_fanout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    points: &[FanoutPoint],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let body = root.margin(8, 0, 0, 0).titled(title, (FAMILY, 24))?;
    let (charts, legend) = body.split_horizontally(WIDTH - LEGEND_WIDTH);
    let (left, right) = charts.split_horizontally((WIDTH - LEGEND_WIDTH) / 2);

    let targets = group_targets(points);
    let mut latency = Vec::new();
    let mut cpu = Vec::new();
    for (_, colour, pts) in &targets {
        latency.push(Series {
            colour: *colour,
            runs: runs(pts, |p| p.p50_ms),
            dashed: true,
        });
        latency.push(Series {
            colour: *colour,
            runs: runs(pts, |p| p.p99_ms),
            dashed: false,
        });
        cpu.push(Series {
            colour: *colour,
            runs: runs(pts, |p| p.cpu_s_per_million),
            dashed: false,
        });
    }
    draw_panel(
        &left,
        "Delivery latency (p99 solid, p50 dashed)",
        "latency, ms (log scale)",
        &latency,
    )?;
    draw_panel(
        &right,
        "CPU per million deliveries",
        "CPU-seconds / 1M deliveries (log scale)",
        &cpu,
    )?;
    draw_legend(&legend, &targets)?;
    root.present()
}

/// Writes a PNG (about 1400×560) with two charts side by side: left, delivery latency p50
/// (dashed or lighter) and p99 (solid) in ms against watchers; right, CPU-seconds per million
/// deliveries against watchers. Both x axes log-scale watchers; y axes log scale. One colour
/// per target, consistent across both charts, with a legend; title given; points marked.
///
/// Values that cannot go on a log axis (zero, negative, NaN, infinite) are skipped and break
/// their line; a chart left with nothing to plot shows a note instead. No points at all is
/// [`PlotError::NoData`].
pub fn fanout_png(path: &Path, title: &str, points: &[FanoutPoint]) -> Result<(), PlotError> {
    if points.is_empty() {
        return Err(PlotError::NoData);
    }
    ensure_font()?;
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    draw_fanout(&root, title, points).map_err(|e| PlotError::Draw {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

    fn realistic() -> Vec<FanoutPoint> {
        let mut out = Vec::new();
        for (target, lat, cpu) in [
            ("watchmux", 1.0, 2.0),
            ("direct", 3.0, 9.0),
            ("nginx", 1.6, 4.5),
            ("limit", 0.4, 0.8),
        ] {
            for (i, watchers) in [100u64, 1000, 10000].into_iter().enumerate() {
                let scale = 1.0 + 2.5 * i as f64;
                out.push(FanoutPoint {
                    target: target.to_string(),
                    watchers,
                    p50_ms: lat * scale,
                    p99_ms: lat * scale * 4.0,
                    cpu_s_per_million: cpu / (1.0 + 0.3 * i as f64),
                });
            }
        }
        out
    }

    fn assert_png(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(bytes[..8], PNG_SIGNATURE, "not a PNG");
        // A blank 1400×560 RGB PNG compresses to a few KB; one with text and lines is bigger.
        assert!(
            (10_000..5_000_000).contains(&bytes.len()),
            "implausible size {}",
            bytes.len()
        );
    }

    fn font_present() -> bool {
        if Path::new(FONT_PATH).exists() {
            return true;
        }
        eprintln!("skipping: {FONT_PATH} missing (install {FONT_PACKAGE})");
        false
    }

    #[test]
    fn writes_a_png() {
        if !font_present() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fanout.png");
        fanout_png(&path, "fan-out: 1 object, 1 update/s", &realistic()).unwrap();
        assert_png(&path);
    }

    #[test]
    fn empty_input_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.png");
        assert!(matches!(
            fanout_png(&path, "t", &[]),
            Err(PlotError::NoData)
        ));
        assert!(!path.exists());
    }

    #[test]
    fn missing_font_names_path_and_package() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("NoSuchFont.ttf");
        let err = read_font(&path).unwrap_err();
        assert!(matches!(err, PlotError::FontMissing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&*path.to_string_lossy()), "{msg}");
        assert!(msg.contains(FONT_PACKAGE), "{msg}");
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        if !font_present() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = |target: &str, watchers, p50, p99, cpu| FanoutPoint {
            target: target.to_string(),
            watchers,
            p50_ms: p50,
            p99_ms: p99,
            cpu_s_per_million: cpu,
        };
        let cases: Vec<(&str, Vec<FanoutPoint>)> = vec![
            // One watcher count, one target: x range must not collapse.
            ("single", vec![p("watchmux", 1000, 1.0, 2.0, 3.0)]),
            // Same value everywhere: y range must not collapse.
            (
                "flat",
                vec![
                    p("watchmux", 10, 5.0, 5.0, 5.0),
                    p("watchmux", 100, 5.0, 5.0, 5.0),
                ],
            ),
            // Nothing plottable in either chart.
            (
                "unplottable",
                vec![
                    p("watchmux", 0, 1.0, 1.0, 1.0),
                    p("direct", 100, f64::NAN, 0.0, -1.0),
                    p("nginx", 100, f64::INFINITY, f64::NEG_INFINITY, f64::NAN),
                ],
            ),
            // Some values missing in the middle of a line, an unknown target, huge values.
            (
                "mixed",
                vec![
                    p("watchmux", 100, 1.0, 2.0, 3.0),
                    p("watchmux", 1000, f64::NAN, 0.0, 3.5),
                    p("watchmux", 10000, 4.0, 9.0, f64::INFINITY),
                    p("someone-else", 1000, 1e-6, 1e9, 1e12),
                    p("", u64::MAX, 1.0, 1.0, 1.0),
                ],
            ),
        ];
        for (name, points) in cases {
            let path = dir.path().join(format!("{name}.png"));
            fanout_png(&path, name, &points).unwrap_or_else(|e| panic!("{name}: {e}"));
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes[..8], PNG_SIGNATURE, "{name}: not a PNG");
        }
    }

    #[test]
    fn ranges_and_labels() {
        let r = log_range(1000.0, 1000.0);
        assert!(r.start < 1000.0 && r.end > 1000.0 && r.end / r.start >= 4.0);
        for (lo, hi) in [(2.0, 5.0), (2.0, 8.0), (0.03, 0.05), (1000.0, 1000.0)] {
            let r = log_range(lo, hi);
            let decade = 10f64.powf(r.end.log10().floor());
            assert!(r.start <= decade, "no power of ten in {r:?}");
            assert!(r.start < lo && r.end > hi, "{r:?} does not pad {lo}..{hi}");
        }
        let (labels, light) = log_ticks(&(70.0..14000.0), 3);
        assert_eq!(labels, [100.0, 1000.0, 10000.0]);
        assert!(light.len() > labels.len());
        let (labels, _) = log_ticks(&(0.35..12.6), 5);
        assert_eq!(labels, [0.5, 1.0, 2.0, 5.0, 10.0]);
        let (labels, _) = log_ticks(&(1.5..7.0), 3);
        assert_eq!(labels, [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let (labels, _) = log_ticks(&(1e-6..1e19), 3);
        assert!((3..=8).contains(&labels.len()), "{labels:?}");
        assert_eq!(fmt_num(100.0), "100");
        assert_eq!(fmt_num(1000.0), "1k");
        assert_eq!(fmt_num(10000.0000001), "10k");
        assert_eq!(fmt_num(2.0000000004), "2");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(1.5e6), "1.5M");
        assert_eq!(fmt_num(2e9), "2G");
        assert_eq!(fmt_num(1e15), "1e15");
        assert_eq!(fmt_num(0.00001), "1e-5");
        assert_eq!(fmt_num(0.002), "0.002");
    }

    /// Writes the example at /tmp/plot_example.png for a person to look at.
    #[test]
    #[ignore = "writes /tmp/plot_example.png for manual inspection"]
    fn example_png() {
        fanout_png(
            Path::new("/tmp/plot_example.png"),
            "fan-out: 1 object, 1 update/s",
            &realistic(),
        )
        .unwrap();
    }
}
