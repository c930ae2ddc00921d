use slotguard::{scheduled, JobContext};

#[scheduled("0 2 25 * *", calendar = "KOR", adjust = modified_folowing)]
async fn payday(_ctx: JobContext) {}

#[scheduled("0 2 25 * *", adjust = preceding, shift = -1)]
async fn no_calendar(_ctx: JobContext) {}

fn main() {}
