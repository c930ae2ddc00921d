//! IANA zone names, with a suggestion when a name is misspelt.

use chrono_tz::{TZ_VARIANTS, Tz};

use crate::error::{UnknownZone, shown};

/// Looks up an IANA zone name (`Asia/Seoul`, `UTC`).
///
/// # Errors
/// [`UnknownZone`], with the closest known name when one is close (`Asia/Seol` → `Asia/Seoul`).
///
/// ```
/// let err = slotguard_cron::parse_zone("Europe/Berln").unwrap_err();
/// assert_eq!(err.suggestion, Some("Europe/Berlin"));
/// ```
pub fn parse_zone(name: &str) -> Result<Tz, UnknownZone> {
    if let Ok(tz) = name.parse::<Tz>() {
        return Ok(tz);
    }
    Err(UnknownZone {
        name: shown(name),
        suggestion: suggest(name),
    })
}

fn suggest(name: &str) -> Option<&'static str> {
    if name.len() > 64 {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    TZ_VARIANTS
        .iter()
        .map(|tz| {
            let candidate = tz.name();
            let score = strsim::jaro_winkler(&lower, &candidate.to_ascii_lowercase());
            (score, candidate)
        })
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_misspelt_zones() {
        assert_eq!(parse_zone("Asia/Seoul").unwrap(), chrono_tz::Asia::Seoul);
        let err = parse_zone("Asia/Seol").unwrap_err();
        assert_eq!(err.suggestion, Some("Asia/Seoul"));
        assert_eq!(
            err.to_string(),
            "unknown time zone `Asia/Seol`; did you mean `Asia/Seoul`?"
        );
        assert_eq!(
            parse_zone("asia/seoul").unwrap_err().suggestion,
            Some("Asia/Seoul")
        );
        assert_eq!(
            parse_zone("Not a zone at all").unwrap_err().suggestion,
            None
        );
        assert!(parse_zone(&"x".repeat(10_000)).is_err());
    }
}
