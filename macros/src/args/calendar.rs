//! The business-calendar keys: `calendar = "KR"`, `adjust = preceding`, `shift = -1`, checked with
//! the runtime's own calendar crate.

use proc_macro2::TokenStream;
use slotguard_cron::{Adjust, BUILTIN, MAX_SHIFT};

use super::{Fields, Key, Spanned, did_you_mean, integer_value, string_value, word_value};

pub(super) fn parse_calendar(
    fields: &mut Fields,
    key: &Key,
    value: TokenStream,
) -> syn::Result<()> {
    let lit = string_value(key, value)?;
    let name = lit.value();
    if !BUILTIN.contains(&name.as_str()) {
        let mut message = format!(
            "unknown calendar {name:?}: the builtin calendars are {}; a calendar built in code goes on `Job::calendar`",
            BUILTIN.join(", ")
        );
        let upper = name.to_ascii_uppercase();
        if BUILTIN.contains(&upper.as_str()) {
            message.push_str(&format!("; did you mean `{upper}`?"));
        }
        return Err(syn::Error::new(lit.span(), message));
    }
    fields.calendar = Some(lit);
    Ok(())
}

pub(super) fn parse_adjust(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let word = word_value(key, value)?;
    let written = word.to_string();
    let convention: Adjust = written.parse().map_err(|e| {
        let mut message = format!("{e}");
        let names = Adjust::ALL.map(|a| a.as_str());
        if let Some(s) = did_you_mean(&written.replace('_', "-"), names) {
            message.push_str(&format!("; did you mean `{}`?", s.replace('-', "_")));
        }
        syn::Error::new(word.span(), message)
    })?;
    fields.adjust = Some(Spanned {
        value: convention,
        span: word.span(),
    });
    Ok(())
}

pub(super) fn parse_shift(fields: &mut Fields, key: &Key, value: TokenStream) -> syn::Result<()> {
    let shift = integer_value(key, value)?;
    if shift.value.unsigned_abs() > u64::from(MAX_SHIFT.unsigned_abs()) {
        return Err(syn::Error::new(
            shift.span,
            format!(
                "a shift of {} business days is beyond ±{MAX_SHIFT}",
                shift.value
            ),
        ));
    }
    fields.shift = Some(shift);
    Ok(())
}

/// `adjust` and `shift` count business days, so they need `calendar`.
pub(super) fn check_needs_calendar(fields: &Fields) -> syn::Result<()> {
    if fields.calendar.is_some() {
        return Ok(());
    }
    let orphan = [
        fields.adjust.map(|a| ("adjust", a.span)),
        fields.shift.map(|s| ("shift", s.span)),
    ];
    match orphan.into_iter().flatten().next() {
        Some((key, span)) => Err(syn::Error::new(
            span,
            format!("`{key}` counts business days: add `calendar = \"KR\"` (or another builtin)"),
        )),
        None => Ok(()),
    }
}

/// The name of the `slotguard::Adjust` variant.
pub(crate) fn adjust_variant(convention: Adjust) -> &'static str {
    match convention {
        Adjust::Skip => "Skip",
        Adjust::Following => "Following",
        Adjust::Preceding => "Preceding",
        Adjust::ModifiedFollowing => "ModifiedFollowing",
        Adjust::ModifiedPreceding => "ModifiedPreceding",
        Adjust::Nearest => "Nearest",
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::super::parse;
    use super::super::tests::message;
    use super::*;

    #[test]
    fn calendar_keys() {
        let args = parse(quote!(
            "0 2 25 * *",
            calendar = "KR",
            adjust = modified_preceding,
            shift = -2
        ))
        .unwrap();
        assert_eq!(args.calendar.unwrap().value(), "KR");
        assert_eq!(args.adjust.unwrap().value, Adjust::ModifiedPreceding);
        assert_eq!(args.shift.unwrap().value, -2);
    }

    #[test]
    fn calendar_mistakes() {
        assert!(message(quote!("* * * * *", calendar = "kr")).contains("did you mean `KR`?"));
        assert!(
            message(quote!("* * * * *", calendar = "XX")).contains("the builtin calendars are")
        );
        assert!(message(quote!("* * * * *", calendar = KR)).contains("string literal"));
        let orphan = message(quote!("* * * * *", adjust = following));
        assert!(orphan.contains("add `calendar = "), "{orphan}");
        let orphan = message(quote!("* * * * *", shift = 1));
        assert!(orphan.contains("`shift` counts business days"), "{orphan}");
        let bad = message(quote!("* * * * *", calendar = "KR", adjust = preceeding));
        assert!(bad.contains("did you mean `preceding`?"), "{bad}");
        let far = message(quote!("* * * * *", calendar = "KR", shift = 261));
        assert!(far.contains("beyond ±260"), "{far}");
        let alias = message(quote!("* * * * *", convention = nearest));
        assert!(alias.contains("did you mean `adjust`?"), "{alias}");
    }
}
