//! The charts of a sweep, as SVG line charts (plotters' SVG backend only: no
//! fonts or bitmaps to ship), and the CSV they are drawn from.

use std::path::Path;

use anyhow::{anyhow, Context};
use plotters::prelude::*;

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// (x, y) points, drawn in x order.
    pub points: Vec<(i64, f64)>,
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
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (xmin, xmax) = xs.fold((i64::MAX, i64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (xmin, xmax) = if xmin > xmax {
        (0, 1)
    } else if xmin == xmax {
        (xmin - 1, xmax + 1)
    } else {
        (xmin, xmax)
    };
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let mut distinct: Vec<i64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();

    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 24))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(90)
            .build_cartesian_2d(xmin..xmax, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_labels(distinct.len().max(12))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut points = s.points.clone();
            points.sort_by_key(|p| p.0);
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(s.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))
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
