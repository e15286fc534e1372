//! What a message repeats of its input: capped, so what an error or result echoes never crowds
//! out what it says (a 100 KB name in, a 100 KB error out).

/// Characters of input a message repeats back; the rest is elided.
pub const ECHO_CHARS: usize = 200;

/// `text` as a message repeats it: whole up to [`ECHO_CHARS`] characters, else its start and
/// how long it was.
pub fn echo(text: &str) -> String {
    match text.char_indices().nth(ECHO_CHARS) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… ({} characters)", &text[..end], text.chars().count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_are_capped_on_char_boundaries() {
        assert_eq!(echo("short"), "short");
        let long = "ü".repeat(1000);
        let shown = echo(&long);
        assert!(shown.starts_with(&"ü".repeat(ECHO_CHARS)));
        assert!(shown.ends_with("… (1000 characters)"), "{shown}");
    }
}
