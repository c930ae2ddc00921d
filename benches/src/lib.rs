//! Benchmarks live under `benches/`; this library holds what several of them read.

/// Resident memory of this process, in bytes (`/proc/self/statm`, Linux; 0 elsewhere).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// User + system CPU time of this process, in clock ticks (1/100 s on Linux; 0 elsewhere).
pub fn cpu_ticks() -> u64 {
    ticks_of(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default())
}

/// User + system CPU time in a `/proc/<pid>/stat` line, in clock ticks.
pub fn ticks_of(stat: &str) -> u64 {
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11).and_then(|s| s.parse().ok()).unwrap_or(0);
    let stime: u64 = fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
    utime + stime
}

/// The bench's own arguments (those after `--`, without the `--bench` cargo adds).
pub fn bench_args() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect()
}

/// The `q` quantile (nearest rank) of sorted values; NaN when there are none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
