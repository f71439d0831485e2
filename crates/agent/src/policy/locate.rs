//! Where a field sits in a policy document: the byte offset of the value at a dotted path
//! (`heap.strikes`, `heap.thresholds[1].percent`), so that an error names the byte as well as
//! the field. Runs only on the error path, over a document `serde_json` has already accepted;
//! on anything it does not expect it answers `None` (the error then names the field only).
//!
//! Invariants: reads at most the document once per path, recursion is bounded by
//! [`MAX_DEPTH`] (a policy nests three levels), and it never panics on any input.
#![forbid(unsafe_code)]

/// Deeper than any policy nests; a document deeper than this is not searched past it.
const MAX_DEPTH: usize = 16;

/// One step of a dotted path: an object key or an array index.
#[derive(Debug, PartialEq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            out.push(Step::Index(r[..end].parse().ok()?));
            rest = &r[end + 1..];
        }
    }
    Some(out)
}

/// The byte offset where the value at `path` starts in `text`; for a field the document
/// leaves out, where the nearest enclosing value it has starts (the object that lacks it).
pub(crate) fn value_offset(text: &[u8], path: &str) -> Option<usize> {
    let steps = steps(path)?;
    (1..=steps.len()).rev().find_map(|n| {
        let mut s = Scan { b: text, i: 0 };
        s.ws();
        s.find(&steps[..n], 0)
    })
}

/// The byte offset of 1-based `line` and `column` (as `serde_json` reports them).
pub(crate) fn line_column_offset(text: &[u8], line: usize, column: usize) -> Option<usize> {
    let mut start = 0;
    for _ in 1..line {
        start += text.get(start..)?.iter().position(|&c| c == b'\n')? + 1;
    }
    Some((start + column.saturating_sub(1)).min(text.len()))
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string's raw bytes between its quotes (escapes left as written).
    fn string(&mut self) -> Option<&[u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match self.peek()? {
                b'\\' => self.i += 2,
                b'"' => break,
                _ => self.i += 1,
            }
        }
        let s = self.b.get(start..self.i)?;
        self.i += 1;
        Some(s)
    }

    /// Skip one value of any kind.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.members(depth, |s, _| s.skip(depth + 1)),
            b'[' => self.elements(depth, |s, _| s.skip(depth + 1)),
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
                ) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }

    /// Walk an object's members, calling `f` with the scanner at each value.
    fn members(
        &mut self,
        depth: usize,
        mut f: impl FnMut(&mut Self, &[u8]) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?.to_vec();
            self.eat(b':')?;
            self.ws();
            f(self, &key)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}').filter(|_| depth <= MAX_DEPTH);
            }
        }
    }

    /// Walk an array's elements, calling `f` with the scanner at each element and its index.
    fn elements(
        &mut self,
        depth: usize,
        mut f: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        for n in 0.. {
            self.ws();
            f(self, n)?;
            if self.eat(b',').is_none() {
                return self.eat(b']').filter(|_| depth <= MAX_DEPTH);
            }
        }
        None
    }

    /// The offset of the value `steps` lead to from the value at the scanner.
    fn find(&mut self, steps: &[Step<'_>], depth: usize) -> Option<usize> {
        let Some((first, rest)) = steps.split_first() else {
            return Some(self.i);
        };
        if depth > MAX_DEPTH {
            return None;
        }
        let mut found = None;
        match *first {
            Step::Key(want) => self.members(depth, |s, key| {
                // The last of duplicate keys wins, as in serde_json.
                if key == want.as_bytes() {
                    let at = s.i;
                    if let Some(f) = s.find(rest, depth + 1) {
                        found = Some(f);
                    }
                    s.i = at;
                }
                s.skip(depth + 1)
            })?,
            Step::Index(want) => self.elements(depth, |s, n| {
                if n == want {
                    let at = s.i;
                    found = s.find(rest, depth + 1);
                    s.i = at;
                }
                s.skip(depth + 1)
            })?,
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_values_by_dotted_path() {
        let doc = br#"{ "a": 1, "heap": {"strikes": 0, "x": [1, {"percent": 77}]}, "s": "q\"}" }"#;
        let at = |p: &str| value_offset(doc, p);
        assert_eq!(at("a"), Some(7));
        assert_eq!(&doc[at("heap.strikes").unwrap()..][..1], b"0");
        assert_eq!(&doc[at("heap.x[1].percent").unwrap()..][..2], b"77");
        assert_eq!(&doc[at("heap.x[0]").unwrap()..][..1], b"1");
        assert_eq!(&doc[at("s").unwrap()..][..3], b"\"q\\");
        // Left out: the enclosing value that lacks it.
        assert_eq!(at("heap.missing"), at("heap"));
        assert_eq!(at("heap.x[2]"), at("heap.x"));
        assert_eq!(at("a.b"), at("a"));
        assert_eq!(at("nothing"), None);
    }

    /// An escaped quote does not end a string, and indices may follow one another.
    #[test]
    fn escapes_and_nested_indices() {
        let doc = br#"{"a": "x\"y", "m": [[1], [2, 3]], "b": 5}"#;
        assert_eq!(&doc[value_offset(doc, "b").unwrap()..][..1], b"5");
        assert_eq!(&doc[value_offset(doc, "m[1][1]").unwrap()..][..1], b"3");
        assert_eq!(&doc[value_offset(doc, "m[1][0]").unwrap()..][..1], b"2");
    }

    /// A path may start with an index (a top-level array); a string read past may hold spaces,
    /// commas and brackets.
    #[test]
    fn top_level_arrays_and_strings_read_past() {
        let doc = br#"[5, [6, 7]]"#;
        assert_eq!(&doc[value_offset(doc, "[1][0]").unwrap()..][..1], b"6");
        let doc = br#"{"c": "p, q] }", "b": 8}"#;
        assert_eq!(&doc[value_offset(doc, "b").unwrap()..][..1], b"8");
    }

    /// A value read past on the way is bounded by MAX_DEPTH, arrays and objects alike: nested
    /// to the bound it is read past, one level more gives up.
    #[test]
    fn values_read_past_are_bounded_in_depth() {
        for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
            let at = |levels: usize| {
                let v = format!("{}1{}", open.repeat(levels), close.repeat(levels));
                let doc = format!(r#"{{"x": {v}, "b": 2}}"#);
                value_offset(doc.as_bytes(), "b")
            };
            let deepest = MAX_DEPTH - 1;
            assert!(at(deepest).is_some(), "{open}");
            assert_eq!(at(deepest + 1), None, "{open}");
        }
    }

    #[test]
    fn the_last_of_duplicate_keys_is_found() {
        let doc = br#"{"k": 1, "k": 22}"#;
        assert_eq!(&doc[value_offset(doc, "k").unwrap()..][..2], b"22");
    }

    #[test]
    fn bad_or_deep_documents_give_none_without_panicking() {
        for doc in [&b""[..], b"{", b"{\"a\"", b"[1,", b"{\"a\":\"\\", b"nul"] {
            assert_eq!(value_offset(doc, "a"), None, "{doc:?}");
        }
        let deep = format!("{}1{}", "{\"a\":".repeat(40), "}".repeat(40));
        // Deeper than MAX_DEPTH: not searched at all.
        assert_eq!(
            value_offset(deep.as_bytes(), &vec!["a"; 40].join(".")),
            None
        );
    }

    #[test]
    fn lines_and_columns_become_offsets() {
        let doc = b"{\n  \"a\": x\n}";
        assert_eq!(line_column_offset(doc, 2, 8), Some(9));
        assert_eq!(doc[9], b'x');
        assert_eq!(line_column_offset(doc, 1, 1), Some(0));
        assert_eq!(line_column_offset(doc, 9, 1), None);
    }

    proptest::proptest! {
        /// Any bytes, any path: an answer or `None`, never a panic, and an answer is inside the
        /// document.
        #[test]
        fn never_panics(doc in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                        path in "[a-z\\[\\]0-9.]{0,12}") {
            if let Some(at) = value_offset(&doc, &path) {
                proptest::prop_assert!(at <= doc.len());
            }
        }

        /// On JSON documents (where the answers matter) likewise.
        #[test]
        fn never_panics_on_json(doc in "[{}\\[\\]\",: a-c0-9\\\\]{0,120}", path in "[a-c.\\[\\]0-2]{0,8}") {
            if let Some(at) = value_offset(doc.as_bytes(), &path) {
                proptest::prop_assert!(at <= doc.len());
            }
        }
    }
}
