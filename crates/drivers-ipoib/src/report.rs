//! The copybreak simulation's report (feature `std`): measured costs in, a table and an SVG
//! plot out. `examples/copybreak_sim.rs` is the program around it.
//!
//! Costs come from criterion's output of `benches/rx_path.rs` ([`read_criterion`]: the median
//! of `ipoib_rx/copybreak`, `ipoib_rx/handup` and `ipoib_rx/coalesce`, nanoseconds per
//! frame) or from a small text file ([`parse_costs`], written by [`format_costs`]):
//!
//! ```text
//! # measured by cargo bench -p drivers-ipoib --bench rx_path
//! copy_ns = 54.4
//! handup_ns = 40.6
//! coalesce_ns = 197.4
//! ```

use std::fmt::Write as _;
use std::format;
use std::path::Path;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use plotters::prelude::*;

use crate::sim::{self, Costs, SimConfig, SimResult, Workload};

/// Reads the medians criterion measured for `ipoib_rx/{copybreak,handup,coalesce}` under
/// `dir` (criterion's output directory, `target/criterion` by default).
///
/// # Errors
/// A message naming the file that is missing or unreadable.
pub fn read_criterion(dir: &Path) -> Result<Costs, String> {
    let median = |bench: &str| -> Result<f64, String> {
        let path = dir.join("ipoib_rx").join(bench).join("new/estimates.json");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (run `cargo bench -p drivers-ipoib --bench rx_path` first)",
                path.display()
            )
        })?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not criterion's estimates: {e}", path.display()))?;
        v["median"]["point_estimate"]
            .as_f64()
            .ok_or_else(|| format!("{}: no median.point_estimate", path.display()))
    };
    Ok(Costs {
        copy_ps: ps(median("copybreak")?),
        handup_ps: ps(median("handup")?),
        coalesce_ps: ps(median("coalesce")?),
        fixed_ps: 0,
    })
}

fn ps(ns: f64) -> u64 {
    (ns * 1000.0).round().max(0.0) as u64
}

/// Parses a costs file: `copy_ns`, `handup_ns`, `coalesce_ns` and optionally `fixed_ns`, one
/// `key = value` (nanoseconds per frame) a line; `#` starts a comment.
///
/// # Errors
/// A message naming the line or the missing key.
pub fn parse_costs(text: &str) -> Result<Costs, String> {
    let (mut copy, mut handup, mut coalesce, mut fixed) = (None, None, None, 0);
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected `key = value`", n + 1))?;
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("line {}: `{}` is not a number", n + 1, v.trim()))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("line {}: costs are non-negative", n + 1));
        }
        match k.trim() {
            "copy_ns" => copy = Some(ps(v)),
            "handup_ns" => handup = Some(ps(v)),
            "coalesce_ns" => coalesce = Some(ps(v)),
            "fixed_ns" => fixed = ps(v),
            other => return Err(format!("line {}: unknown key `{other}`", n + 1)),
        }
    }
    let need = |v: Option<u64>, k: &str| v.ok_or_else(|| format!("`{k}` missing"));
    Ok(Costs {
        copy_ps: need(copy, "copy_ns")?,
        handup_ps: need(handup, "handup_ns")?,
        coalesce_ps: need(coalesce, "coalesce_ns")?,
        fixed_ps: fixed,
    })
}

/// The costs as a file [`parse_costs`] reads, after `note` as comment lines.
pub fn format_costs(costs: &Costs, note: &str) -> String {
    let mut s = String::new();
    for l in note.lines() {
        let _ = writeln!(s, "# {l}");
    }
    let ns = |p: u64| p as f64 / 1000.0;
    let _ = writeln!(s, "copy_ns = {:.1}", ns(costs.copy_ps));
    let _ = writeln!(s, "handup_ns = {:.1}", ns(costs.handup_ps));
    let _ = writeln!(s, "coalesce_ns = {:.1}", ns(costs.coalesce_ps));
    if costs.fixed_ps > 0 {
        let _ = writeln!(s, "fixed_ns = {:.1}", ns(costs.fixed_ps));
    }
    s
}

/// One line of the table: a scenario and what it gave.
#[derive(Debug, Clone)]
pub struct Row {
    /// The workload in words.
    pub workload: String,
    /// Which driver costs.
    pub costs: &'static str,
    /// Copybreak, coalescer.
    pub variant: String,
    /// The parameters.
    pub config: SimConfig,
    /// The outcome.
    pub result: SimResult,
}

/// The application's cost per message in the UDP overload rows.
pub const SLOW_APP_NS: u64 = 5_000;

fn udp(costs: Costs, copybreak: bool, app_ns: u64) -> SimConfig {
    let mut c = SimConfig::seed_udp(costs);
    c.copybreak = copybreak.then_some(256);
    c.app_ns = app_ns;
    c
}

fn tcp(costs: Costs, copybreak: bool, coalesce: bool) -> SimConfig {
    let mut c = SimConfig::bulk_tcp(costs);
    c.copybreak = copybreak.then_some(256);
    if let Workload::Tcp { mss, window, .. } = c.workload {
        c.workload = Workload::Tcp {
            mss,
            window,
            coalesce,
        };
    }
    c
}

fn cb(on: bool) -> &'static str {
    if on {
        "copybreak 256"
    } else {
        "no copybreak"
    }
}

/// The table's scenarios, each run for `duration_ns` of simulated time: the seed's workload
/// with the seed-era and the measured costs, the same with an application slower than the
/// sender, and bulk TCP through the coalescer (and without it), copybreak on and off.
///
/// # Errors
/// [`sim::SimError`] (not with these parameters).
pub fn rows(measured: Costs, duration_ns: u64) -> Result<Vec<Row>, sim::SimError> {
    let mut specs: Vec<(String, &'static str, String, SimConfig)> = Vec::new();
    for (costs, name) in [(Costs::SEED_ERA, "seed-era"), (measured, "measured")] {
        for on in [true, false] {
            specs.push((
                "UDP 128 B".into(),
                name,
                cb(on).into(),
                udp(costs, on, 3_000),
            ));
        }
    }
    for on in [true, false] {
        specs.push((
            format!("UDP 128 B, app {} us", SLOW_APP_NS / 1000),
            "measured",
            cb(on).into(),
            udp(measured, on, SLOW_APP_NS),
        ));
    }
    for (on, co) in [(true, true), (false, true), (true, false)] {
        let v = if co {
            format!("coalescer, {}", cb(on))
        } else {
            format!("no coalescer, {}", cb(on))
        };
        specs.push(("TCP bulk".into(), "measured", v, tcp(measured, on, co)));
    }
    specs
        .into_iter()
        .map(|(workload, costs, variant, mut config)| {
            config.duration_ns = duration_ns;
            Ok(Row {
                workload,
                costs,
                variant,
                result: sim::run(&config)?,
                config,
            })
        })
        .collect()
}

/// The rows as a text table.
pub fn table(rows: &[Row]) -> String {
    let head = [
        "workload",
        "costs",
        "variant",
        "sent/s",
        "delivered/s",
        "RNR NAKs",
        "resets",
        "lost",
        "socket drops",
    ];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            [
                r.workload.clone(),
                r.costs.to_string(),
                r.variant.clone(),
                format!("{:.0}", r.result.per_sec(r.result.offered)),
                format!("{:.0}", r.result.delivered_per_sec()),
                r.result.rnr_naks.to_string(),
                r.result.resets.to_string(),
                r.result.lost().to_string(),
                r.result.socket_drops.to_string(),
            ]
        })
        .collect();
    let mut w = head.map(str::len);
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            w[i] = w[i].max(s.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, c: &[String]| {
        for (i, s) in c.iter().enumerate() {
            let sep = if i + 1 == c.len() { "\n" } else { "  " };
            if i < 3 {
                let _ = write!(out, "{s:<width$}{sep}", width = w[i]);
            } else {
                let _ = write!(out, "{s:>width$}{sep}", width = w[i]);
            }
        }
    };
    line(&mut out, &head.map(String::from));
    for c in &cells {
        line(&mut out, c);
    }
    out
}

/// One curve of a panel.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend's words.
    pub label: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// Colour index.
    pub colour: usize,
    /// Drawn dashed (a reference line).
    pub dashed: bool,
}

/// One panel of the plot.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Its caption.
    pub title: String,
    /// X axis title.
    pub x_label: String,
    /// Y axis title.
    pub y_label: String,
    /// The curves.
    pub series: Vec<Series>,
}

/// The sender rates the UDP sweeps run at.
pub fn udp_rates() -> Vec<u64> {
    (1..=12).map(|k| k * 50_000).collect()
}

/// The four panels: delivered against sent for the seed's workload with the seed-era and with
/// the measured costs, messages lost per second for both, and bulk TCP with and without the
/// coalescer; each point `duration_ns` of simulated time.
///
/// # Errors
/// [`sim::SimError`] (not with these parameters).
pub fn panels(measured: Costs, duration_ns: u64) -> Result<Vec<Panel>, sim::SimError> {
    let k = |v: u64| v as f64 / 1000.0;
    let mut delivered = Vec::new();
    let mut lost = Vec::new();
    let mut colour = 0;
    for (costs, name) in [(Costs::SEED_ERA, "seed-era costs"), (measured, "measured")] {
        let mut panel = Vec::new();
        for on in [true, false] {
            let (mut d, mut l) = (Vec::new(), Vec::new());
            for rate in udp_rates() {
                let mut c = udp(costs, on, 3_000);
                c.offered_rate = rate;
                c.duration_ns = duration_ns;
                let r = sim::run(&c)?;
                d.push((k(rate), r.delivered_per_sec() / 1000.0));
                l.push((k(rate), r.per_sec(r.lost()) / 1000.0));
            }
            panel.push(Series {
                label: cb(on).into(),
                points: d,
                colour: usize::from(!on),
                dashed: false,
            });
            lost.push(Series {
                label: format!("{name}, {}", cb(on)),
                points: l,
                colour,
                dashed: false,
            });
            colour += 1;
        }
        panel.push(Series {
            label: "sent (all delivered)".into(),
            points: udp_rates().iter().map(|&r| (k(r), k(r))).collect(),
            colour: 6,
            dashed: true,
        });
        delivered.push(Panel {
            title: format!("128-byte UDP, {name}: delivered"),
            x_label: "sender rate while connected (k messages/s)".into(),
            y_label: "delivered (k messages/s)".into(),
            series: panel,
        });
    }
    let mut tcp_series = Vec::new();
    for (i, (on, co)) in [(true, true), (false, true), (true, false)]
        .iter()
        .enumerate()
    {
        let mut d = Vec::new();
        for rate in (1..=10).map(|k| k * 100_000) {
            let mut c = tcp(measured, *on, *co);
            c.offered_rate = rate;
            c.duration_ns = duration_ns;
            let r = sim::run(&c)?;
            d.push((k(rate), r.delivered_per_sec() / 1000.0));
        }
        let label = if *co {
            format!("coalescer, {}", cb(*on))
        } else {
            format!("no coalescer, {}", cb(*on))
        };
        tcp_series.push(Series {
            label,
            points: d,
            colour: [0, 1, 2][i],
            dashed: false,
        });
    }
    let [seed, measured_panel] = <[Panel; 2]>::try_from(delivered)
        .map_err(|_| sim::SimError("internal: two UDP panels expected"))?;
    Ok(vec![
        seed,
        measured_panel,
        Panel {
            title: "128-byte UDP: lost (flushed at resets, dropped while reconnecting)".into(),
            x_label: "sender rate while connected (k messages/s)".into(),
            y_label: "lost (k messages/s)".into(),
            series: lost,
        },
        Panel {
            title: "bulk TCP, 1992-byte segments, measured costs".into(),
            x_label: "sender rate (k segments/s)".into(),
            y_label: "delivered (k segments/s)".into(),
            series: tcp_series,
        },
    ])
}

/// Colours that stay apart on white (Okabe-Ito).
const COLOURS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
];

/// Draws `panels` two by two into an SVG file under `title`.
///
/// # Errors
/// A message when the file cannot be written.
pub fn write_svg(path: &Path, title: &str, panels: &[Panel]) -> Result<(), String> {
    let svg = render_svg(title, panels)?;
    std::fs::write(path, svg).map_err(|e| format!("{}: {e}", path.display()))
}

/// The SVG document of [`write_svg`].
///
/// # Errors
/// A message when plotters fails.
pub fn render_svg(title: &str, panels: &[Panel]) -> Result<String, String> {
    let mut out = String::new();
    {
        let rows = panels.len().div_ceil(2).max(1) as u32;
        let root = SVGBackend::with_string(&mut out, (1200, 40 + 420 * rows)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, body) = root.split_vertically(40);
        top.titled(title, ("sans-serif", 22))
            .map_err(|e| e.to_string())?;
        let areas = body.split_evenly((rows as usize, 2));
        for (panel, area) in panels.iter().zip(areas.iter()) {
            draw_panel(area, panel).map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let max = |f: fn(&(f64, f64)) -> f64| {
        panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(f))
            .fold(0.0f64, f64::max)
    };
    let (xmax, ymax) = (max(|p| p.0), max(|p| p.1));
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 17))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..xmax * 1.04, 0.0..(ymax * 1.12).max(1.0))?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for (i, s) in panel.series.iter().enumerate() {
        let colour = COLOURS[s.colour % COLOURS.len()];
        // The first curve wide underneath: where a later one lies on it, both stay visible.
        let style = colour.stroke_width(if i == 0 { 6 } else { 2 });
        if s.dashed {
            chart.draw_series(DashedLineSeries::new(s.points.iter().copied(), 6, 4, style))?;
        } else {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), style))?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(3))
                });
            chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of no time: every rate is a number (sent/s was NaN, delivered/s was not).
    #[test]
    fn a_run_of_no_time_prints_numbers() {
        let rows = rows(Costs::SEED_ERA, 0).expect("rows");
        let text = table(&rows);
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
    }

    #[test]
    fn costs_file_round_trip() {
        let c = Costs {
            copy_ps: 54_400,
            handup_ps: 40_600,
            coalesce_ps: 197_400,
            fixed_ps: 0,
        };
        let text = format_costs(&c, "measured\nby hand");
        assert!(text.starts_with("# measured\n# by hand\n"));
        assert_eq!(parse_costs(&text), Ok(c));
        assert!(parse_costs("copy_ns = 1\nhandup_ns = 2").is_err());
        assert!(parse_costs("copy_ns = x").is_err());
        assert!(parse_costs("copy_ns = -1").is_err());
        assert!(parse_costs("speed = 1").is_err());
    }

    #[test]
    fn criterion_output_is_read() {
        let tmp = tempfile::Builder::new()
            .prefix("ipoib-crit-")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        for (b, v) in [("copybreak", 50.5), ("handup", 40.0), ("coalesce", 200.25)] {
            let d = dir.join("ipoib_rx").join(b).join("new");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("estimates.json"),
                format!("{{\"median\":{{\"point_estimate\":{v},\"standard_error\":1.0}}}}"),
            )
            .unwrap();
        }
        let c = read_criterion(&dir).unwrap();
        assert_eq!(
            (c.copy_ps, c.handup_ps, c.coalesce_ps),
            (50_500, 40_000, 200_250)
        );
        // Without the directory: removed here, so the guard's drop has nothing left to do.
        tmp.close().unwrap();
        assert!(read_criterion(&dir).unwrap_err().contains("cargo bench"));
    }
}
