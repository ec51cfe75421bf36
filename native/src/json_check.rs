//! The JSON sink's copy-through check.
//!
//! Connect's JsonConverter reads every JSON value and the S3 sink writes it again, so lakesink writes a value's own
//! bytes only when they are exactly what that round trip gives: Python's `json.loads`, then lakesink's
//! `compact_json` (`json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)`). This module
//! decides that for a whole Arrow binary column in one pass, without making a Python object per value.
//!
//! It is sound, not complete: `true` means the value is its own re-encoding; `false` only means "not proven here",
//! and lakesink then decides that value with its Python check. So what is rare or costly to prove is declined: an
//! exponent in a number, a float of more than 15 significant digits (whether Python's `repr` picks those digits
//! depends on how it breaks ties between equally short texts), nesting deeper than `MAX_DEPTH`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Deeper values are declined (Python's own parser has a recursion limit near 1000).
const MAX_DEPTH: usize = 256;
/// Python refuses to read an integer of more digits (`sys.get_int_max_str_digits()`'s default).
const MAX_INT_DIGITS: usize = 4300;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    /// the keys of the objects being read, innermost last (one buffer for the whole value: no allocation per object)
    keys: Vec<(u64, &'a [u8])>,
}

/// Bytes a string's scan stops at: the closing quote, an escape, a control character (not allowed raw) and any
/// byte >= 0x80 (the string's UTF-8 is then checked).
const STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b < 0x20 || b >= 0x80 || b == b'"' as usize || b == b'\\' as usize;
        b += 1;
    }
    t
};

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().is_some(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    fn literal(&mut self, lit: &[u8]) -> bool {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        self.i += 1;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return true;
        }
        let first = self.keys.len();
        loop {
            if self.peek() != Some(b'"') {
                return false;
            }
            match self.string() {
                Some(key) => self.keys.push((fingerprint(key), key)),
                None => return false,
            }
            if self.peek() != Some(b':') {
                return false;
            }
            self.i += 1;
            if !self.value(depth + 1) {
                return false;
            }
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    let ok = unique(&mut self.keys[first..]);
                    self.keys.truncate(first);
                    return ok;
                }
                _ => return false,
            }
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        if depth >= MAX_DEPTH {
            return false;
        }
        self.i += 1;
        if self.peek() == Some(b']') {
            self.i += 1;
            return true;
        }
        loop {
            if !self.value(depth + 1) {
                return false;
            }
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// The raw bytes between the quotes of a string written as Python writes it, else None. Every escape it may
    /// hold has one spelling there, so two keys are the same string exactly when their raw bytes are equal.
    fn string(&mut self) -> Option<&'a [u8]> {
        let s = self.s;
        let start = self.i + 1;
        let mut j = start;
        let mut ascii = true;
        loop {
            while j < s.len() && !STOP[s[j] as usize] {
                j += 1;
            }
            match *s.get(j)? {
                b'"' => break,
                b'\\' => match *s.get(j + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                    // other control characters: \u00XX, lower-case hex; \b \t \n \f \r have short forms
                    b'u' => {
                        let hex = s.get(j + 2..j + 6)?;
                        let ok = hex[0] == b'0'
                            && hex[1] == b'0'
                            && matches!(hex[2], b'0' | b'1')
                            && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f')
                            && !(hex[2] == b'0' && matches!(hex[3], b'8' | b'9' | b'a' | b'c' | b'd'));
                        if !ok {
                            return None;
                        }
                        j += 6;
                    }
                    _ => return None,
                },
                0x00..=0x1f => return None,
                _ => {
                    ascii = false;
                    j += 1;
                }
            }
        }
        let content = &s[start..j];
        if !ascii {
            std::str::from_utf8(content).ok()?;
        }
        self.i = j + 1;
        Some(content)
    }

    fn number(&mut self) -> bool {
        let s = self.s;
        let start = self.i;
        let negative = s[start] == b'-';
        let mut j = start + usize::from(negative);
        match s.get(j) {
            Some(b'0') => j += 1,
            Some(b'1'..=b'9') => {
                while matches!(s.get(j), Some(b'0'..=b'9')) {
                    j += 1;
                }
            }
            _ => return false,
        }
        let int_digits = j - start - usize::from(negative);
        match s.get(j) {
            Some(b'e' | b'E') => false,
            Some(b'.') => {
                j += 1;
                let frac = j;
                while matches!(s.get(j), Some(b'0'..=b'9')) {
                    j += 1;
                }
                if j == frac || matches!(s.get(j), Some(b'e' | b'E')) {
                    return false;
                }
                self.i = j;
                short_float_is_repr(&s[start + usize::from(negative)..j], int_digits)
            }
            _ => {
                self.i = j;
                // json.loads("-0") is 0, written "0"
                int_digits <= MAX_INT_DIGITS && &s[start..j] != b"-0"
            }
        }
    }
}

/// Whether ``text``, digits '.' digits with ``int_digits`` before the point, is `repr` of its double, proven
/// without reading it: at most 15 significant digits (then no other text of as few digits reads back as the same
/// double, so `repr` has these digits), no trailing zero after the point but in "X.0", and in the range where `repr`
/// writes no exponent (below 1e15 here; 0.0001 and up). The same rule as lakesink's Python `_FLOAT`.
fn short_float_is_repr(text: &[u8], int_digits: usize) -> bool {
    let frac = &text[int_digits + 1..];
    if text.len() > 16 || (frac.len() > 1 && frac[frac.len() - 1] == b'0') {
        return false;
    }
    if text[0] != b'0' {
        return true;
    }
    // 0.xxx: below 0.0001 repr writes an exponent
    frac == b"0" || !frac.starts_with(b"0000")
}

/// A key's first seven bytes and its length, read as one number: different fingerprints, different keys.
fn fingerprint(key: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = key.len().min(7);
    head[..n].copy_from_slice(&key[..n]);
    head[7] = key.len().min(255) as u8;
    u64::from_le_bytes(head)
}

fn unique(keys: &mut [(u64, &[u8])]) -> bool {
    if keys.len() <= 16 {
        for (n, (f, k)) in keys.iter().enumerate() {
            if keys[..n].iter().any(|(g, x)| g == f && x == k) {
                return false;
            }
        }
        return true;
    }
    keys.sort_unstable();
    keys.windows(2).all(|w| w[0].1 != w[1].1)
}

impl<'a> Parser<'a> {
    fn new() -> Self {
        Parser { s: b"", i: 0, keys: Vec::new() }
    }

    /// Whether ``data[start..end]``, one JSON value, is exactly what lakesink would write for it (the module's note).
    fn canonical(&mut self, data: &'a [u8], start: usize, end: usize) -> bool {
        // a null value is not written as a JSON line: lakesink's Python path decides what it becomes
        if &data[start..end] == b"null" {
            return false;
        }
        self.s = &data[..end];
        self.i = start;
        self.keys.clear();
        self.value(0) && self.i == end
    }
}

/// One byte per value of a binary column: 1 where the value is proven canonical, else 0. ``data`` is the column's
/// value bytes, ``offsets`` its n + 1 little-endian 64-bit offsets into them.
#[pyfunction]
pub fn proven_mask<'py>(py: Python<'py>, data: &[u8], offsets: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    let ends = crate::offsets("offsets", offsets, data.len())?;
    let mask: Vec<u8> = py.detach(|| {
        let mut p = Parser::new();
        ends.windows(2).map(|w| u8::from(p.canonical(data, w[0], w[1]))).collect()
    });
    Ok(PyBytes::new(py, &mask))
}

