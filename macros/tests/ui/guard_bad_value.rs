use slotguard::scheduled;

#[scheduled("0 2 * * *", guard = slots)]
async fn typo() {}

#[scheduled("0 2 * * *", guard = "slot")]
async fn quoted() {}

#[scheduled("0 2 * * *", guard = cluster)]
async fn unknown() {}

fn main() {}
