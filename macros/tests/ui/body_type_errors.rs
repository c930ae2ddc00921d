// What the compiler, not the attribute, reports about a job body: the generated call is spanned so
// that each error lands on the parameter type, the return type or the function's name. The wording is
// rustc's and the notes quote `Job::new`, so this file changes with the toolchain and with `Job::new`.
use slotguard::{JobContext, scheduled};

#[scheduled("0 2 * * *")]
async fn wrong_param(_ctx: u32) {}

#[scheduled("0 2 * * *")]
async fn wrong_return(_ctx: JobContext) -> u32 {
    1
}

#[scheduled("0 2 * * *")]
async fn not_send(_ctx: JobContext) {
    let rc = std::rc::Rc::new(1);
    async {}.await;
    drop(rc);
}

#[scheduled("0 2 * * *")]
async fn borrowed(_ctx: &JobContext) {}

fn main() {}
