use slotguard::scheduled;

#[scheduled("30 2 * * *", tz = "America/New_York", dst = sikp)]
async fn typo() {}

#[scheduled("30 2 * * *", tz = "America/New_York", dst = spring_forward)]
async fn unknown() {}

fn main() {}
