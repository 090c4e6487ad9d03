//! Short texts for one-line messages, shared by the code that runs a command and the
//! rules that read what it printed.

/// The last non-empty line of `text`, at most 200 characters (for one-line errors).
pub fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no message");
    line.chars().take(200).collect()
}
