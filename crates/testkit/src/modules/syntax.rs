//! What one module's tokens say about other modules: the file modules it declares, its inline
//! modules, its `use` declarations and every other path it spells.

use super::tokens::{Token, matching_brace};

/// One module's source, read for its names.
#[derive(Debug, Default)]
pub(crate) struct ModuleSyntax {
    /// `mod name;`: children in their own files.
    pub(crate) declared: Vec<String>,
    /// `mod name { ... }`: children written inline.
    pub(crate) inline: Vec<(String, ModuleSyntax)>,
    /// Each name a `use` brings in (`None`: from outside the crate).
    pub(crate) aliases: Vec<(String, Option<Vec<String>>)>,
    /// Every path of the module's code and `use` declarations, as written.
    pub(crate) paths: Vec<Vec<String>>,
}

/// Reads one module's tokens.
pub(crate) fn parse(tokens: &[Token]) -> ModuleSyntax {
    let mut syntax = ModuleSyntax::default();
    let mut i = 0;
    while i < tokens.len() {
        let at = &tokens[i];
        if at.is("mod")
            && let Some(Token::Ident(name)) = tokens.get(i + 1)
        {
            match tokens.get(i + 2) {
                Some(Token::Punct(';')) => {
                    syntax.declared.push(name.clone());
                    i += 3;
                    continue;
                }
                Some(Token::Punct('{')) => {
                    let close = matching_brace(tokens, i + 2);
                    let body = parse(&tokens[i + 3..close]);
                    syntax.inline.push((name.clone(), body));
                    i = close + 1;
                    continue;
                }
                _ => {}
            }
        }
        if at.is("use") && !matches!(tokens.get(i + 1), Some(Token::Punct('<'))) {
            let end = tokens[i..]
                .iter()
                .position(|t| *t == Token::Punct(';'))
                .map_or(tokens.len(), |k| i + k);
            let mut pos = i + 1;
            let mut items = Vec::new();
            use_tree(&tokens[..end], &mut pos, &[], false, &mut items);
            for item in items {
                if !item.external {
                    syntax.paths.push(item.path.clone());
                }
                if let Some(name) = item
                    .alias
                    .filter(|n| !matches!(n.as_str(), "crate" | "super" | "self"))
                {
                    syntax
                        .aliases
                        .push((name, (!item.external).then_some(item.path)));
                }
            }
            i = end + 1;
            continue;
        }
        if let Token::Ident(first) = at
            && starts_path(tokens, i)
        {
            let mut path = vec![first.clone()];
            let mut j = i + 1;
            while let (Some(Token::PathSep), Some(Token::Ident(next))) =
                (tokens.get(j), tokens.get(j + 1))
            {
                path.push(next.clone());
                j += 2;
            }
            if !in_visibility(tokens, i) {
                syntax.paths.push(path);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    syntax
}

/// Whether a path of at least two segments starts at `i` (not in the middle of one, not a
/// macro's `$metavariable::`, not after a leading `::`).
fn starts_path(tokens: &[Token], i: usize) -> bool {
    let before = i.checked_sub(1).map(|k| &tokens[k]);
    let fresh = !matches!(before, Some(Token::PathSep | Token::Punct('$')));
    let continues = matches!(
        (tokens.get(i + 1), tokens.get(i + 2)),
        (Some(Token::PathSep), Some(Token::Ident(_)))
    );
    fresh && continues
}

/// Whether the path at `i` is the module of a `pub(in path)` visibility (which names no item).
fn in_visibility(tokens: &[Token], i: usize) -> bool {
    i >= 2 && tokens[i - 1].is("in") && tokens[i - 2] == Token::Punct('(')
}

/// One leaf of a `use` tree.
struct UseItem {
    /// The full path (a glob's is its module's).
    path: Vec<String>,
    /// The name it binds (`None` for a glob or `as _`).
    alias: Option<String>,
    /// A `::name` path: always another crate.
    external: bool,
}

/// Reads the `use` tree at `pos` below `prefix` into `out`.
fn use_tree(
    tokens: &[Token],
    pos: &mut usize,
    prefix: &[String],
    external: bool,
    out: &mut Vec<UseItem>,
) {
    let mut path = prefix.to_vec();
    let mut external = external;
    if tokens.get(*pos) == Some(&Token::PathSep) {
        external |= path.is_empty();
        *pos += 1;
    }
    loop {
        match tokens.get(*pos) {
            Some(Token::Ident(segment)) => {
                path.push(segment.clone());
                *pos += 1;
                if tokens.get(*pos) == Some(&Token::PathSep) {
                    *pos += 1;
                    continue;
                }
                let mut alias = path.last().cloned();
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                    alias = path.last().cloned();
                }
                if tokens.get(*pos).is_some_and(|t| t.is("as")) {
                    alias = match tokens.get(*pos + 1) {
                        Some(Token::Ident(name)) if name != "_" => Some(name.clone()),
                        _ => None,
                    };
                    *pos += 2;
                }
                out.push(UseItem {
                    path,
                    alias,
                    external,
                });
                return;
            }
            Some(Token::Punct('{')) => {
                *pos += 1;
                while let Some(token) = tokens.get(*pos) {
                    match token {
                        Token::Punct('}') => {
                            *pos += 1;
                            return;
                        }
                        Token::Punct(',') => *pos += 1,
                        _ => {
                            let before = *pos;
                            use_tree(tokens, pos, &path, external, out);
                            if *pos == before {
                                *pos += 1; // something this reader does not know: go on
                            }
                        }
                    }
                }
                return;
            }
            Some(Token::Punct('*')) => {
                *pos += 1;
                out.push(UseItem {
                    path,
                    alias: None,
                    external,
                });
                return;
            }
            _ => return,
        }
    }
}
