//! The charts of a sweep, as SVG line charts (plotters' SVG backend only: no
//! fonts or bitmaps to ship), one or several panels side by side on a linear or
//! logarithmic x axis, and the CSV they are drawn from.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (x, y) points, drawn in x order.
    pub points: Vec<(i64, f64)>,
}

/// How the x axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XScale {
    /// Even steps (threads).
    Linear,
    /// Each factor of ten the same width: concurrency swept as 1, 10, 100, 1000
    /// spreads out instead of crowding the low end.
    Log,
}

/// One chart of a figure: its title, y axis and lines.
#[derive(Clone, Copy, Debug)]
pub struct Panel<'a> {
    /// Caption above the chart.
    pub title: &'a str,
    /// Y axis description.
    pub y_label: &'a str,
    /// The lines; a label ending in " p99" gets triangle markers, others circles.
    pub series: &'a [Series],
}

/// Draws `series` as lines with markers on integer x (threads, connections,
/// depth) against y from zero, with a legend, into an SVG file.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let panel = Panel {
        title,
        y_label,
        series,
    };
    panels_chart(path, x_label, XScale::Linear, &[panel])
}

/// Draws `panels` side by side in one SVG file, sharing the x axis description
/// and scale (throughput beside latency, against the same concurrency).
pub fn panels_chart(
    path: &Path,
    x_label: &str,
    scale: XScale,
    panels: &[Panel<'_>],
) -> anyhow::Result<()> {
    let xs = panels
        .iter()
        .flat_map(|p| p.series.iter())
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let (xmin, xmax) = xs.fold((i64::MAX, i64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let mut distinct: Vec<i64> = panels
        .iter()
        .flat_map(|p| p.series.iter())
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    let width = 960 * panels.len().max(1) as u32;
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (width, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (area, panel) in areas.iter().zip(panels) {
            match scale {
                XScale::Linear => {
                    let (lo, hi) = if xmin > xmax {
                        (0, 1)
                    } else if xmin == xmax {
                        (xmin - 1, xmax + 1)
                    } else {
                        (xmin, xmax)
                    };
                    let labels = distinct.len().max(12);
                    draw_panel(area, panel, x_label, lo..hi, labels, |x| x, &|x| {
                        x.to_string()
                    })?;
                }
                XScale::Log => {
                    // Positive x only; a margin of a quarter decade each side
                    // keeps the end markers off the frame.
                    let lo = if xmin > xmax { 1.0 } else { xmin.max(1) as f64 };
                    let hi = if xmin > xmax {
                        10.0
                    } else {
                        xmax.max(1) as f64
                    };
                    // Ticks at the values swept, not only at powers of ten.
                    let ticks = distinct.iter().map(|&x| x as f64).collect();
                    let range = (lo / 1.8..hi * 1.8).log_scale().with_key_points(ticks);
                    let format = |x: &f64| format!("{x:.0}");
                    draw_panel(area, panel, x_label, range, 12, |x| x as f64, &format)?;
                }
            }
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))
}

/// One panel on `area`: mesh, lines with markers, legend. `to_x` maps a
/// point's x into the axis' value type.
fn draw_panel<X, V>(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    panel: &Panel<'_>,
    x_label: &str,
    x_spec: X,
    x_labels: usize,
    to_x: fn(i64) -> V,
    x_format: &dyn Fn(&V) -> String,
) -> Result<(), Box<dyn std::error::Error>>
where
    X: AsRangedCoord<Value = V>,
    X::CoordDescType: ValueFormatter<V>,
    V: Clone + 'static,
{
    let ymax = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(panel.title, ("sans-serif", 24))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(x_spec, 0f64..ymax)?;
    let decimals = if ymax < 10.0 { 2 } else { 0 };
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(panel.y_label)
        .x_labels(x_labels)
        .x_label_formatter(x_format)
        .y_label_formatter(&|y| format!("{y:.decimals$}"))
        .draw()?;
    // A target keeps its colour across panels: its p50 and p99 share the
    // colour of its throughput line.
    let mut targets: Vec<&str> = Vec::new();
    for s in panel.series {
        let t = target_of(&s.label);
        if !targets.contains(&t) {
            targets.push(t);
        }
    }
    for s in panel.series {
        let t = target_of(&s.label);
        let colour_index = targets.iter().position(|&x| x == t).unwrap_or(0);
        let color = Palette99::pick(colour_index).to_rgba();
        let mut points = s.points.clone();
        points.sort_by_key(|p| p.0);
        let points: Vec<(V, f64)> = points.into_iter().map(|(x, y)| (to_x(x), y)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        if s.label.ends_with(" p99") {
            chart.draw_series(
                points
                    .iter()
                    .map(|p| TriangleMarker::new(p.clone(), 6, color.filled())),
            )?;
        } else {
            chart.draw_series(
                points
                    .iter()
                    .map(|p| Circle::new(p.clone(), 4, color.filled())),
            )?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

/// A label without its " p50" or " p99" suffix: the target the line belongs to.
fn target_of(label: &str) -> &str {
    label
        .strip_suffix(" p50")
        .or_else(|| label.strip_suffix(" p99"))
        .unwrap_or(label)
}

/// Writes a CSV file: a header line, then one line per row; fields with a
/// comma, quote or line break are quoted (RFC 4180).
pub fn write_csv(path: &Path, header: &[&str], rows: &[Vec<String>]) -> anyhow::Result<()> {
    let mut out = String::new();
    let line = |fields: &mut dyn Iterator<Item = &str>, out: &mut String| {
        let quoted: Vec<String> = fields.map(csv_field).collect();
        out.push_str(&quoted.join(","));
        out.push('\n');
    };
    line(&mut header.iter().copied(), &mut out);
    for row in rows {
        line(&mut row.iter().map(String::as_str), &mut out);
    }
    std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
}

fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_one_line_per_series_and_the_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let series = vec![
            Series {
                label: "1 connection".into(),
                points: vec![(1, 100.0), (2, 180.0), (4, 300.0)],
            },
            Series {
                label: "10 connections".into(),
                points: vec![(4, 900.0), (1, 250.0), (2, 500.0)],
            },
        ];
        line_chart(&path, "Bandwidth", "threads", "MB/s", &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.trim_end().ends_with("</svg>"));
        // Axes and ticks are 1 px wide; the data lines and legend marks 2 px.
        let wide: Vec<&str> = svg
            .lines()
            .filter(|l| l.starts_with("<polyline") && l.contains("stroke-width=\"2\""))
            .collect();
        assert_eq!(wide.len(), 2 + 2, "two lines, two legend marks: {wide:?}");
        assert_eq!(wide[0].matches(',').count(), 3, "three points: {}", wide[0]);
        assert!(svg.contains("10 connections"));
        assert!(svg.contains("Bandwidth"));
        assert!(svg.contains("threads"));
        assert_eq!(svg.matches("<circle").count(), 6);
    }

    #[test]
    fn degenerate_data_still_draws() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.svg");
        let one = vec![Series {
            label: "x".into(),
            points: vec![(5, 0.0)],
        }];
        line_chart(&path, "t", "x", "y", &one).unwrap();
        line_chart(&path, "t", "x", "y", &[]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let rows = vec![
            vec!["plain".to_string(), "1".to_string()],
            vec!["a,b".to_string(), "say \"hi\"".to_string()],
        ];
        write_csv(&path, &["name", "value"], &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "name,value\nplain,1\n\"a,b\",\"say \"\"hi\"\"\"\n");
    }
}
