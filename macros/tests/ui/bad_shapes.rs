use slotguard::{JobContext, scheduled};

#[scheduled("0 2 * * *")]
async fn generic<T: Send>(_ctx: JobContext) {}

#[scheduled("0 2 * * *")]
async unsafe fn dangerous() {}

struct Service;

impl Service {
    #[scheduled("0 2 * * *")]
    async fn method(&self) {}
}

#[scheduled("0 2 * * *")]
struct NotAFunction;

fn main() {}
