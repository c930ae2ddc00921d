use slotguard::scheduled;

#[scheduled("0 2 * * *", name = "daily\0settlement")]
async fn nul() {}

#[scheduled("0 2 * * *", name = "billing:daily")]
async fn colon() {}

#[scheduled("0 2 * * *", name = "daily\nsettlement")]
async fn newline() {}

fn main() {}
