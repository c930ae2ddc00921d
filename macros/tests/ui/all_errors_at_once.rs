use slotguard::scheduled;

#[scheduled("0 25 * * *", tz = "Europe/Berln", guard = slots, name = "a:b")]
fn daily() {}

fn main() {}
