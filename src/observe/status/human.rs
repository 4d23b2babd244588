//! Numbers as people read them on the status page: `1.2k/s`, `3.4 MiB`,
//! `2 d 3 h`. The page's script formats the figures it polls with the same
//! rules (`page.html`, functions of the same names), so a value looks the same
//! before and after the first refresh.

/// At most three significant figures with an SI suffix: `950`, `1.2k`, `12k`,
/// `120k`, `1.2M`; below 10, one decimal (`0.5`, `2.5`); a trailing `.0` is dropped.
pub fn count(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        return "0".into();
    }
    const UNITS: [&str; 5] = ["", "k", "M", "G", "T"];
    let mut x = v;
    let mut unit = 0;
    while unit + 1 < UNITS.len() && round_to(x, if x < 10.0 { 1 } else { 0 }) >= 1000.0 {
        x /= 1000.0;
        unit += 1;
    }
    format!("{}{}", short(x), UNITS[unit])
}

/// One decimal below 10, none above; `.0` dropped.
fn short(x: f64) -> String {
    if round_to(x, 1) < 10.0 {
        let s = format!("{:.1}", round_to(x, 1));
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    } else {
        format!("{:.0}", x.round())
    }
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (x * f).round() / f
}

/// A rate per second: `1.2k/s`.
pub fn rate(per_s: f64) -> String {
    format!("{}/s", count(per_s))
}

/// Bytes in binary units: `512 B`, `3.4 KiB`, `12 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = n as f64;
    let mut unit = 0;
    while unit + 1 < UNITS.len() && round_to(x, if x < 10.0 { 1 } else { 0 }) >= 1024.0 {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{n} B");
    }
    format!("{} {}", short(x), UNITS[unit])
}

/// A span of whole seconds in its two largest units: `42 s`, `5 m 3 s`,
/// `3 h 4 m`, `2 d 3 h`, `3 y 12 d` (a year being 365 days).
pub fn seconds(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d >= 365 {
        format!("{} y {} d", d / 365, d % 365)
    } else if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} m")
    } else if m > 0 {
        format!("{m} m {s} s")
    } else {
        format!("{s} s")
    }
}

/// A configured interval as written in the configuration: `2s`, `500ms`.
pub fn interval(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// A latency in milliseconds: `0.42 ms`, `12 ms`, `1.2 s`; `-` when unknown.
pub fn millis(ms: Option<f64>) -> String {
    match ms {
        None => "-".into(),
        Some(v) if v >= 1000.0 => format!("{} s", short(v / 1000.0)),
        Some(v) if v < 1.0 => format!("{:.2} ms", v),
        Some(v) => format!("{} ms", short(v)),
    }
}

/// A ratio as a percentage: `0%`, `0.5%`, `12%`.
pub fn percent(ratio: f64) -> String {
    format!("{}%", short((ratio * 100.0).clamp(0.0, 100.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_rates_keep_three_figures_with_si_suffixes() {
        let cases = [
            (0.0, "0"),
            (0.04, "0"),
            (0.5, "0.5"),
            (3.0, "3"),
            (9.96, "10"),
            (950.0, "950"),
            (999.4, "999"),
            (999.6, "1k"),
            (1234.0, "1.2k"),
            (12_345.0, "12k"),
            (123_456.0, "123k"),
            (1_250_000.0, "1.3M"),
            (3.4e9, "3.4G"),
        ];
        for (v, want) in cases {
            assert_eq!(count(v), want, "{v}");
        }
        assert_eq!(rate(1234.0), "1.2k/s");
    }

    #[test]
    fn bytes_use_binary_units() {
        let shown = [0, 1023, 1024, 3_565_158, 12 * 1024 * 1024 * 1024].map(bytes);
        assert_eq!(shown, ["0 B", "1023 B", "1 KiB", "3.4 MiB", "12 GiB"]);
    }

    #[test]
    fn durations_show_their_two_largest_units() {
        let (m, h, d) = (60, 3600, 86400);
        let shown = [42, 303, 3 * h + 4 * m + 5, 2 * d + 3 * h + 59, 800 * d].map(seconds);
        assert_eq!(shown, ["42 s", "5 m 3 s", "3 h 4 m", "2 d 3 h", "2 y 70 d"]);
    }

    #[test]
    fn latencies_and_percentages() {
        assert_eq!(millis(None), "-");
        assert_eq!(millis(Some(0.421)), "0.42 ms");
        assert_eq!(millis(Some(12.3)), "12 ms");
        assert_eq!(millis(Some(2.5)), "2.5 ms");
        assert_eq!(millis(Some(1250.0)), "1.3 s");
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(0.25), "25%");
    }
}
