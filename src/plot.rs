//! `lro explain --plot`: the coalescing of each flow as an SVG picture.
//!
//! One panel per flow, all on one time axis (capture time since the first delivery). Every
//! frame the engine delivered up is a marker: at the time it was delivered, as high as the
//! input frames it stands for (a 40-frame segment at 40, a frame passed alone at 1, a pure ACK
//! that absorbed 9 older ones at 10), shaped and coloured by why it was delivered (the legend
//! at the top, most frequent first).

use std::io::Write as _;
use std::path::Path;

use crate::tunnel::FlowId;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::explain::{cause_name, Point, CAUSES};
use crate::output::{FileId, OutFile, OutputError};

/// Flows drawn at most (one panel each).
pub(crate) const MAX_FLOWS: usize = 16;

const WIDTH: u32 = 1100;
const PANEL: u32 = 150;
const HEADER: u32 = 96;
/// Room for the time labels under every panel.
const TICKS: u32 = 22;
/// Room for the time axis' title under the last panel.
const AXIS: u32 = 24;

/// What to draw.
pub(crate) struct Picture<'a> {
    /// The input's name.
    pub(crate) title: &'a str,
    /// The flows to draw, top to bottom, each with its panel's caption.
    pub(crate) flows: &'a [(Option<FlowId>, String)],
    /// Every delivery of the replay.
    pub(crate) points: &'a [Point],
    /// The input file, never to be overwritten.
    pub(crate) input: Option<FileId>,
}

/// What was written.
#[derive(Debug)]
pub(crate) struct Drawn {
    /// The output's name.
    pub(crate) name: String,
    /// Flows drawn.
    pub(crate) flows: usize,
    /// The picture went to standard output.
    pub(crate) to_stdout: bool,
}

/// Marker shapes, cycled with the colours.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Circle,
    Triangle,
    Square,
    Cross,
}

/// Colours that stay apart on white (Okabe-Ito, then darker tones).
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];
const SHAPES: [Shape; 4] = [Shape::Circle, Shape::Triangle, Shape::Square, Shape::Cross];

/// The marker style of the `i`-th most frequent cause.
fn style(i: usize) -> (Shape, RGBColor) {
    (SHAPES[i % SHAPES.len()], COLOURS[i % COLOURS.len()])
}

fn draw_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow::anyhow!("internal error: cannot draw the plot: {e}")
}

/// Draws a marker of `shape` at pixel `(x, y)` of `area`.
fn marker(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    shape: Shape,
    colour: RGBColor,
    at: (i32, i32),
) -> Result<()> {
    let fill = colour.mix(0.75).filled();
    let line = colour.stroke_width(2);
    let r = 4;
    match shape {
        Shape::Circle => area.draw(&Circle::new(at, r, fill)),
        Shape::Triangle => area.draw(&TriangleMarker::new(at, r + 1, fill)),
        Shape::Square => area.draw(&Rectangle::new(
            [(at.0 - r + 1, at.1 - r + 1), (at.0 + r - 1, at.1 + r - 1)],
            fill,
        )),
        Shape::Cross => area.draw(&Cross::new(at, r, line)),
    }
    .map_err(draw_error)
}

/// The SVG text of `pic`.
pub(crate) fn render(pic: &Picture<'_>) -> Result<String> {
    let flows = &pic.flows[..pic.flows.len().min(MAX_FLOWS)];
    let drawn: Vec<&Point> = pic
        .points
        .iter()
        .filter(|p| flows.iter().any(|(k, _)| *k == p.flow))
        .collect();
    // Causes by frequency: the most frequent gets the first style.
    let mut counts = [0u64; CAUSES];
    for p in &drawn {
        counts[p.cause] += 1;
    }
    let mut causes: Vec<usize> = (0..CAUSES).filter(|&c| counts[c] > 0).collect();
    causes.sort_by(|a, b| counts[*b].cmp(&counts[*a]).then(a.cmp(b)));
    let style_of = |cause: usize| style(causes.iter().position(|&c| c == cause).unwrap_or(0));

    let t0 = drawn.iter().map(|p| p.t_ns).min().unwrap_or(0);
    let ms = |t_ns: u64| (t_ns - t0) as f64 / 1e6;
    let y_max = drawn.iter().map(|p| p.frames).max().unwrap_or(1).max(4);
    let y_range = 0u32..y_max + y_max / 8 + 1;

    let height = HEADER + PANEL * flows.len().max(1) as u32 + AXIS;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let (header, rest) = root.split_vertically(HEADER);
        let (body, _) = rest.split_vertically(PANEL * flows.len().max(1) as u32 + AXIS);

        let title = format!("lro explain: {} ({} flows)", pic.title, flows.len());
        header
            .draw(&Text::new(title, (12, 8), ("sans-serif", 18).into_font()))
            .map_err(draw_error)?;
        header
            .draw(&Text::new(
                "each marker is a frame delivered up: when it was delivered (x), how many input frames it holds (y), why its segment ended (shape and colour)",
                (12, 32),
                ("sans-serif", 13).into_font().color(&RGBColor(60, 60, 60)),
            ))
            .map_err(draw_error)?;
        // The legend, wrapped over as many lines as it needs.
        let (mut x, mut y) = (18i32, 62i32);
        for (i, &c) in causes.iter().enumerate() {
            let label = format!("{} ({})", cause_name(c), counts[c]);
            let w = 22 + 7 * label.len() as i32;
            if x + w > WIDTH as i32 - 10 {
                x = 18;
                y += 18;
            }
            let (shape, colour) = style(i);
            marker(&header, shape, colour, (x, y))?;
            header
                .draw(&Text::new(
                    label,
                    (x + 10, y - 7),
                    ("sans-serif", 13).into_font(),
                ))
                .map_err(draw_error)?;
            x += w + 12;
        }

        let last = flows.len().saturating_sub(1);
        let mut areas = Vec::new();
        let mut area = body;
        for i in 0..flows.len() {
            if i == last {
                areas.push(area.clone());
                break;
            }
            let (top, bottom) = area.split_vertically(PANEL);
            areas.push(top);
            area = bottom;
        }
        for (i, ((key, caption), area)) in flows.iter().zip(&areas).enumerate() {
            // Each panel spans its own flow's deliveries: flows of one capture can be far
            // apart in time, and a shared axis would squeeze each into a sliver.
            let times = || drawn.iter().filter(|p| p.flow == *key).map(|p| ms(p.t_ns));
            let (lo, hi) = (
                times().fold(f64::INFINITY, f64::min),
                times().fold(f64::NEG_INFINITY, f64::max),
            );
            let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 0.0) };
            let pad = ((hi - lo) * 0.02).max(1e-3);
            let mut chart = ChartBuilder::on(area)
                .caption(caption, ("sans-serif", 13))
                .margin_left(8)
                .margin_right(16)
                .margin_top(2)
                .x_label_area_size(if i == last { TICKS + AXIS } else { TICKS })
                .y_label_area_size(44)
                .build_cartesian_2d(lo - pad..hi + pad, y_range.clone())
                .map_err(draw_error)?;
            let mut mesh = chart.configure_mesh();
            mesh.y_labels(4)
                .x_labels(8)
                .y_desc("frames")
                .light_line_style(WHITE.mix(0.0))
                .bold_line_style(RGBColor(225, 225, 225));
            if i == last {
                mesh.x_desc("capture time (ms) since the first delivery; each panel spans its flow's deliveries");
            }
            mesh.draw().map_err(draw_error)?;
            let mine: Vec<(f64, u32, Shape, RGBColor)> = drawn
                .iter()
                .filter(|p| p.flow == *key)
                .map(|p| {
                    let (shape, colour) = style_of(p.cause);
                    (ms(p.t_ns), p.frames, shape, colour)
                })
                .collect();
            let of = |want: fn(Shape) -> bool| {
                mine.iter()
                    .filter(move |m| want(m.2))
                    .map(|&(x, y, _, c)| ((x, y), c))
            };
            let r = 4;
            chart
                .draw_series(of(|s| matches!(s, Shape::Circle)).map(|(at, c)| {
                    EmptyElement::at(at) + Circle::new((0, 0), r, c.mix(0.75).filled())
                }))
                .map_err(draw_error)?;
            chart
                .draw_series(of(|s| matches!(s, Shape::Triangle)).map(|(at, c)| {
                    EmptyElement::at(at) + TriangleMarker::new((0, 0), r + 1, c.mix(0.75).filled())
                }))
                .map_err(draw_error)?;
            chart
                .draw_series(of(|s| matches!(s, Shape::Square)).map(|(at, c)| {
                    EmptyElement::at(at)
                        + Rectangle::new([(1 - r, 1 - r), (r - 1, r - 1)], c.mix(0.75).filled())
                }))
                .map_err(draw_error)?;
            chart
                .draw_series(
                    of(|s| matches!(s, Shape::Cross)).map(|(at, c)| {
                        EmptyElement::at(at) + Cross::new((0, 0), r, c.stroke_width(2))
                    }),
                )
                .map_err(draw_error)?;
        }
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// Draws `pic` into `path` (`-`: standard output), as safely as `replay -o` writes.
pub(crate) fn write(path: &Path, pic: &Picture<'_>) -> Result<Drawn> {
    let svg = render(pic)?;
    let mut out = OutFile::open(path, pic.input, pic.title, "an SVG picture")?;
    let name = out.name().to_string();
    let to_stdout = out.is_stdout();
    out.write_all(svg.as_bytes())
        .map_err(|e| OutputError(format!("{name}: cannot write: {e}")))?;
    out.commit()?;
    Ok(Drawn {
        name,
        flows: pic.flows.len().min(MAX_FLOWS),
        to_stdout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The circles drawn in `svg` in the first style's colour below the header (the legend's
    /// own marker left out): `(cx, cy)` of each, left to right.
    fn markers(svg: &str) -> Vec<(f64, f64)> {
        let doc = roxmltree::Document::parse(svg).expect("well-formed XML");
        let blue = format!(
            "#{:02X}{:02X}{:02X}",
            COLOURS[0].0, COLOURS[0].1, COLOURS[0].2
        );
        let num = |n: &roxmltree::Node<'_, '_>, a: &str| -> f64 {
            n.attribute(a).and_then(|v| v.parse().ok()).expect(a)
        };
        let mut at: Vec<(f64, f64)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some(&blue))
            .map(|n| (num(&n, "cx"), num(&n, "cy")))
            .filter(|&(_, y)| y > f64::from(HEADER))
            .collect();
        at.sort_by(|a, b| a.0.total_cmp(&b.0));
        at
    }

    /// Each marker sits as high as the input frames it stands for, on a linear scale, and as
    /// far right as its delivery time, on a linear scale.
    #[test]
    fn a_marker_is_as_high_as_its_frames_and_placed_at_its_time() {
        let frames = [1u32, 10, 40, 20, 2];
        let points: Vec<Point> = frames
            .iter()
            .enumerate()
            .map(|(i, &n)| Point {
                t_ns: 5_000_000 + 1_000_000 * i as u64,
                flow: None,
                frames: n,
                cause: 3,
            })
            .collect();
        let flows = [(None, "other frames".to_string())];
        let svg = render(&Picture {
            title: "test",
            flows: &flows,
            points: &points,
            input: None,
        })
        .expect("drawn");
        let at = markers(&svg);
        assert_eq!(at.len(), frames.len(), "one marker per delivery: {at:?}");
        // Pixels per frame, from the lowest and the highest marker (y grows downwards).
        let (y1, y40) = (at[0].1, at[2].1);
        let per_frame = (y1 - y40) / 39.0;
        assert!(per_frame > 1.0, "40 frames drawn no higher than 1: {at:?}");
        for (&(_, y), &n) in at.iter().zip(&frames) {
            let want = y1 - per_frame * f64::from(n - 1);
            assert!(
                (y - want).abs() <= 1.5,
                "{n} frames at y {y}, not {want}: {at:?}"
            );
        }
        // One millisecond apart each: equal steps to the right.
        let step = (at[4].0 - at[0].0) / 4.0;
        assert!(step > 10.0, "{at:?}");
        for (i, &(x, _)) in at.iter().enumerate() {
            let want = at[0].0 + step * i as f64;
            assert!(
                (x - want).abs() <= 1.5,
                "delivery {i} at x {x}, not {want}: {at:?}"
            );
        }
    }
}
