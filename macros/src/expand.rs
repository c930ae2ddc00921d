//! Code generation for `#[scheduled]`.
//!
//! For a valid `async fn f` the output is the function exactly as written, a hidden braced struct `f`
//! (it lives only in the type namespace, so it does not clash with the function) implementing
//! `slotguard::ScheduledJob`, and an `inventory` submission for `SchedulerBuilder::discover`.
//!
//! On any error the output is the function exactly as written, one `compile_error!` per problem
//! spanned at the offending token, and (when the function can carry one) a placeholder struct, so that
//! editors keep resolving the function and `jobs![f]` while the attribute is being fixed.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Attribute, FnArg, ItemFn, LitStr, ReturnType, Visibility};

use slotguard_cron::DstPolicy;

use crate::args::calendar::adjust_variant;
use crate::args::{self, Args, Errors};

pub(crate) fn scheduled(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let args = args::parse(attr).map_err(|e| errors.push(e)).ok();

    let function = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            // An item that is not a function gets our error; a function with a syntax error in it
            // gets none, because the compiler reports the syntax error when it reads `item` back.
            if let Some(span) = not_a_function(&item) {
                errors.push(syn::Error::new(
                    span,
                    "`#[scheduled]` goes on an `async fn` with a body",
                ));
            }
            return match errors.finish() {
                Ok(()) => item,
                Err(e) => with_errors(item, e, None),
            };
        }
    };

    check_signature(&function, &mut errors);
    if let Some(args) = &args
        && args.name.is_none()
    {
        let ident = &function.sig.ident;
        if let Err(e) = args::check_name(&ident.unraw().to_string()) {
            errors.push(syn::Error::new(ident.span(), e));
        }
    }

    match (args, errors.finish()) {
        (Some(args), Ok(())) => generate(item, &function, &args),
        (_, Err(e)) => with_errors(item, e, placeholder(&function)),
        (None, Ok(())) => unreachable!("arguments that failed to parse reported an error"),
    }
}

/// The span of an item's keyword (`struct`, `impl`, ...) when the item parses and is not a function.
fn not_a_function(item: &TokenStream) -> Option<Span> {
    match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Fn(_)) | Err(_) => None,
        Ok(_) => {
            let keyword = |input: ParseStream| {
                Attribute::parse_outer(input)?;
                input.parse::<Visibility>()?;
                let span = input.cursor().token_tree().map(|(tree, _)| tree.span());
                input.parse::<TokenStream>()?;
                Ok(span)
            };
            Some(
                keyword
                    .parse2(item.clone())
                    .ok()
                    .flatten()
                    .unwrap_or_else(Span::call_site),
            )
        }
    }
}

/// What the scheduler cannot call: a plain `fn`, an `unsafe fn`, a generic fn, a method, or a fn
/// with more than the one `JobContext` parameter.
fn check_signature(function: &ItemFn, errors: &mut Errors) {
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            format!(
                "`#[scheduled]` functions must be `async`: write `async fn {}`",
                sig.ident
            ),
        ));
    }
    if let Some(token) = &sig.unsafety {
        errors.push(syn::Error::new(
            token.span,
            "`#[scheduled]` functions cannot be `unsafe`: the scheduler calls them with no way to \
             uphold their safety contract",
        ));
    }
    if !sig.generics.params.is_empty() {
        errors.push(syn::Error::new_spanned(
            &sig.generics,
            "`#[scheduled]` functions cannot be generic: the scheduler calls them with no type \
             arguments",
        ));
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.push(syn::Error::new_spanned(
            clause,
            "`#[scheduled]` functions cannot have a `where` clause",
        ));
    }
    for input in &sig.inputs {
        if let FnArg::Receiver(receiver) = input {
            errors.push(syn::Error::new_spanned(
                receiver,
                "`#[scheduled]` goes on a free function, not a method: move it out of the `impl` \
                 block",
            ));
        }
    }
    if sig.inputs.len() > 1 {
        let extra: TokenStream = sig
            .inputs
            .pairs()
            .skip(1)
            .map(|pair| pair.into_value().to_token_stream())
            .collect();
        errors.push(syn::Error::new_spanned(
            extra,
            "`#[scheduled]` functions take at most one parameter, the `JobContext`",
        ));
    }
}

fn generate(item: TokenStream, function: &ItemFn, args: &Args) -> TokenStream {
    let ident = &function.sig.ident;
    let vis = &function.vis;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&ident.unraw().to_string(), ident.span()));
    let cron = &args.cron;

    // `ctx` is hygienic (mixed-site), so a function that happens to be called `ctx` still resolves.
    // The body's trait bounds (`Send`, `'static`, `IntoJobResult` of its output) are checked by
    // `Job::new`. Spanning the call at the return type (or at the name, for `()`) points those errors
    // at the function instead of at the attribute.
    let bounds_span = match &function.sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => ident.span(),
    };
    let body = match function.sig.inputs.first() {
        None => quote_spanned!(bounds_span=> |_: ::slotguard::JobContext| #ident()),
        Some(param) => {
            let ctx = Ident::new("ctx", Span::mixed_site().located_at(bounds_span));
            // Located at the parameter's type, so a parameter of the wrong type is reported there.
            let at = match param {
                FnArg::Typed(typed) => typed.ty.span(),
                FnArg::Receiver(receiver) => receiver.span(),
            };
            let arg = Ident::new("ctx", Span::mixed_site().located_at(at));
            quote_spanned!(bounds_span=> |#ctx: ::slotguard::JobContext| #ident(#arg))
        }
    };
    let new = quote_spanned!(bounds_span=> ::slotguard::Job::new(#name, #cron, #body));
    let tz = args.tz.as_ref().map(|tz| quote!(.tz(#tz)));
    let guard = args.guard.map(|guard| {
        let variant = Ident::new(guard.value.variant(), guard.span);
        quote!(.guard(::slotguard::GuardLevel::#variant))
    });
    let dst = args.dst.map(|dst| {
        let variant = Ident::new(dst_variant(dst.value), dst.span);
        quote!(.dst(::slotguard::DstPolicy::#variant))
    });
    let lock_key = args.lock_key.map(|key| {
        let mut literal = Literal::i64_suffixed(key.value);
        literal.set_span(key.span);
        quote!(.lock_key(#literal))
    });
    let calendar = calendar_calls(args);
    let monitor = args.monitor.as_ref().map(|expr| quote!(.monitor(#expr)));

    let cfg = cfg_attrs(function);

    quote! {
        #item

        #(#cfg)*
        #[allow(non_camel_case_types, dead_code)]
        #[doc(hidden)]
        #vis struct #ident {}

        #(#cfg)*
        #[allow(deprecated)]
        impl ::slotguard::ScheduledJob for #ident {
            fn job() -> ::slotguard::Job {
                // One definition per process: the same function listed with `jobs![..]` and found by
                // `.discover()` shares one handler, which is how the builder recognises it as one job.
                static __SLOTGUARD_JOB: ::std::sync::OnceLock<::slotguard::Job> =
                    ::std::sync::OnceLock::new();
                ::std::clone::Clone::clone(__SLOTGUARD_JOB.get_or_init(|| {
                    #new
                        #tz #guard #dst #lock_key #calendar #monitor
                }))
            }
        }

        #(#cfg)*
        ::slotguard::__private::inventory::submit! {
            ::slotguard::__private::Registration(<#ident as ::slotguard::ScheduledJob>::job)
        }
    }
}

/// `.calendar(..)`, `.adjust(..)` and `.shift(..)`, for the keys that were written.
fn calendar_calls(args: &Args) -> TokenStream {
    let calendar = args.calendar.as_ref().map(|name| quote!(.calendar(#name)));
    let adjust = args.adjust.map(|adjust| {
        let variant = Ident::new(adjust_variant(adjust.value), adjust.span);
        quote!(.adjust(::slotguard::Adjust::#variant))
    });
    let shift = args.shift.map(|shift| {
        // In range: `args` checked it against `MAX_SHIFT`.
        let mut literal = Literal::i32_suffixed(shift.value as i32);
        literal.set_span(shift.span);
        quote!(.shift(#literal))
    });
    quote!(#calendar #adjust #shift)
}

/// The function's `#[cfg(..)]` attributes (those written below `#[scheduled]`), repeated on every
/// generated item so that the job disappears together with the function.
fn cfg_attrs(function: &ItemFn) -> Vec<&Attribute> {
    function
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .collect()
}

fn dst_variant(policy: DstPolicy) -> &'static str {
    match policy {
        DstPolicy::Vixie => "Vixie",
        DstPolicy::Skip => "Skip",
        DstPolicy::Shift => "Shift",
        DstPolicy::Instant => "Instant",
    }
}

/// A stand-in for the job type while the attribute has errors, so that `jobs![f]` elsewhere does not
/// add errors of its own. Never for methods: a struct cannot be declared inside an `impl` block.
fn placeholder(function: &ItemFn) -> Option<TokenStream> {
    if matches!(function.sig.inputs.first(), Some(FnArg::Receiver(_))) {
        return None;
    }
    let ident = &function.sig.ident;
    let vis = &function.vis;
    let cfg = cfg_attrs(function);
    Some(quote! {
        #(#cfg)*
        #[allow(non_camel_case_types, dead_code)]
        #[doc(hidden)]
        #vis struct #ident {}

        #(#cfg)*
        impl ::slotguard::ScheduledJob for #ident {
            fn job() -> ::slotguard::Job {
                ::core::unreachable!("`#[scheduled]` reported an error at compile time")
            }
        }
    })
}

fn with_errors(
    item: TokenStream,
    errors: syn::Error,
    placeholder: Option<TokenStream>,
) -> TokenStream {
    let errors = errors.to_compile_error();
    quote! {
        #errors
        #item
        #placeholder
    }
}
