//! Stripped source as tokens, without the items only tests compile (`#[cfg(test)]`).

/// One token of stripped source: enough of Rust's lexical grammar to read paths and items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    /// An identifier or keyword (`r#type` as `type`, `$crate` as `crate`).
    Ident(String),
    /// `::`.
    PathSep,
    /// Any other punctuation character.
    Punct(char),
}

impl Token {
    /// Whether this is the identifier or keyword `word`.
    pub(crate) fn is(&self, word: &str) -> bool {
        matches!(self, Token::Ident(s) if s == word)
    }
}

/// The tokens of `code` (already stripped of comments and literals), with `#[cfg(test)]` items
/// left out; a file that opens with `#![cfg(test)]` has none.
pub(crate) fn tokenize(code: &str) -> Vec<Token> {
    let tokens = lex(code);
    if starts_with_cfg_test(&tokens, true) {
        return Vec::new();
    }
    drop_test_items(&tokens)
}

fn lex(code: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut end = at + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            let word = &code[at..end];
            if word.starts_with(|d: char| d.is_ascii_digit()) {
                continue; // a number
            }
            // r#ident: a raw identifier.
            if word == "r" && code[end..].starts_with('#') {
                let after = &code[end + 1..];
                if after.starts_with(|d: char| d.is_alphabetic() || d == '_') {
                    chars.next(); // the '#'
                    continue_raw(&mut chars, code, &mut tokens);
                    continue;
                }
            }
            tokens.push(Token::Ident(word.to_owned()));
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            tokens.push(Token::PathSep);
        } else if c == '$' && code[at + 1..].starts_with("crate") {
            // `$crate` in a macro body names this crate's root.
            let boundary = code[at + 6..]
                .chars()
                .next()
                .is_none_or(|d| !(d.is_alphanumeric() || d == '_'));
            if boundary {
                for _ in 0.."crate".len() {
                    chars.next();
                }
                tokens.push(Token::Ident("crate".to_owned()));
            } else {
                tokens.push(Token::Punct('$'));
            }
        } else {
            tokens.push(Token::Punct(c));
        }
    }
    tokens
}

/// Reads the identifier of a raw identifier (after `r#`).
fn continue_raw(
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
    code: &str,
    tokens: &mut Vec<Token>,
) {
    let Some(&(start, _)) = chars.peek() else {
        return;
    };
    let mut end = start;
    while let Some(&(j, d)) = chars.peek() {
        if !(d.is_alphanumeric() || d == '_') {
            break;
        }
        end = j + d.len_utf8();
        chars.next();
    }
    tokens.push(Token::Ident(code[start..end].to_owned()));
}

/// Whether `tokens` start with `#[cfg(test)]` (`#![cfg(test)]` when `inner`).
fn starts_with_cfg_test(tokens: &[Token], inner: bool) -> bool {
    let mut want: Vec<Token> = vec![Token::Punct('#')];
    if inner {
        want.push(Token::Punct('!'));
    }
    want.extend([
        Token::Punct('['),
        Token::Ident("cfg".to_owned()),
        Token::Punct('('),
        Token::Ident("test".to_owned()),
        Token::Punct(')'),
        Token::Punct(']'),
    ]);
    tokens.starts_with(&want)
}

/// `tokens` without each `#[cfg(test)]` item: its further attributes and the item up to its
/// closing `;` or `}`.
fn drop_test_items(tokens: &[Token]) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if starts_with_cfg_test(&tokens[i..], false) {
            i = item_end(tokens, i + 7);
        } else {
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    out
}

/// The index after the item that starts at `i` (attributes first): after its first `;` outside
/// brackets, or after the `{...}` block it opens first; at the latest before the `}` that closes
/// what it stands in (a field or an arm).
fn item_end(tokens: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize; // () and []
    while i < tokens.len() {
        match tokens[i] {
            Token::Punct('(' | '[') => depth += 1,
            Token::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Token::Punct(';') if depth == 0 => return i + 1,
            Token::Punct('{') if depth == 0 => return matching_brace(tokens, i) + 1,
            Token::Punct('}') if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index of the `}` that closes the `{` at `open` (the last index if it is never closed).
pub(crate) fn matching_brace(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    tokens.len().saturating_sub(1)
}
