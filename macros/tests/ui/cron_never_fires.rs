use slotguard::scheduled;

#[scheduled("0 0 30 2 *")]
async fn february_thirtieth() {}

fn main() {}
