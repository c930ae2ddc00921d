use slotguard::scheduled;

#[scheduled("0 2 * *", tz = "Asia/Seoul")]
async fn daily() {}

fn main() {}
