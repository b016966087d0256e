//! JSON values written as CouchDB's Mango writes them in error reasons: as the Erlang terms
//! it holds them in, printed with `~w` (binaries as byte lists) or `~p` (printable binaries
//! as strings). Clients show these reasons to people; they read the same on both servers.

use serde_json::Value;

/// `~w`: `"x"` as `<<120>>`, objects as `{[{<<...>>,...}]}`.
pub fn w(v: &Value) -> String {
    write(v, false)
}

/// `~p`: `"x"` as `<<"x">>` when printable.
pub fn p(v: &Value) -> String {
    write(v, true)
}

fn write(v: &Value, pretty: bool) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => binary(s, pretty),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| write(i, pretty))
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Object(m) => format!(
            "{{[{}]}}",
            m.iter()
                .map(|(k, v)| format!("{{{},{}}}", binary(k, pretty), write(v, pretty)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

fn binary(s: &str, pretty: bool) -> String {
    if pretty && !s.is_empty() && s.chars().all(|c| (' '..='~').contains(&c)) {
        let escaped = s.replace('\\', "\\\\").replace('"', "\\\"");
        return format!("<<\"{escaped}\">>");
    }
    let bytes: Vec<String> = s.bytes().map(|b| b.to_string()).collect();
    format!("<<{}>>", bytes.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn terms_print_as_couchdb_prints_them() {
        assert_eq!(w(&json!("foo")), "<<102,111,111>>");
        assert_eq!(w(&json!(["a", "b"])), "[<<97>>,<<98>>]");
        assert_eq!(p(&json!("age")), "<<\"age\">>");
        assert_eq!(p(&json!({"age": "up"})), "{[{<<\"age\">>,<<\"up\">>}]}");
        assert_eq!(p(&json!({})), "{[]}");
        assert_eq!(p(&json!("")), "<<>>");
        assert_eq!(w(&json!(5)), "5");
        assert_eq!(w(&json!(null)), "null");
    }
}
