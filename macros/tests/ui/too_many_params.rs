use slotguard::{JobContext, scheduled};

#[scheduled("0 2 * * *")]
async fn daily_settlement(_ctx: JobContext, _retries: u32, _dry_run: bool) {}

fn main() {
    // The placeholder type keeps `jobs![..]` free of errors of its own.
    let _ = slotguard::jobs![daily_settlement];
}
