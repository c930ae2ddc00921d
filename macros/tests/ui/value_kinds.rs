use slotguard::scheduled;

#[scheduled("0 2 * * *", tz = Asia / Seoul)]
async fn unquoted_zone() {}

#[scheduled("0 2 * * *", lock_key = "42")]
async fn quoted_key() {}

#[scheduled("0 2 * * *", lock_key = 9223372036854775808)]
async fn key_too_large() {}

#[scheduled("0 2 * * *", guard =)]
async fn no_value() {}

fn main() {}
