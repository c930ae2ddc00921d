use slotguard::scheduled;

#[scheduled]
async fn nothing() {}

#[scheduled(tz = "Asia/Seoul")]
async fn zone_first() {}

#[scheduled(0 2 * * *)]
async fn unquoted() {}

#[scheduled("0 2 * * *", "Asia/Seoul")]
async fn positional_zone() {}

#[scheduled("0 2 * * *", local)]
async fn bare_level() {}

fn main() {}
