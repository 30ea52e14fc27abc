//! A JSON tree that remembers the line of every value and keeps numbers as their source text.
//!
//! Why not `serde_json::Value`: errors in a topology file must name the line of the bad vertex or
//! link, duplicate keys must be caught rather than silently overwritten, and numbers must be
//! converted from their exact decimal text (see `decimal`). Syntax is checked first by
//! `serde_json` (its line/column messages and nesting limit), so this walker only has to
//! structure text already known to be valid JSON; it still never panics on anything else.

use super::TopologyError;

#[derive(Debug)]
pub(crate) enum JKind {
    Null,
    Bool,
    /// The number exactly as written.
    Num(String),
    Str(String),
    Arr(Vec<JVal>),
    /// Members in source order (duplicates rejected while parsing).
    Obj(Vec<(String, JVal)>),
}

#[derive(Debug)]
pub(crate) struct JVal {
    /// 1-based line where the value starts.
    pub line: usize,
    pub kind: JKind,
}

impl JVal {
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            JKind::Null => "null",
            JKind::Bool => "a boolean",
            JKind::Num(_) => "a number",
            JKind::Str(_) => "a string",
            JKind::Arr(_) => "an array",
            JKind::Obj(_) => "an object",
        }
    }
}

/// Parse `text` into a positioned tree. Errors carry the line (and for syntax, the column).
pub(crate) fn parse(text: &str) -> Result<JVal, TopologyError> {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        let msg = e.to_string();
        // serde_json appends " at line L column C"; keep the message, move the line to our field.
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        return Err(TopologyError::new(format!("invalid JSON: {msg} (column {})", e.column())).at_line(e.line()));
    }
    let mut p = Walker {
        s: text.as_bytes(),
        text,
        i: 0,
        line: 1,
        depth: 0,
    };
    let v = p.value()?;
    Ok(v)
}

struct Walker<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
    line: usize,
    depth: usize,
}

/// Nesting limit (the same as serde_json's): a topology file nests 3 deep; this guards the stack.
const MAX_DEPTH: usize = 128;

impl Walker<'_> {
    fn err(&self, what: &str) -> TopologyError {
        TopologyError::new(format!("invalid JSON: {what}")).at_line(self.line)
    }

    fn ws(&mut self) {
        while let Some(&c) = self.s.get(self.i) {
            match c {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => break,
            }
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), TopologyError> {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected '{}'", c as char)))
        }
    }

    fn value(&mut self) -> Result<JVal, TopologyError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        let v = self.value_inner();
        self.depth -= 1;
        v
    }

    fn value_inner(&mut self) -> Result<JVal, TopologyError> {
        self.ws();
        let line = self.line;
        let kind = match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members: Vec<(String, JVal)> = Vec::new();
                // A set, not a scan of `members`: a hostile object with 10^5 keys stays linear.
                let mut seen = std::collections::HashSet::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let key_line = self.line;
                        let key = self.string()?;
                        if !seen.insert(key.clone()) {
                            return Err(TopologyError::new(format!("key '{key}' appears twice in one object"))
                                .at_line(key_line)
                                .field(key));
                        }
                        self.eat(b':')?;
                        let v = self.value()?;
                        members.push((key, v));
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or '}'")),
                        }
                    }
                }
                JKind::Obj(members)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value()?);
                        self.ws();
                        match self.s.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(self.err("expected ',' or ']'")),
                        }
                    }
                }
                JKind::Arr(items)
            }
            Some(b'"') => JKind::Str(self.string()?),
            Some(b't') if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                JKind::Bool
            }
            Some(b'f') if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                JKind::Bool
            }
            Some(b'n') if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                JKind::Null
            }
            Some(c) if *c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while let Some(&c) = self.s.get(self.i) {
                    if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                JKind::Num(self.text[start..self.i].to_string())
            }
            _ => return Err(self.err("expected a value")),
        };
        Ok(JVal { line, kind })
    }

    /// A string at the cursor; escapes decoded by serde_json.
    fn string(&mut self) -> Result<String, TopologyError> {
        if self.s.get(self.i) != Some(&b'"') {
            return Err(self.err("expected a string"));
        }
        let start = self.i;
        self.i += 1;
        loop {
            match self.s.get(self.i) {
                Some(b'\\') => self.i += 2,
                Some(b'"') => {
                    self.i += 1;
                    break;
                }
                Some(_) => self.i += 1,
                None => return Err(self.err("unterminated string")),
            }
        }
        let raw = self.text.get(start..self.i).ok_or_else(|| self.err("bad string"))?;
        serde_json::from_str::<String>(raw).map_err(|e| self.err(&e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_lines_and_number_text() {
        let v = parse("{\n \"a\": [1.50,\n  \"x\\ny\"],\n \"b\": {\"c\": null, \"d\": true}\n}").unwrap();
        let JKind::Obj(m) = &v.kind else { panic!() };
        assert_eq!(m[0].0, "a");
        let JKind::Arr(items) = &m[0].1.kind else { panic!() };
        assert!(matches!(&items[0].kind, JKind::Num(t) if t == "1.50"));
        assert_eq!(items[1].line, 3);
        assert!(matches!(&items[1].kind, JKind::Str(s) if s == "x\ny"));
        assert_eq!(m[1].1.line, 4);
    }

    #[test]
    fn syntax_and_duplicate_key_errors_have_lines() {
        let e = parse("{\n\"a\": 1,\n\"b\": }").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().starts_with("line 3: invalid JSON"), "{e}");
        let e = parse("{\"a\": 1,\n \"a\": 2}").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.to_string().contains("'a' appears twice"), "{e}");
        assert!(parse("[1, NaN]").is_err());
        assert!(parse("").is_err());
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&deep).unwrap_err().to_string().contains("nested too deeply"));
    }
}
