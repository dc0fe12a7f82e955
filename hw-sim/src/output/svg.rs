//! SVG plots (plotters, SVG backend, no fonts needed): goodput over time with the failure
//! marked, and the FCT CDF, one line per transport that ran; one NIC's utilisation over time.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::core::time::Time;

use super::Outcome;

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: cannot draw: {e}", path.display())
}

/// A chart whose axes both carry `f64` (linear or logarithmic).
type Chart<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// Draws `pts` as a labelled line in `style`, with its legend entry.
fn line<X, Y>(
    chart: &mut Chart<'_, '_, X, Y>,
    path: &Path,
    name: &str,
    pts: impl IntoIterator<Item = (f64, f64)>,
    style: ShapeStyle,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(LineSeries::new(pts, style))
        .map_err(|e| err(path, e))?
        .label(name)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
    Ok(())
}

/// The `i`-th series' colour, two pixels wide.
fn nth_style(i: usize) -> ShapeStyle {
    COLORS[i % COLORS.len()].stroke_width(2)
}

/// Draws the legend box at `pos`.
fn legend<'a, 'b: 'a, X, Y>(
    chart: &mut Chart<'a, 'b, X, Y>,
    path: &Path,
    pos: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))
}

/// Writes `throughput.svg` and `fct_cdf.svg` into `dir` (created if needed); returns the paths.
///
/// # Errors
/// A message naming the file that could not be written.
pub fn write_plots(
    dir: &Path,
    title: &str,
    outcomes: &[Outcome],
    failure_at: Option<Time>,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let t = dir.join("throughput.svg");
    throughput(&t, title, outcomes, failure_at)?;
    let c = dir.join("fct_cdf.svg");
    fct_cdf(&c, title, outcomes)?;
    Ok(vec![t, c])
}

/// Aggregate goodput (placed payload, Gb/s) over simulated time.
fn throughput(
    path: &Path,
    title: &str,
    outcomes: &[Outcome],
    failure_at: Option<Time>,
) -> Result<(), String> {
    let lines: Vec<(&str, Vec<(f64, f64)>)> = outcomes
        .iter()
        .filter(|o| o.result.is_ok())
        .map(|o| (o.name, o.series.goodput_gbps()))
        .collect();
    // Up to a little past the last transport that completed (a run that hit its time limit
    // would squash the rest), and at least twice the failure time.
    let end = lines
        .iter()
        .flat_map(|(_, v)| v.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let done = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok())
        .filter(|r| r.completed == r.hosts)
        .map(|r| r.completion.as_ps() as f64 / 1e6 * 1.1)
        .fold(0.0f64, f64::max);
    let fail = failure_at.map_or(0.0, |f| f.as_ps() as f64 / 1e6 * 2.0);
    let x_max = if done > 0.0 {
        done.max(fail).min(end)
    } else {
        end
    };
    let lines: Vec<(&str, Vec<(f64, f64)>)> = lines
        .into_iter()
        .map(|(n, v)| (n, v.into_iter().filter(|p| p.0 <= x_max).collect()))
        .collect();
    let y_max = lines
        .iter()
        .flat_map(|(_, v)| v.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: goodput over time"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("simulated time (us)")
        .y_desc("goodput, all hosts (Gb/s)")
        .draw()
        .map_err(|e| err(path, e))?;
    if let Some(f) = failure_at {
        let x = f.as_ps() as f64 / 1e6;
        if x <= x_max {
            let style = BLACK.mix(0.5).into();
            line(
                &mut chart,
                path,
                "link failure",
                [(x, 0.0), (x, y_max)],
                style,
            )?;
        }
    }
    for (i, (name, pts)) in lines.iter().enumerate() {
        line(&mut chart, path, name, pts.iter().copied(), nth_style(i))?;
    }
    legend(&mut chart, path, SeriesLabelPosition::MiddleRight)?;
    root.present().map_err(|e| err(path, e))
}

/// The CDF of completed flows' FCTs.
fn fct_cdf(path: &Path, title: &str, outcomes: &[Outcome]) -> Result<(), String> {
    let lines: Vec<(&str, Vec<(f64, f64)>)> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok().map(|r| (o.name, r)))
        .map(|(name, r)| {
            let n = r.hosts.max(1) as f64;
            let pts = r
                .fcts
                .iter()
                .enumerate()
                .map(|(i, d)| (d.as_ps() as f64 / 1e6, (i + 1) as f64 / n))
                .collect();
            (name, pts)
        })
        .collect();
    // Log scale: a run stuck until its time limit would squash the others on a linear axis.
    let xs = || lines.iter().flat_map(|(_, v)| v.iter().map(|p| p.0));
    let x_max = xs().fold(1.0f64, f64::max) * 1.2;
    let x_min = xs().fold(x_max, f64::min).max(0.01) / 1.2;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title}: flow completion times"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min..x_max).log_scale(), 0.0..1.0)
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("flow completion time (us, log scale)")
        .y_desc("fraction of flows completed")
        .draw()
        .map_err(|e| err(path, e))?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        // A step function: each flow adds 1/n at its FCT.
        let mut steps = Vec::with_capacity(pts.len() * 2 + 1);
        let mut prev = 0.0;
        for &(x, y) in pts {
            steps.push((x, prev));
            steps.push((x, y));
            prev = y;
        }
        line(&mut chart, path, name, steps, nth_style(i))?;
    }
    legend(&mut chart, path, SeriesLabelPosition::LowerRight)?;
    root.present().map_err(|e| err(path, e))
}

/// One NIC's hardware over time ([`super::NicSeries`]): a panel per transport that recorded
/// it, each series' busy fraction per sample interval (the PCIe link's directions, and any
/// other part the NIC reports). Transports without the MRC NIC model (`roce-ecmp`) have no
/// panel.
///
/// # Errors
/// A message naming the file that could not be written, or saying no transport recorded the
/// NIC.
pub fn nic_plot(path: &Path, title: &str, outcomes: &[Outcome]) -> Result<(), String> {
    let runs: Vec<(&str, &super::NicSeries)> = outcomes
        .iter()
        .filter(|o| o.result.is_ok())
        .filter_map(|o| o.series.nic.as_ref().map(|n| (o.name, n)))
        .filter(|(_, n)| !n.names.is_empty())
        .collect();
    let Some(host) = runs.first().map(|r| r.1.host) else {
        return Err(format!(
            "{}: no transport ran the MRC NIC model on that host (is it below the host count?)",
            path.display()
        ));
    };
    let rows = runs.len() as u32;
    let root = SVGBackend::new(path, (900, 80 + 320 * rows)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let root = root
        .titled(
            &format!("{title}: NIC of host {host}, utilisation over time"),
            ("sans-serif", 20),
        )
        .map_err(|e| err(path, e))?;
    for (area, (name, nic)) in root.split_evenly((runs.len(), 1)).iter().zip(&runs) {
        let lines = nic.utilisation();
        let x_max = lines
            .iter()
            .flat_map(|(_, v)| v.iter().map(|p| p.0))
            .fold(1.0f64, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(*name, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..1.05)
            .map_err(|e| err(path, e))?;
        chart
            .configure_mesh()
            .x_desc("simulated time (us)")
            .y_desc("busy fraction")
            .draw()
            .map_err(|e| err(path, e))?;
        for (i, (series, pts)) in lines.iter().enumerate() {
            line(&mut chart, path, series, pts.iter().copied(), nth_style(i))?;
        }
        legend(&mut chart, path, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(|e| err(path, e))
}

/// A value read from a bench row.
type Pick = fn(&super::bench::Row) -> Option<f64>;
/// A panel: title, y axis, named series.
type Panel = (&'static str, &'static str, Vec<(&'static str, Pick)>);

/// The cost of `mrc-sim bench` against fabric size, three log-log panels: CPU seconds per run,
/// CPU nanoseconds per event and per data packet, and peak RSS, of the flow hosts' sizes.
/// Rows that did not run are left out.
///
/// # Errors
/// A message naming the file that could not be written.
pub fn bench_plot(path: &Path, rows: &[super::bench::Row]) -> Result<(), String> {
    // (cost against size is the flow hosts' line; the full loop's one size is in the JSON)
    let ok: Vec<&super::bench::Row> = rows
        .iter()
        .filter(|r| r.error.is_none() && r.cost.cpu_s.is_some() && r.host != "driver")
        .collect();
    let panels: [Panel; 3] = [
        (
            "CPU time per run",
            "CPU seconds",
            vec![("CPU s", |r| r.cost.cpu_s)],
        ),
        (
            "CPU time per unit of work",
            "CPU ns",
            vec![
                ("per event", |r| {
                    r.cost.cpu_s.map(|c| c * 1e9 / r.cost.events.max(1) as f64)
                }),
                ("per data packet", |r| {
                    r.cost
                        .cpu_s
                        .map(|c| c * 1e9 / r.cost.data_packets.max(1) as f64)
                }),
            ],
        ),
        (
            "Peak memory",
            "peak RSS (MiB)",
            vec![("peak RSS", |r| r.cost.peak_rss_mb())],
        ),
    ];
    let root = SVGBackend::new(path, (1500, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let root = root
        .titled(
            "mrc-sim bench: cost against fabric size (mrc, permutation)",
            ("sans-serif", 20),
        )
        .map_err(|e| err(path, e))?;
    let x_min = ok
        .iter()
        .map(|r| f64::from(r.hosts))
        .fold(f64::MAX, f64::min);
    let x_max = ok.iter().map(|r| f64::from(r.hosts)).fold(1.0, f64::max);
    let (x_min, x_max) = if ok.is_empty() {
        (100.0, 1e6)
    } else {
        (x_min / 1.5, x_max * 1.5)
    };
    for (area, (title, y_desc, series)) in root.split_evenly((1, 3)).iter().zip(panels) {
        let pts: Vec<Vec<(f64, f64)>> = series
            .iter()
            .map(|(_, pick)| {
                ok.iter()
                    .filter_map(|r| pick(r).map(|y| (f64::from(r.hosts), y)))
                    .filter(|p| p.1 > 0.0)
                    .collect()
            })
            .collect();
        let ys = || pts.iter().flatten().map(|p| p.1);
        let y_max = ys().fold(1e-3, f64::max) * 2.0;
        let y_min = ys().fold(y_max, f64::min) / 2.0;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())
            .map_err(|e| err(path, e))?;
        chart
            .configure_mesh()
            .x_desc("hosts (log scale)")
            .y_desc(y_desc)
            .draw()
            .map_err(|e| err(path, e))?;
        for (i, ((name, _), p)) in series.iter().zip(&pts).enumerate() {
            line(&mut chart, path, name, p.iter().copied(), nth_style(i))?;
            let c = COLORS[i % COLORS.len()];
            chart
                .draw_series(p.iter().map(|&xy| Circle::new(xy, 4, c.filled())))
                .map_err(|e| err(path, e))?;
        }
        legend(&mut chart, path, SeriesLabelPosition::UpperLeft)?;
    }
    root.present().map_err(|e| err(path, e))
}
