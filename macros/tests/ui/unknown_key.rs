use slotguard::scheduled;

#[scheduled("0 2 * * *", timezone = "Asia/Seoul")]
async fn alias() {}

#[scheduled("0 2 * * *", gaurd = slot)]
async fn typo() {}

#[scheduled("0 2 * * *", retries = 3)]
async fn unknown() {}

fn main() {}
