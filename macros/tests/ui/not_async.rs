use slotguard::{JobContext, scheduled};

#[scheduled("0 2 * * *")]
fn daily_settlement(_ctx: JobContext) {}

fn main() {
    // The function is still emitted exactly as written, so this is not a second error.
    let _callable: fn(JobContext) = daily_settlement;
}
