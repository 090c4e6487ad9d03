//! The checking context the site config's parsers share: where the file is, and how a
//! bad value becomes one line with its file:line:column, the value and what is valid.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::input::{InputError, Spanned, file_origin};

/// Turns the raw file into a [`Site`], checking each value where it was written.
pub(super) struct Checker<'a> {
    pub(super) path: &'a Path,
    pub(super) base: &'a Path,
}

/// A YAML value as a person would write it (flow style), for error messages.
pub(super) fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(shown).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}: {}", shown(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// Entries of a map in the order they appear in the file.
pub(super) fn in_file_order<T>(map: BTreeMap<String, Spanned<T>>) -> Vec<(String, Spanned<T>)> {
    let mut v: Vec<_> = map.into_iter().collect();
    v.sort_by_key(|(_, s)| (s.referenced.line(), s.referenced.column()));
    v
}

impl Checker<'_> {
    /// One line for a bad value: where `span` was written, under `key`, and what is valid.
    pub(super) fn err<T>(
        &self,
        span: &Spanned<T>,
        key: &str,
        value: impl std::fmt::Display,
        expected: impl Into<String>,
    ) -> InputError {
        let (value, expected) = (one_line(&value.to_string()), one_line(&expected.into()));
        InputError::new(
            file_origin(self.path, &span.referenced),
            key,
            value,
            expected,
        )
    }
}

/// Control characters (a quoted "\n" in a value) escaped, so that an error stays on one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
