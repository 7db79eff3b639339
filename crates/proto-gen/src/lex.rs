//! A Go tokenizer just good enough to find type declarations: identifiers, string literals (the
//! struct tags), punctuation and newlines (Go ends statements at newlines). Comments are dropped,
//! except that a `+protobuf…` marker in a comment is attached to the next token, so a type
//! declared with a marker the generator cannot represent is refused.
//!
//! It does not evaluate anything: number literals and operators are opaque tokens.

/// A token kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// A string literal's content: raw strings as written, interpreted strings unescaped.
    Str(String),
    /// A number or rune literal (never looked into).
    Lit,
    /// One punctuation character (`{`, `*`, `.`, …).
    Punct(char),
    /// A line end.
    Newline,
}

/// A token and the `+protobuf` markers of the comments just before it.
#[derive(Debug, Clone)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Marker lines (`+protobuf.nullable=true`, …) of the comments before this token.
    pub markers: Vec<String>,
}

/// Splits a Go source file into tokens.
pub fn lex(src: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut markers = Vec::new();
    let mut i = 0;
    let push = |out: &mut Vec<Token>, markers: &mut Vec<String>, tok: Tok| {
        let markers = if tok == Tok::Newline {
            Vec::new()
        } else {
            std::mem::take(markers)
        };
        out.push(Token { tok, markers });
    };
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            push(&mut out, &mut markers, Tok::Newline);
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            let start = i;
            while chars.get(i).is_some_and(|&c| c != '\n') {
                i += 1;
            }
            note_markers(&chars[start..i], &mut markers);
        } else if c == '/' && next == Some('*') {
            let start = i;
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
            note_markers(&chars[start..i.min(chars.len())], &mut markers);
        } else if c == '`' {
            let start = i + 1;
            i += 1;
            while chars.get(i).is_some_and(|&c| c != '`') {
                i += 1;
            }
            if i >= chars.len() {
                return Err("unterminated raw string".into());
            }
            let s: String = chars[start..i].iter().collect();
            i += 1;
            push(&mut out, &mut markers, Tok::Str(s));
        } else if c == '"' || c == '\'' {
            let quote = c;
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None | Some('\n') => return Err("unterminated string".into()),
                    Some(&q) if q == quote => break,
                    Some('\\') => {
                        let e = chars.get(i + 1).copied().ok_or("bad escape")?;
                        s.push(match e {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                        i += 2;
                    }
                    Some(&ch) => {
                        s.push(ch);
                        i += 1;
                    }
                }
            }
            i += 1;
            let tok = if quote == '"' { Tok::Str(s) } else { Tok::Lit };
            push(&mut out, &mut markers, tok);
        } else if c.is_ascii_digit() {
            while chars
                .get(i)
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                i += 1;
            }
            push(&mut out, &mut markers, Tok::Lit);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|&c| c.is_alphanumeric() || c == '_')
            {
                i += 1;
            }
            push(
                &mut out,
                &mut markers,
                Tok::Ident(chars[start..i].iter().collect()),
            );
        } else {
            push(&mut out, &mut markers, Tok::Punct(c));
            i += 1;
        }
    }
    Ok(out)
}

/// Keeps the `+protobuf` marker lines of a comment.
fn note_markers(comment: &[char], markers: &mut Vec<String>) {
    let text: String = comment.iter().collect();
    for line in text.lines() {
        let line = line.trim_start_matches(['/', '*', ' ', '\t']);
        if line.starts_with("+protobuf") {
            markers.push(line.trim().to_string());
        }
    }
}
