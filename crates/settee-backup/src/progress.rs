//! The progress bar on standard error (drawn only when it is a terminal).

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

/// A bar over `total` units, named by `what`; `bytes` shows them as sizes.
pub(crate) fn bar(total: u64, what: &str, bytes: bool) -> ProgressBar {
    let units = if bytes {
        "{bytes}/{total_bytes}"
    } else {
        "{pos}/{len}"
    };
    let template = format!("{what} [{{elapsed_precise}}] {{wide_bar}} {units} {{msg}}");
    let style =
        ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total).with_style(style)
}

/// How many changes a sequence counts: CouchDB's sequences begin with the number of
/// updates they count (`"123-g1AAAA…"`), older ones are numbers.
pub(crate) fn seq_number(seq: &Value) -> Option<u64> {
    match seq {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.split('-').next()?.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sequences_count_their_updates() {
        assert_eq!(seq_number(&json!("12-g1AAAAB")), Some(12));
        assert_eq!(seq_number(&json!(7)), Some(7));
        assert_eq!(seq_number(&json!("now")), None);
        assert_eq!(seq_number(&json!(null)), None);
    }
}
