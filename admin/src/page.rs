//! The one rule for the size of a listing's page (`limit`), shared by the Rust admin API, the HTTP
//! router and the CLI: a whole number from 1 to [`MAX_PAGE`], [`DEFAULT_PAGE`](crate::DEFAULT_PAGE) when not given.
//! Anything else is refused as invalid (HTTP 400, CLI exit 2), never silently capped or replaced.

use crate::{AdminError, MAX_PAGE, shown};

/// Checks a page size: 1 to [`MAX_PAGE`].
///
/// # Errors
/// [`AdminError::Invalid`] for the field `limit`, naming the bounds.
pub fn check_page(limit: usize) -> Result<usize, AdminError> {
    if (1..=MAX_PAGE).contains(&limit) {
        return Ok(limit);
    }
    Err(AdminError::Invalid {
        field: "limit",
        problem: format!("{limit} is out of range: expected 1 to {MAX_PAGE}"),
    })
}

/// Reads a page size as a person or a query string writes it (`50`, ` 50 `), and checks it.
///
/// # Errors
/// [`AdminError::Invalid`] for the field `limit`: not a whole number, or out of range.
pub fn parse_page(text: &str) -> Result<usize, AdminError> {
    let trimmed = text.trim();
    match trimmed.parse::<usize>() {
        Ok(limit) => check_page(limit),
        // A number out of `usize`'s range, or negative: still a number, still out of range.
        Err(_) if is_integer(trimmed) => Err(AdminError::Invalid {
            field: "limit",
            problem: format!(
                "{} is out of range: expected 1 to {MAX_PAGE}",
                shown(trimmed)
            ),
        }),
        Err(_) => Err(AdminError::Invalid {
            field: "limit",
            problem: format!(
                "`{}` is not a whole number from 1 to {MAX_PAGE}",
                shown(text)
            ),
        }),
    }
}

fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_PAGE;
    use slotguard::store::RunFilter;

    #[test]
    fn a_page_is_one_to_a_thousand() {
        assert_eq!(check_page(1).unwrap(), 1);
        assert_eq!(check_page(MAX_PAGE).unwrap(), MAX_PAGE);
        assert_eq!(RunFilter::default().limit, DEFAULT_PAGE);
        for bad in [0, MAX_PAGE + 1, 100_000, usize::MAX] {
            let err = check_page(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid limit: {bad} is out of range: expected 1 to 1000")
            );
        }
        assert_eq!(parse_page(" 7 ").unwrap(), 7);
        assert_eq!(
            parse_page("-1").unwrap_err().to_string(),
            "invalid limit: -1 is out of range: expected 1 to 1000"
        );
        assert_eq!(
            parse_page("99999999999999999999999")
                .unwrap_err()
                .to_string(),
            "invalid limit: 99999999999999999999999 is out of range: expected 1 to 1000"
        );
        assert_eq!(
            parse_page("ten").unwrap_err().to_string(),
            "invalid limit: `ten` is not a whole number from 1 to 1000"
        );
    }
}
