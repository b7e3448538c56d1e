//! Go's `encoding/json` syntax errors, word for word: kube-apiserver checks every JSON body with
//! Go's scanner before decoding it (`checkValid` in `encoding/json/scanner.go`), so a malformed
//! body, patch or continue token is reported as `invalid character 'o' in literal null
//! (expecting 'u')` or `unexpected end of JSON input`. serde_json finds the same errors but words
//! them otherwise; this scanner follows Go's state machine to say where Go stops and why.

/// Where the scanner is inside a composite value.
#[derive(Clone, Copy)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The scanner's state: what the next byte may be.
#[derive(Clone, Copy)]
enum Step {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`: the literal and how many bytes were read.
    Literal(&'static str, usize),
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: the byte as a Go single-quoted character (`'\u0081'` for bytes Go's
/// `strconv.Quote` escapes).
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        b'\\' => r"'\\'".to_owned(),
        0x07 => r"'\a'".to_owned(),
        0x08 => r"'\b'".to_owned(),
        0x0c => r"'\f'".to_owned(),
        b'\n' => r"'\n'".to_owned(),
        b'\r' => r"'\r'".to_owned(),
        b'\t' => r"'\t'".to_owned(),
        0x0b => r"'\v'".to_owned(),
        0x00..0x20 | 0x7f => format!(r"'\x{c:02x}'"),
        0x80..=0xa0 | 0xad => format!(r"'\u{c:04x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// Go's error for `data` as a JSON document, or None when Go's scanner accepts it.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut stack: Vec<Parse> = Vec::new();
    let mut step = Step::BeginValue;
    for &c in data {
        // A byte may end a number or a value and then be read again in the next state.
        let mut c_step = step;
        loop {
            match c_step {
                Step::BeginValue | Step::BeginValueOrEmpty | Step::BeginStringOrEmpty
                    if is_space(c) =>
                {
                    step = c_step;
                }
                Step::BeginValueOrEmpty if c == b']' => {
                    stack.pop();
                    step = Step::EndValue;
                }
                Step::BeginValueOrEmpty => {
                    c_step = Step::BeginValue;
                    continue;
                }
                Step::BeginStringOrEmpty if c == b'}' => {
                    stack.pop();
                    step = Step::EndValue;
                }
                Step::BeginStringOrEmpty => {
                    c_step = Step::BeginString;
                    continue;
                }
                Step::BeginString => {
                    if is_space(c) {
                        step = Step::BeginString;
                    } else if c == b'"' {
                        step = Step::InString;
                    } else {
                        return Some(invalid(c, "looking for beginning of object key string"));
                    }
                }
                Step::BeginValue => {
                    step = match c {
                        b'{' => {
                            stack.push(Parse::ObjectKey);
                            Step::BeginStringOrEmpty
                        }
                        b'[' => {
                            stack.push(Parse::ArrayValue);
                            Step::BeginValueOrEmpty
                        }
                        b'"' => Step::InString,
                        b'-' => Step::Neg,
                        b'0' => Step::Zero,
                        b'1'..=b'9' => Step::One,
                        b't' => Step::Literal("true", 1),
                        b'f' => Step::Literal("false", 1),
                        b'n' => Step::Literal("null", 1),
                        _ => return Some(invalid(c, "looking for beginning of value")),
                    };
                }
                Step::EndValue => {
                    let Some(top) = stack.last_mut() else {
                        c_step = Step::EndTop;
                        continue;
                    };
                    if is_space(c) {
                        step = Step::EndValue;
                        break;
                    }
                    match (*top, c) {
                        (Parse::ObjectKey, b':') => {
                            *top = Parse::ObjectValue;
                            step = Step::BeginValue;
                        }
                        (Parse::ObjectKey, _) => return Some(invalid(c, "after object key")),
                        (Parse::ObjectValue, b',') => {
                            *top = Parse::ObjectKey;
                            step = Step::BeginString;
                        }
                        (Parse::ObjectValue, b'}') => {
                            stack.pop();
                            step = Step::EndValue;
                        }
                        (Parse::ObjectValue, _) => {
                            return Some(invalid(c, "after object key:value pair"));
                        }
                        (Parse::ArrayValue, b',') => step = Step::BeginValue,
                        (Parse::ArrayValue, b']') => {
                            stack.pop();
                            step = Step::EndValue;
                        }
                        (Parse::ArrayValue, _) => return Some(invalid(c, "after array element")),
                    }
                }
                Step::EndTop => {
                    if !is_space(c) {
                        return Some(invalid(c, "after top-level value"));
                    }
                    step = Step::EndTop;
                }
                Step::InString => {
                    step = match c {
                        b'"' => Step::EndValue,
                        b'\\' => Step::InStringEsc,
                        0x00..0x20 => return Some(invalid(c, "in string literal")),
                        _ => Step::InString,
                    };
                }
                Step::InStringEsc => {
                    step = match c {
                        b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => Step::InString,
                        b'u' => Step::InStringEscU(0),
                        _ => return Some(invalid(c, "in string escape code")),
                    };
                }
                Step::InStringEscU(n) => {
                    if !c.is_ascii_hexdigit() {
                        return Some(invalid(c, "in \\u hexadecimal character escape"));
                    }
                    step = if n == 3 {
                        Step::InString
                    } else {
                        Step::InStringEscU(n + 1)
                    };
                }
                Step::Neg => {
                    step = match c {
                        b'0' => Step::Zero,
                        b'1'..=b'9' => Step::One,
                        _ => return Some(invalid(c, "in numeric literal")),
                    };
                }
                Step::One if c.is_ascii_digit() => step = Step::One,
                Step::One | Step::Zero => match c {
                    b'.' => step = Step::Dot,
                    b'e' | b'E' => step = Step::E,
                    _ => {
                        c_step = Step::EndValue;
                        continue;
                    }
                },
                Step::Dot => {
                    if !c.is_ascii_digit() {
                        return Some(invalid(c, "after decimal point in numeric literal"));
                    }
                    step = Step::Dot0;
                }
                Step::Dot0 => match c {
                    b'0'..=b'9' => step = Step::Dot0,
                    b'e' | b'E' => step = Step::E,
                    _ => {
                        c_step = Step::EndValue;
                        continue;
                    }
                },
                Step::E if matches!(c, b'+' | b'-') => step = Step::ESign,
                Step::E | Step::ESign => {
                    if !c.is_ascii_digit() {
                        return Some(invalid(c, "in exponent of numeric literal"));
                    }
                    step = Step::E0;
                }
                Step::E0 => {
                    if c.is_ascii_digit() {
                        step = Step::E0;
                    } else {
                        c_step = Step::EndValue;
                        continue;
                    }
                }
                Step::Literal(word, read) => {
                    let expected = word.as_bytes()[read];
                    if c != expected {
                        return Some(invalid(
                            c,
                            &format!("in literal {word} (expecting {})", quote_char(expected)),
                        ));
                    }
                    step = if read + 1 == word.len() {
                        Step::EndValue
                    } else {
                        Step::Literal(word, read + 1)
                    };
                }
            }
            break;
        }
    }
    // Go's `scanner.eof`: a complete top-level value (a number may end with the input).
    let complete = stack.is_empty()
        && matches!(
            step,
            Step::EndValue | Step::EndTop | Step::Zero | Step::One | Step::Dot0 | Step::E0
        );
    (!complete).then(|| "unexpected end of JSON input".to_owned())
}

#[cfg(test)]
mod tests {
    use super::syntax_error;

    /// Each message is what Go 1.23's `json.Unmarshal` answers for the input.
    #[test]
    fn go_words_each_syntax_error_as_its_scanner_does() {
        for (input, expected) in [
            (
                "not json at all",
                "invalid character 'o' in literal null (expecting 'u')",
            ),
            (
                "this is not json",
                "invalid character 'h' in literal true (expecting 'r')",
            ),
            (
                "{nope",
                "invalid character 'n' looking for beginning of object key string",
            ),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            ("{} x", "invalid character 'x' after top-level value"),
            ("-x", "invalid character 'x' in numeric literal"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            ("\"\\q\"", "invalid character 'q' in string escape code"),
            ("", "unexpected end of JSON input"),
            ("{\"apiVersion\":\"v1\"", "unexpected end of JSON input"),
            (
                "ab!",
                "invalid character 'a' looking for beginning of value",
            ),
        ] {
            assert_eq!(
                syntax_error(input.as_bytes()).as_deref(),
                Some(expected),
                "{input:?}"
            );
        }
        assert_eq!(
            syntax_error(b"\x81\x00").as_deref(),
            Some("invalid character '\\u0081' looking for beginning of value")
        );
        for valid in [
            "{}",
            " [1, 2.5e-3, true, null, \"x\\u00e9\"] ",
            "0",
            "{\"a\":{\"b\":[]}}",
        ] {
            assert_eq!(syntax_error(valid.as_bytes()), None, "{valid:?}");
        }
    }
}
