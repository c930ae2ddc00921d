use slotguard::scheduled;

#[scheduled("0 2 * * *", tz = "Asia/Seoul", guard = local, tz = "UTC")]
async fn daily() {}

fn main() {}
