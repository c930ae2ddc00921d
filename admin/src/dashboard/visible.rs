//! Invisible characters made visible: a bidirectional override (U+202E), an isolate, a zero-width
//! space or a byte-order mark in a reason, an operator's name, a job name or a partition would
//! reorder or hide the text around it ("invoice\u{202E}txt.exe" reads "invoiceexe.txt"). Every page
//! shows them escaped as `\u{202e}`, as the CLI does, wherever operator or store text lands.
//!
//! The escaping runs over the whole rendered page, so no page or future column can forget it. Only
//! the values of form fields (`value="…"`) are left as they are: a hidden field carries the reason
//! or partition the operator typed back to the server, and is never shown.

/// Whether `c` would reorder, hide or break the text around it on a page: a control character
/// other than a line break or a tab, a bidirectional mark, embedding, override or isolate, a
/// zero-width character, or a byte-order mark.
fn invisible(c: char) -> bool {
    (c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}'
            | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `html` with every [`invisible`] character outside a `value="…"` attribute written as `\u{…}`.
/// Attribute values are quoted with `"` and never contain one (maud escapes it), so the end of a
/// value is the next `"`.
pub(super) fn visible(html: String) -> String {
    if !html.chars().any(invisible) {
        return html;
    }
    let mut out = String::with_capacity(html.len() + 16);
    let mut rest = html.as_str();
    while let Some(start) = rest.find(" value=\"") {
        let open = start + " value=\"".len();
        escape_into(&mut out, &rest[..open]);
        let close = rest[open..].find('"').map_or(rest.len(), |i| open + i);
        out.push_str(&rest[open..close]);
        rest = &rest[close..];
    }
    escape_into(&mut out, rest);
    out
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        if invisible(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_shown_and_form_values_kept() {
        let page = "<td>invoice\u{202E}txt.exe</td><input type=\"hidden\" name=\"reason\" \
                    value=\"a\u{202E}b\"><p title=\"x\u{2066}\">\u{FEFF}</p>";
        assert_eq!(
            visible(page.to_owned()),
            "<td>invoice\\u{202e}txt.exe</td><input type=\"hidden\" name=\"reason\" \
             value=\"a\u{202E}b\"><p title=\"x\\u{2066}\">\\u{feff}</p>"
        );
        let plain = "<p>정산 · 日次バッチ 🦀\n</p>".to_owned();
        assert_eq!(visible(plain.clone()), plain);
    }
}
