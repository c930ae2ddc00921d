//! A job's run durations over time: an inline SVG chart (no script, no inline style: the page's
//! Content-Security-Policy holds) of its recent finished runs, oldest on the left, each point linking
//! to its run, with the 95th percentile as a dashed line.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::page::{Base, utc};
use slotguard::store::{RunRecord, RunStatus};

/// The drawing's size in SVG units; the stylesheet scales it to the page's width.
const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 140.0;
/// Room for the labels: left of the plot, and under it.
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 18.0;
const TOP: f64 = 8.0;

/// A finished run: when its slot was, how long its last attempt took, how it ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Point {
    pub(super) slot: DateTime<Utc>,
    pub(super) partition: String,
    pub(super) millis: i64,
    pub(super) status: RunStatus,
}

/// The finished runs of `runs` (newest first, as listings are) as points, oldest first: each run's
/// last attempt that has a start and an end.
pub(super) fn points(runs: &[RunRecord]) -> Vec<Point> {
    let mut points: Vec<Point> = runs
        .iter()
        .filter_map(|run| {
            let (start, end) = run
                .attempts
                .iter()
                .rev()
                .find_map(|a| Some((a.started_at, a.finished_at?)))
                .or_else(|| Some((run.started_at?, run.finished_at?)))?;
            Some(Point {
                slot: run.key.scheduled_at,
                partition: run.key.partition.clone(),
                millis: (end - start).num_milliseconds().max(0),
                status: run.status,
            })
        })
        .collect();
    points.reverse();
    points
}

/// The 95th percentile by nearest rank: the smallest duration that at least 95 % of `millis` do not
/// exceed. `None` for no duration.
pub(super) fn p95(millis: &[i64]) -> Option<i64> {
    let mut sorted = millis.to_vec();
    sorted.sort_unstable();
    let rank = (sorted.len() * 95).div_ceil(100);
    sorted.get(rank.checked_sub(1)?).copied()
}

/// `1.2 s`, `340 ms`, `3 min`.
fn short(millis: i64) -> String {
    match millis {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 120_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms => format!("{} min", ms / 60_000),
    }
}

/// The chart of `points` (oldest first), or a line saying there is nothing to draw.
pub(super) fn draw(base: &Base, job: &str, points: &[Point]) -> Markup {
    let millis: Vec<i64> = points.iter().map(|p| p.millis).collect();
    let (Some(p95), Some(&top)) = (p95(&millis), millis.iter().max()) else {
        return html! { p.chart-empty { "No finished run to chart yet." } };
    };
    let top = top.max(1) as f64;
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / points.len() as f64;
    let y = |ms: i64| TOP + plot_h * (1.0 - ms as f64 / top);
    let line: String = points
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{:.1},{:.1}", x(i), y(p.millis)))
        .collect::<Vec<_>>()
        .join(" ");
    let (first, last) = (&points[0], &points[points.len() - 1]);
    // The p95 label sits above its line, or below it when the line is at the top.
    let label_y = if y(p95) - 12.0 < TOP {
        y(p95) + 11.0
    } else {
        y(p95) - 3.0
    };
    html! {
        svg.durations viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img"
            aria-label={ "durations of the last " (points.len()) " finished runs; p95 " (short(p95)) } {
            line.axis x1=(LEFT) y1=(TOP + plot_h) x2=(WIDTH - 8.0) y2=(TOP + plot_h) {}
            line.axis x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(TOP + plot_h) {}
            text.label x=(LEFT - 4.0) y=(TOP + 9.0) text-anchor="end" { (short(top as i64)) }
            text.label x=(LEFT - 4.0) y=(TOP + plot_h) text-anchor="end" { "0" }
            line.p95 x1=(LEFT) y1=(y(p95)) x2=(WIDTH - 8.0) y2=(y(p95)) {}
            text.label.p95 x=(WIDTH - 10.0) y=(label_y) text-anchor="end" { "p95 " (short(p95)) }
            polyline.trend points=(line) {}
            @for (i, p) in points.iter().enumerate() {
                a href=(base.run(job, &p.slot, &p.partition)) {
                    circle class={ "pt s-" (p.status.as_str()) } cx=(format!("{:.1}", x(i))) cy=(format!("{:.1}", y(p.millis))) r="3.5" {
                        title { (utc(&p.slot)) ": " (short(p.millis)) " (" (p.status.as_str()) ")" }
                    }
                }
            }
            text.label x=(LEFT) y=(HEIGHT - 4.0) { (utc(&first.slot)) }
            text.label x=(WIDTH - 8.0) y=(HEIGHT - 4.0) text-anchor="end" { (utc(&last.slot)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_is_the_nearest_rank() {
        assert_eq!(p95(&[]), None);
        assert_eq!(p95(&[7]), Some(7));
        let hundred: Vec<i64> = (1..=100).rev().collect();
        assert_eq!(p95(&hundred), Some(95));
        let twenty: Vec<i64> = (1..=20).collect();
        assert_eq!(p95(&twenty), Some(19));
        assert_eq!(p95(&[5, 1_000, 5, 5]), Some(1_000));
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short(340), "340 ms");
        assert_eq!(short(1_260), "1.3 s");
        assert_eq!(short(600_000), "10 min");
    }
}
