use slotguard::scheduled;

#[scheduled("61 * * * *")]
async fn hourly() {}

fn main() {}
