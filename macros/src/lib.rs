//! The `#[scheduled]` attribute (placeholder while it is being written).
