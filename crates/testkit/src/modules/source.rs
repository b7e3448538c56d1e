//! Source text without what names nothing: comments and the contents of string and char
//! literals (a doc link or a message may spell `crate::x` without depending on it).

/// `text` without comments and without the contents of string and char literals (each literal
/// is left as an empty `""` or `' '`, so the tokens around it stay apart).
pub(crate) fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i = block_comment_end(text, i);
            out.push(' ');
        } else if let Some((open, close)) = raw_string_at(text, i) {
            // r"...", r#"..."#, br#"..."#: to the closing quote and as many hashes.
            let body = i + open;
            i = text[body..]
                .find(&close)
                .map_or(text.len(), |k| body + k + close.len());
            out.push_str("\"\"");
        } else if c == '"' {
            i = string_end(text, i + 1);
            out.push_str("\"\"");
        } else if let Some(len) = (c == '\'').then(|| char_literal_len(rest)).flatten() {
            out.push_str("' '");
            i += len;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The end of the (nested) block comment that starts at `i`.
fn block_comment_end(text: &str, mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < text.len() {
        if text[i..].starts_with("/*") {
            depth += 1;
            i += 2;
        } else if text[i..].starts_with("*/") {
            depth = depth.saturating_sub(1);
            i += 2;
            if depth == 0 {
                break;
            }
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    i
}

/// The end of a string literal whose body starts at `i` (after its closing quote).
fn string_end(text: &str, mut i: usize) -> usize {
    while let Some(d) = text[i..].chars().next() {
        i += d.len_utf8();
        match d {
            '\\' => i += text[i..].chars().next().map_or(0, char::len_utf8),
            '"' => break,
            _ => {}
        }
    }
    i
}

/// A raw string literal starting at `i` (`r"`, `r#"`, `br"`...): the length of its opening and
/// its closing text.
fn raw_string_at(text: &str, i: usize) -> Option<(usize, String)> {
    let starts_word = !text[..i]
        .chars()
        .next_back()
        .is_some_and(|p| p.is_alphanumeric() || p == '_');
    let rest = &text[i..];
    let after_prefix = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r'))?;
    let hashes = after_prefix.chars().take_while(|c| *c == '#').count();
    (starts_word && after_prefix[hashes..].starts_with('"')).then(|| {
        let open = rest.len() - after_prefix.len() + hashes + 1;
        (open, format!("\"{}", "#".repeat(hashes)))
    })
}

/// The length of a char literal at the start of `text` (`'a'`, `'\n'`, `'\''`, `'\u{1F600}'`);
/// None for a lifetime (`'a`, `'static`).
fn char_literal_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().skip(1);
    let (_, first) = chars.next()?;
    if first == '\\' {
        let end = text.get(3..)?.find('\'')? + 3;
        return (end <= 12).then_some(end + 1);
    }
    let (at, second) = chars.next()?;
    (second == '\'').then_some(at + 1)
}
