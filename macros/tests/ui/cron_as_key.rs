use slotguard::scheduled;

#[scheduled(cron = "0 2 * * *")]
async fn keyed() {}

#[scheduled(cron = "0 2 * * *", tz = "Asia/Seoul")]
async fn keyed_then_zone() {}

fn main() {}
