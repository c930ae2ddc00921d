//! Parsing and compile-time validation of the arguments of `#[scheduled(...)]`.
//!
//! The grammar is a cron string literal followed by `key = value` pairs:
//!
//! ```text
//! args  := cron ( "," pair )* ","?
//! cron  := string literal
//! pair  := key "=" value          value: every token up to the next top-level comma
//! ```
//!
//! The argument list is split at top-level commas first, and each value is then handed to its key's
//! own parser (see [`KEYS`]). So one bad value never hides the next error, an unknown key's value is
//! skipped whatever it looks like, and a key with a structured value (`catch_up = all(within = "1h")`)
//! is one more row in the table, not a change to the grammar.
//!
//! Every error is spanned at the key or the literal it is about, and all of them are reported at once.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::{Ident, LitInt, LitStr};

use slotguard_cron::{Adjust, CronExpr, DstPolicy, parse_zone};

pub(crate) mod calendar;

/// The validated arguments.
pub(crate) struct Args {
    /// The cron expression; checked with the runtime's own parser.
    pub(crate) cron: LitStr,
    /// `tz = "Area/City"`, a known IANA zone.
    pub(crate) tz: Option<LitStr>,
    /// `name = "..."`, a valid job name.
    pub(crate) name: Option<LitStr>,
    /// `guard = none | local | lock | slot`.
    pub(crate) guard: Option<Spanned<Guard>>,
    /// `dst = vixie | skip | shift | instant`.
    pub(crate) dst: Option<Spanned<DstPolicy>>,
    /// `lock_key = <i64>`.
    pub(crate) lock_key: Option<Spanned<i64>>,
    /// `calendar = "KR"`, a builtin calendar.
    pub(crate) calendar: Option<LitStr>,
    /// `adjust = preceding | following | …`.
    pub(crate) adjust: Option<Spanned<Adjust>>,
    /// `shift = <business days>`.
    pub(crate) shift: Option<Spanned<i64>>,
    /// `monitor = <expression>`: an `Arc` of a `slotguard::Monitor`, evaluated once.
    pub(crate) monitor: Option<syn::Expr>,
}

/// A value and the span of the tokens it was written as, so that generated code points back at them.
#[derive(Clone, Copy)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// The guard levels of `slotguard::GuardLevel`, spelled here because the runtime crate depends on this
/// one and not the other way round.
#[derive(Clone, Copy)]
pub(crate) enum Guard {
    None,
    Local,
    Lock,
    Slot,
}

impl Guard {
    const ALL: [(&'static str, Guard); 4] = [
        ("none", Guard::None),
        ("local", Guard::Local),
        ("lock", Guard::Lock),
        ("slot", Guard::Slot),
    ];

    /// The name of the `slotguard::GuardLevel` variant.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            Guard::None => "None",
            Guard::Local => "Local",
            Guard::Lock => "Lock",
            Guard::Slot => "Slot",
        }
    }
}

/// One `key = value` argument: its name, an example shown in errors, and its parser.
struct Key {
    name: &'static str,
    example: &'static str,
    parse: fn(&mut Fields, &Key, TokenStream) -> syn::Result<()>,
}

/// The keys, in the order the documentation lists them. A new key is a row here, a field in
/// [`Fields`] and [`Args`], and a parser function.
const KEYS: &[Key] = &[
    Key {
        name: "tz",
        example: "tz = \"Asia/Seoul\"",
        parse: parse_tz,
    },
    Key {
        name: "name",
        example: "name = \"daily-settlement\"",
        parse: parse_name,
    },
    Key {
        name: "guard",
        example: "guard = slot",
        parse: parse_guard,
    },
    Key {
        name: "dst",
        example: "dst = skip",
        parse: parse_dst,
    },
    Key {
        name: "lock_key",
        example: "lock_key = 42",
        parse: parse_lock_key,
    },
    Key {
        name: "calendar",
        example: "calendar = \"KR\"",
        parse: calendar::parse_calendar,
    },
    Key {
        name: "adjust",
        example: "adjust = preceding",
        parse: calendar::parse_adjust,
    },
    Key {
        name: "shift",
        example: "shift = -1",
        parse: calendar::parse_shift,
    },
    Key {
        name: "monitor",
        example: "monitor = monitors::sentry()",
        parse: parse_monitor,
    },
];

/// Names people reach for that mean one of [`KEYS`].
const ALIASES: &[(&str, &str)] = &[
    ("timezone", "tz"),
    ("time_zone", "tz"),
    ("zone", "tz"),
    ("job", "name"),
    ("level", "guard"),
    ("guard_level", "guard"),
    ("dst_policy", "dst"),
    ("key", "lock_key"),
    ("advisory_lock_key", "lock_key"),
    ("business_calendar", "calendar"),
    ("holidays", "calendar"),
    ("convention", "adjust"),
    ("business_day_convention", "adjust"),
    ("check_in", "monitor"),
    ("checkins", "monitor"),
    ("check_ins", "monitor"),
];

/// The arguments parsed so far.
#[derive(Default)]
struct Fields {
    tz: Option<LitStr>,
    name: Option<LitStr>,
    guard: Option<Spanned<Guard>>,
    dst: Option<Spanned<DstPolicy>>,
    lock_key: Option<Spanned<i64>>,
    calendar: Option<LitStr>,
    adjust: Option<Spanned<Adjust>>,
    shift: Option<Spanned<i64>>,
    monitor: Option<syn::Expr>,
}

/// Errors collected while parsing, reported together.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Parses and validates the attribute's arguments, reporting every problem found.
pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Args> {
    let mut errors = Errors::default();
    let mut segments = split_at_commas(tokens, &mut errors).into_iter();

    let cron = match segments.next() {
        None => {
            errors.push(syn::Error::new(
                Span::call_site(),
                "missing the cron expression: write `#[scheduled(\"0 2 * * *\")]`",
            ));
            None
        }
        Some(first) => parse_cron(first, !segments.as_slice().is_empty())
            .map_err(|e| errors.push(e))
            .ok(),
    };

    let mut fields = Fields::default();
    let mut seen: Vec<&'static str> = Vec::new();
    for segment in segments {
        if let Err(e) = parse_pair(&mut fields, &mut seen, segment) {
            errors.push(e);
        }
    }

    if let Err(e) = calendar::check_needs_calendar(&fields) {
        errors.push(e);
    }
    errors.finish()?;
    Ok(Args {
        cron: cron.expect("no error was reported, so the cron expression was parsed"),
        tz: fields.tz,
        name: fields.name,
        guard: fields.guard,
        dst: fields.dst,
        lock_key: fields.lock_key,
        calendar: fields.calendar,
        adjust: fields.adjust,
        shift: fields.shift,
        monitor: fields.monitor,
    })
}

/// Checks a job name with the runtime's rules (`slotguard_cron::check_job_name`, which
/// `SchedulerBuilder::build` applies again).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    use slotguard_cron::NameProblem;
    slotguard_cron::check_job_name(name).map_err(|problem| match problem {
        NameProblem::Empty => "job name must not be empty".to_owned(),
        NameProblem::TooLong(chars) => format!(
            "job name is {chars} characters long; the limit is {}",
            slotguard_cron::MAX_NAME_CHARS
        ),
        _ => format!("job name `{}` {problem}", shown(name)),
    })
}

/// Splits the argument list at top-level commas. A trailing comma is allowed; an empty argument in
/// the middle (`"* * * * *",, tz = "UTC"`) is reported at its comma.
fn split_at_commas(tokens: TokenStream, errors: &mut Errors) -> Vec<TokenStream> {
    let mut segments = Vec::new();
    let mut current = TokenStream::new();
    for tree in tokens {
        match &tree {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                if current.is_empty() {
                    errors.push(syn::Error::new(p.span(), "expected an argument before `,`"));
                }
                segments.push(std::mem::take(&mut current));
            }
            _ => current.extend([tree]),
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

/// Keys people write the cron expression under; it takes none.
const CRON_KEYS: &[&str] = &["cron", "expr", "expression", "schedule"];

/// The first argument: the cron expression as a string literal, checked with the runtime's parser.
/// `more` says whether other arguments follow it (for the suggestion of a keyed expression).
fn parse_cron(tokens: TokenStream, more: bool) -> syn::Result<LitStr> {
    let mut iter = tokens.clone().into_iter();
    let first = iter.next();
    let second = iter.next();
    if let (Some(TokenTree::Ident(key)), Some(TokenTree::Punct(eq))) = (&first, &second)
        && eq.as_char() == '='
    {
        if CRON_KEYS.contains(&key.to_string().as_str()) {
            // `cron = "0 2 * * *"`: the expression, under a key it does not take.
            let value: TokenStream = iter.collect();
            let expr = syn::parse2::<LitStr>(value)
                .map(|lit| lit.value())
                .unwrap_or_else(|_| "0 2 * * *".to_owned());
            let rest = if more { ", ..." } else { "" };
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "the cron expression is written without a key: write `#[scheduled({expr:?}{rest})]`"
                ),
            ));
        }
        return Err(syn::Error::new(
            key.span(),
            format!(
                "the cron expression comes first: write `#[scheduled(\"0 2 * * *\", {key} = ...)]`"
            ),
        ));
    }
    let lit: LitStr = syn::parse2(tokens.clone()).map_err(|_| {
        syn::Error::new_spanned(
            &tokens,
            "the cron expression must be a string literal: write `#[scheduled(\"0 2 * * *\")]`",
        )
    })?;
    CronExpr::parse(&lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
    Ok(lit)
}

/// One `key = value` argument.
fn parse_pair(
    fields: &mut Fields,
    seen: &mut Vec<&'static str>,
    tokens: TokenStream,
) -> syn::Result<()> {
    let mut iter = tokens.clone().into_iter();
    let key = match iter.next() {
        Some(TokenTree::Ident(key)) => key,
        Some(TokenTree::Literal(lit)) if lit.to_string().starts_with(['"', 'r']) => {
            return Err(syn::Error::new_spanned(
                &tokens,
                "expected `key = value`: only the cron expression is written without a key \
                 (for a zone write `tz = \"Asia/Seoul\"`)",
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                &tokens,
                format!("expected `key = value`, for example `{}`", KEYS[0].example),
            ));
        }
    };
    let written = key.unraw().to_string();
    let eq = match iter.next() {
        Some(TokenTree::Punct(eq)) if eq.as_char() == '=' => Some(eq),
        _ => None,
    };
    let Some(spec) = KEYS.iter().find(|k| k.name == written) else {
        let message = match eq {
            Some(_) => unknown_key_message(&written),
            None => bare_word_message(&written),
        };
        return Err(syn::Error::new(key.span(), message));
    };
    let Some(eq) = eq else {
        return Err(syn::Error::new(
            key.span(),
            format!("`{written}` needs a value: write `{}`", spec.example),
        ));
    };
    let value: TokenStream = iter.collect();
    if value.is_empty() {
        return Err(syn::Error::new(
            eq.span(),
            format!("expected a value after `=`: write `{}`", spec.example),
        ));
    }
    if seen.contains(&spec.name) {
        return Err(syn::Error::new(
            key.span(),
            format!("duplicate argument `{written}`: each argument may be given once"),
        ));
    }
    seen.push(spec.name);
    (spec.parse)(fields, spec, value)
}

fn unknown_key_message(written: &str) -> String {
    let known: Vec<String> = KEYS.iter().map(|k| format!("`{}`", k.name)).collect();
    let mut message = format!(
        "unknown argument `{written}`: expected one of {}",
        known.join(", ")
    );
    let lower = written.to_ascii_lowercase();
    let suggestion = ALIASES
        .iter()
        .find(|(alias, _)| *alias == lower)
        .map(|(_, key)| *key)
        .or_else(|| did_you_mean(&lower, KEYS.iter().map(|k| k.name)));
    if let Some(s) = suggestion {
        message.push_str(&format!("; did you mean `{s}`?"));
    }
    message
}

/// A word written where a `key = value` pair belongs (`#[scheduled("...", local)]`).
fn bare_word_message(written: &str) -> String {
    let key = if Guard::ALL.iter().any(|(name, _)| *name == written) {
        Some("guard")
    } else if written.parse::<DstPolicy>().is_ok() {
        Some("dst")
    } else {
        None
    };
    match key {
        Some(key) => format!("expected `key = value`: write `{key} = {written}`"),
        None => format!("expected `key = value`, found `{written}`"),
    }
}

/// The candidate closest to `input`, when it is a typo away.
fn did_you_mean(
    input: &str,
    candidates: impl IntoIterator<Item = &'static str>,
) -> Option<&'static str> {
    let input = input.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(&input, c), c))
        .filter(|&(distance, c)| distance <= (c.len() / 3).max(1))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, c)| c)
}

fn parse_tz(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let lit = string_value(key, value)?;
    parse_zone(&lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
    fields.tz = Some(lit);
    Ok(())
}

fn parse_name(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let lit = string_value(key, value)?;
    check_name(&lit.value()).map_err(|e| syn::Error::new(lit.span(), e))?;
    fields.name = Some(lit);
    Ok(())
}

fn parse_guard(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let word = word_value(key, value)?;
    let written = word.to_string();
    let Some(&(_, guard)) = Guard::ALL.iter().find(|(name, _)| *name == written) else {
        let mut message =
            format!("unknown guard level `{written}`: expected none, local, lock or slot");
        if let Some(s) = did_you_mean(&written, Guard::ALL.iter().map(|(name, _)| *name)) {
            message.push_str(&format!("; did you mean `{s}`?"));
        }
        return Err(syn::Error::new(word.span(), message));
    };
    fields.guard = Some(Spanned {
        value: guard,
        span: word.span(),
    });
    Ok(())
}

fn parse_dst(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let word = word_value(key, value)?;
    let written = word.to_string();
    let policy: DstPolicy = written.parse().map_err(|e| {
        let mut message = format!("{e}");
        if let Some(s) = did_you_mean(&written, DstPolicy::ALL.map(DstPolicy::as_str)) {
            message.push_str(&format!("; did you mean `{s}`?"));
        }
        syn::Error::new(word.span(), message)
    })?;
    fields.dst = Some(Spanned {
        value: policy,
        span: word.span(),
    });
    Ok(())
}

/// Any expression: its type is checked where it is used, `Job::monitor(Arc<dyn Monitor>)`.
fn parse_monitor(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let expr = syn::parse2(value.clone()).map_err(|_| {
        syn::Error::new_spanned(
            &value,
            format!(
                "`{}` takes an expression that makes an `Arc` of a `slotguard::Monitor`: write `{}`",
                key.name, key.example
            ),
        )
    })?;
    fields.monitor = Some(expr);
    Ok(())
}

fn parse_lock_key(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    fields.lock_key = Some(integer_value(key, value)?);
    Ok(())
}

/// A value that must be an `i64` literal, maybe negative (`lock_key = -42`).
fn integer_value(key: &Key, value: TokenStream) -> syn::Result<Spanned<i64>> {
    let expected = || {
        syn::Error::new_spanned(
            &value,
            format!(
                "`{}` takes an integer literal: write `{}`",
                key.name, key.example
            ),
        )
    };
    let mut iter = value.clone().into_iter().peekable();
    let negative = matches!(iter.peek(), Some(TokenTree::Punct(p)) if p.as_char() == '-');
    if negative {
        iter.next();
    }
    let rest: TokenStream = iter.collect();
    let lit: LitInt = syn::parse2(rest).map_err(|_| expected())?;
    if !matches!(lit.suffix(), "" | "i64" | "i32") {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`{}` is an integer: remove the `{}` suffix",
                key.name,
                lit.suffix()
            ),
        ));
    }
    let digits = lit.base10_digits();
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_owned()
    };
    let number: i64 = text.parse().map_err(|_| {
        syn::Error::new_spanned(
            &value,
            format!(
                "`{}` must fit in an i64 ({} to {}), found {text}",
                key.name,
                i64::MIN,
                i64::MAX
            ),
        )
    })?;
    Ok(Spanned {
        value: number,
        span: lit.span(),
    })
}

/// A value that must be a string literal (`tz = "Asia/Seoul"`).
fn string_value(key: &Key, value: TokenStream) -> syn::Result<LitStr> {
    syn::parse2::<LitStr>(value.clone()).map_err(|_| {
        syn::Error::new_spanned(
            &value,
            format!(
                "`{}` takes a string literal: write `{}`",
                key.name, key.example
            ),
        )
    })
}

/// A value that must be a bare word (`guard = slot`). A quoted word gets a hint to drop the quotes.
fn word_value(key: &Key, value: TokenStream) -> syn::Result<Ident> {
    // Keywords are words too: `guard = type` is an unknown level, not a syntax error.
    if let Ok(word) = syn::parse::Parser::parse2(Ident::parse_any, value.clone()) {
        return Ok(word);
    }
    let message = match syn::parse2::<LitStr>(value.clone()) {
        Ok(lit) => format!(
            "`{}` takes a bare word, without quotes: write `{} = {}`",
            key.name,
            key.name,
            lit.value().escape_debug()
        ),
        Err(_) => format!("`{}` takes a bare word: write `{}`", key.name, key.example),
    };
    Err(syn::Error::new_spanned(value, message))
}

/// User input shortened and escaped so an error message stays readable.
fn shown(input: &str) -> String {
    slotguard_cron::shown_within(input, 48)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    /// Every error message `parse` reports for `tokens`, joined with ` | `.
    pub(super) fn message(tokens: TokenStream) -> String {
        match parse(tokens) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(" | "),
        }
    }

    #[test]
    fn full_argument_list() {
        let args = parse(quote!(
            "0 2 * * *",
            tz = "Asia/Seoul",
            name = "daily-settlement",
            guard = slot,
            dst = skip,
            lock_key = -42,
        ))
        .unwrap();
        assert_eq!(args.cron.value(), "0 2 * * *");
        assert_eq!(args.tz.unwrap().value(), "Asia/Seoul");
        assert_eq!(args.name.unwrap().value(), "daily-settlement");
        assert_eq!(args.guard.unwrap().value.variant(), "Slot");
        assert_eq!(args.dst.unwrap().value, DstPolicy::Skip);
        assert_eq!(args.lock_key.unwrap().value, -42);
    }

    #[test]
    fn lock_key_bounds() {
        let min = parse(quote!("* * * * *", lock_key = -9223372036854775808)).unwrap();
        assert_eq!(min.lock_key.unwrap().value, i64::MIN);
        assert!(message(quote!("* * * * *", lock_key = 9223372036854775808)).contains("i64"));
        assert!(message(quote!("* * * * *", lock_key = 1u8)).contains("suffix"));
        assert!(message(quote!("* * * * *", lock_key = "1")).contains("integer literal"));
    }

    #[test]
    fn every_error_is_reported() {
        let all = message(quote!(
            "61 * * * *",
            tz = "Asia/Seol",
            guard = slots,
            bogus = 1
        ));
        assert!(all.contains("minute field `61`"), "{all}");
        assert!(all.contains("did you mean `Asia/Seoul`?"), "{all}");
        assert!(all.contains("did you mean `slot`?"), "{all}");
        assert!(all.contains("unknown argument `bogus`"), "{all}");
    }

    #[test]
    fn shape_errors() {
        assert!(message(quote!()).contains("missing the cron expression"));
        assert!(message(quote!(tz = "UTC")).contains("comes first"));
        assert!(message(quote!(0 2 * * *)).contains("string literal"));
        assert!(message(quote!("* * * * *", "UTC")).contains("tz = "));
        assert!(message(quote!("* * * * *", local)).contains("write `guard = local`"));
        assert!(message(quote!("* * * * *", loco)).contains("found `loco`"));
        assert!(message(quote!("* * * * *", guard)).contains("needs a value"));
        assert!(message(quote!("* * * * *", guard =)).contains("after `=`"));
        assert!(message(quote!("* * * * *",, tz = "UTC")).contains("before `,`"));
        assert!(message(quote!("* * * * *", guard = "slot")).contains("without quotes"));
        assert!(message(quote!("* * * * *", timezone = "UTC")).contains("did you mean `tz`?"));
        assert!(message(quote!("* * * * *", lockkey = 1)).contains("did you mean `lock_key`?"));
        assert!(message(quote!("* * * * *", tz = "UTC", tz = "UTC")).contains("duplicate"));
    }

    #[test]
    fn names() {
        assert!(check_name("daily-settlement").is_ok());
        assert!(check_name(" ").unwrap_err().contains("empty"));
        assert!(check_name(&"x".repeat(201)).unwrap_err().contains("201"));
        assert!(check_name(&"x".repeat(200)).is_ok());
        assert!(check_name("a\0b").unwrap_err().contains("a\\0b"));
        assert!(check_name("a:b").unwrap_err().contains("`:`"));
    }
}
