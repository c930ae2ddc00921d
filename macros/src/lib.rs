//! The `#[scheduled]` attribute (placeholder while it is being written).
use proc_macro::TokenStream;

/// Placeholder.
#[proc_macro_attribute]
pub fn scheduled(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
