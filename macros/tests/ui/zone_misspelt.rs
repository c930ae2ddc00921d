use slotguard::{JobContext, scheduled};

#[scheduled("0 2 * * *", tz = "Asia/Seol")]
async fn daily_settlement(_ctx: JobContext) {}

#[scheduled("0 2 * * *", tz = "Middle/Earth")]
async fn nowhere() {}

fn main() {}
