//! The site parser never panics: random text, and the shipped example with random
//! bytes deleted, inserted or replaced, always give a site or one located error.

use greenup::site;
use proptest::prelude::*;

const EXAMPLE: &str = include_str!("../etc/greenup.yaml");

/// Characters that matter to YAML and to greenup's own value syntax.
fn yamlish() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec![
            ':', '-', '[', ']', '{', '}', ',', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@',
            '`', ' ', '\n', '\t', '0', '1', '9', '.', 'e', 'k', 'W', 'J', 'h', 'f', '^', '(', ')',
            '~', '<', '='
        ]),
        any::<char>(),
    ]
}

fn must_not_panic(text: &str) {
    if let Err(e) = site::parse("/etc/slurm/greenup.yaml", text) {
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/slurm/greenup.yaml"), "{msg}");
        assert!(!msg.contains('\n'), "error spans lines: {msg}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_text(s in prop::collection::vec(yamlish(), 0..200)) {
        must_not_panic(&s.into_iter().collect::<String>());
    }

    #[test]
    fn mutated_example(edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, 0usize..12, yamlish()), 1..6)) {
        let mut text: Vec<char> = EXAMPLE.chars().collect();
        for (at, kind, len, c) in edits {
            let i = at.index(text.len() + 1);
            match kind {
                0 => { let end = (i + len).min(text.len()); text.drain(i..end); }
                1 => text.insert(i, c),
                _ => if i < text.len() { text[i] = c },
            }
        }
        must_not_panic(&text.into_iter().collect::<String>());
    }

    #[test]
    fn replaced_values(line in 0usize..200, value in "[-+0-9a-zA-Z.:\\[\\]{},\" ]{0,20}") {
        // Replace the value of one `key: value` line with something random.
        let mut lines: Vec<String> = EXAMPLE.lines().map(str::to_string).collect();
        let n = lines.len();
        let l = &mut lines[line % n];
        if let Some(colon) = l.find(": ") {
            l.truncate(colon + 2);
            l.push_str(&value);
        }
        must_not_panic(&lines.join("\n"));
    }
}
