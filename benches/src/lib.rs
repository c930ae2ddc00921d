//! Benchmarks live under `benches/`.
