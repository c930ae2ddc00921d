use slotguard::scheduled;

#[scheduled("0 2 * * *", name = "")]
async fn empty() {}

#[scheduled("0 2 * * *", name = "   ")]
async fn blank() {}

fn main() {}
