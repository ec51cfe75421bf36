//! Keys and headers side files a batch at a time: the bytes lakesink's `.keys` / `.headers` writers write, and the
//! Arrow headers column the direct reader builds from confluent-kafka's `Message.headers()`.
//!
//! Each function is the native twin of one in `lakesink/objects/formats/side_columns.py` or
//! `lakesink/executor/kafka_reader.py`, and gives the same bytes (`tests/unit/test_native_sides.py` compares them).
//! An input those functions would hand to the record path (a record without headers, a key that is not UTF-8, JSON
//! text that needs an escape) is refused here too: an error, or `None` for the JSON text, and lakesink takes its
//! Python path, which decides it.

use base64::Engine;
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::offsets;

/// A large_binary column handed back: (value bytes, n + 1 little-endian 64-bit offsets).
type Column<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// Where a kernel writes its values. Each kernel runs twice: counted (each value's end, the total), then filled
/// into the bytes object of exactly that size, so the output is written once, in place.
enum Out<'a> {
    Count { len: usize, ends: Vec<i64> },
    Fill { buf: &'a mut [u8], at: usize },
}

impl Out<'_> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        match self {
            Out::Count { len, .. } => *len += b.len(),
            Out::Fill { buf, at } => {
                buf[*at..*at + b.len()].copy_from_slice(b);
                *at += b.len();
            }
        }
    }

    #[inline]
    fn byte(&mut self, b: u8) {
        match self {
            Out::Count { len, .. } => *len += 1,
            Out::Fill { buf, at } => {
                buf[*at] = b;
                *at += 1;
            }
        }
    }

    /// The standard base64 of `v`, with padding.
    fn base64(&mut self, v: &[u8]) {
        match self {
            Out::Count { len, .. } => *len += v.len().div_ceil(3) * 4,
            Out::Fill { buf, at } => {
                *at += base64::engine::general_purpose::STANDARD
                    .encode_slice(v, &mut buf[*at..])
                    .expect("counted: the buffer holds the encoding");
            }
        }
    }

    fn end_value(&mut self) {
        if let Out::Count { len, ends } = self {
            ends.push(*len as i64);
        }
    }

    fn varint(&mut self, mut z: u64) {
        while z >= 0x80 {
            self.byte((z as u8) | 0x80);
            z >>= 7;
        }
        self.byte(z as u8);
    }

    /// Avro's `bytes` / `string` datum: the zig-zag varint of the length (2 × length), then the bytes.
    fn avro_bytes(&mut self, v: &[u8]) {
        self.varint(2 * v.len() as u64);
        self.put(v);
    }
}

/// The column `emit` writes (run twice: counted, then filled).
fn column<'py>(py: Python<'py>, n: usize, emit: impl Fn(&mut Out)) -> PyResult<Column<'py>> {
    let mut count = Out::Count { len: 0, ends: Vec::with_capacity(n + 1) };
    count.end_value();
    emit(&mut count);
    let Out::Count { len, ends } = count else { unreachable!() };
    let data = PyBytes::new_with(py, len, |buf| {
        let mut fill = Out::Fill { buf, at: 0 };
        emit(&mut fill);
        debug_assert!(matches!(fill, Out::Fill { at, .. } if at == len));
        Ok(())
    })?;
    let ends = PyBytes::new_with(py, 8 * ends.len(), |buf| {
        for (chunk, e) in buf.chunks_exact_mut(8).zip(&ends) {
            chunk.copy_from_slice(&e.to_le_bytes());
        }
        Ok(())
    })?;
    Ok((data, ends))
}

/// The Avro `bytes` datum of each value of a binary column (`side_columns.avro_bytes_datums`).
#[pyfunction]
pub fn avro_bytes_datums<'py>(py: Python<'py>, data: &[u8], offsets_: &[u8]) -> PyResult<Column<'py>> {
    let ends = offsets("offsets", offsets_, data.len())?;
    column(py, ends.len() - 1, |out| {
        for w in ends.windows(2) {
            out.avro_bytes(&data[w[0]..w[1]]);
            out.end_value();
        }
    })
}

/// The JSON string of each value's standard base64 with padding, quotes included (`side_columns.b64_array` quoted:
/// JsonConverter's BYTES key).
#[pyfunction]
pub fn json_base64_strings<'py>(py: Python<'py>, data: &[u8], offsets_: &[u8]) -> PyResult<Column<'py>> {
    let ends = offsets("offsets", offsets_, data.len())?;
    column(py, ends.len() - 1, |out| {
        for w in ends.windows(2) {
            out.byte(b'"');
            out.base64(&data[w[0]..w[1]]);
            out.byte(b'"');
            out.end_value();
        }
    })
}

/// A batch's headers as `side_columns.headers_parts` gives them: per record its number of headers (at least one),
/// then every header's key (UTF-8) and value (UTF-8, or absent where `present` is 0).
struct Headers<'a> {
    counts: Vec<usize>,
    keys: &'a [u8],
    key_ends: Vec<usize>,
    values: &'a [u8],
    value_ends: Vec<usize>,
    present: Option<&'a [u8]>,
}

impl<'a> Headers<'a> {
    fn read(
        counts: &[u8],
        keys: &'a [u8],
        key_offsets: &[u8],
        values: &'a [u8],
        value_offsets: &[u8],
        present: Option<&'a [u8]>,
    ) -> PyResult<Self> {
        if !counts.len().is_multiple_of(8) {
            return Err(PyValueError::new_err("counts: not a whole number of 8-byte counts"));
        }
        let counts: Vec<i64> = counts.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        if counts.iter().any(|&c| c < 1) {
            return Err(PyValueError::new_err("counts: a record without headers (the record path writes it)"));
        }
        let key_ends = offsets("key_offsets", key_offsets, keys.len())?;
        let value_ends = offsets("value_offsets", value_offsets, values.len())?;
        let entries = key_ends.len() - 1;
        if value_ends.len() - 1 != entries
            || counts.iter().map(|&c| c as u64).sum::<u64>() != entries as u64
            || present.is_some_and(|p| p.len() != entries)
        {
            return Err(PyValueError::new_err("counts, keys, values and present do not describe the same headers"));
        }
        for (what, data, ends) in [("a header key", keys, &key_ends), ("a header value", values, &value_ends)] {
            if std::str::from_utf8(&data[ends[0]..ends[entries]]).is_err() {
                return Err(PyValueError::new_err(format!("{what} is not UTF-8 (the record path writes it)")));
            }
        }
        let counts = counts.into_iter().map(|c| c as usize).collect();
        Ok(Headers { counts, keys, key_ends, values, value_ends, present })
    }

    fn key(&self, i: usize) -> &'a [u8] {
        &self.keys[self.key_ends[i]..self.key_ends[i + 1]]
    }

    fn value(&self, i: usize) -> Option<&'a [u8]> {
        match self.present {
            Some(p) if p[i] == 0 => None,
            _ => Some(&self.values[self.value_ends[i]..self.value_ends[i + 1]]),
        }
    }

    /// Whether some key or value holds a byte JSON escapes (`"`, `\`, a control character).
    fn needs_escape(&self) -> bool {
        let keys = &self.keys[self.key_ends[0]..self.key_ends[self.key_ends.len() - 1]];
        let values = &self.values[self.value_ends[0]..self.value_ends[self.value_ends.len() - 1]];
        // no early exit: a loop the compiler vectorises (a batch's text is a few hundred KB)
        let escape = |data: &[u8]| data.iter().fold(false, |any, &b| any | (b < 0x20) | (b == b'"') | (b == b'\\'));
        escape(keys) || escape(values)
    }
}

/// The Avro headers datum of each record (`side_columns.avro_headers_from_parts`): the array's item count, each
/// header's key, its value's union branch (0 null, 1 string) and value, then the array's closing 0.
#[pyfunction]
#[pyo3(signature = (counts, keys, key_offsets, values, value_offsets, present=None))]
pub fn avro_headers<'py>(
    py: Python<'py>,
    counts: &[u8],
    keys: &[u8],
    key_offsets: &[u8],
    values: &[u8],
    value_offsets: &[u8],
    present: Option<&[u8]>,
) -> PyResult<Column<'py>> {
    let h = Headers::read(counts, keys, key_offsets, values, value_offsets, present)?;
    column(py, h.counts.len(), |out| {
        let mut i = 0;
        for &c in &h.counts {
            out.varint(2 * c as u64);
            for j in i..i + c {
                out.avro_bytes(h.key(j));
                match h.value(j) {
                    Some(v) => {
                        out.byte(2);
                        out.avro_bytes(v);
                    }
                    None => out.byte(0),
                }
            }
            i += c;
            out.byte(0);
            out.end_value();
        }
    })
}

/// The JSON headers line of each record (`side_columns.json_header_lines`):
/// `{"headers":[{"key":K,"value":V},...]}`, compact; None when some key or value needs an escape (lakesink's JSON
/// encoder writes those).
#[pyfunction]
#[pyo3(signature = (counts, keys, key_offsets, values, value_offsets, present=None))]
pub fn json_headers<'py>(
    py: Python<'py>,
    counts: &[u8],
    keys: &[u8],
    key_offsets: &[u8],
    values: &[u8],
    value_offsets: &[u8],
    present: Option<&[u8]>,
) -> PyResult<Option<Column<'py>>> {
    let h = Headers::read(counts, keys, key_offsets, values, value_offsets, present)?;
    if h.needs_escape() {
        return Ok(None);
    }
    let lines = column(py, h.counts.len(), |out| {
        let mut i = 0;
        for &c in &h.counts {
            out.put(b"{\"headers\":[");
            for j in i..i + c {
                if j > i {
                    out.byte(b',');
                }
                out.put(b"{\"key\":\"");
                out.put(h.key(j));
                match h.value(j) {
                    Some(v) => {
                        out.put(b"\",\"value\":\"");
                        out.put(v);
                        out.put(b"\"}");
                    }
                    None => out.put(b"\",\"value\":null}"),
                }
            }
            i += c;
            out.put(b"]}");
            out.end_value();
        }
    })?;
    Ok(Some(lines))
}

/// An Arrow validity bitmap (least significant bit first) of `valid`, or None when every element is valid.
fn bitmap<'py>(py: Python<'py>, valid: &[bool]) -> Option<Bound<'py, PyBytes>> {
    if valid.iter().all(|&v| v) {
        return None;
    }
    let mut bits = vec![0u8; valid.len().div_ceil(8)];
    for (i, _) in valid.iter().enumerate().filter(|(_, &v)| v) {
        bits[i / 8] |= 1 << (i % 8);
    }
    Some(PyBytes::new(py, &bits))
}

fn int32_offsets<'py>(py: Python<'py>, ends: &[usize]) -> PyResult<Bound<'py, PyBytes>> {
    if ends.last().is_some_and(|&e| e > i32::MAX as usize) {
        return Err(PyOverflowError::new_err("more than 2 GiB of headers in one batch"));
    }
    let bytes: Vec<u8> = ends.iter().flat_map(|&e| (e as i32).to_le_bytes()).collect();
    Ok(PyBytes::new(py, &bytes))
}

/// The buffers of the Arrow column `list<struct<key: string, value: binary>>` of a batch's `Message.headers()`
/// (each None or a list of (str, bytes or None) tuples; None and an empty list both give a null, as Spark's
/// read): (list validity or None, list offsets, key offsets, key bytes, value validity or None, value offsets,
/// value bytes), offsets 32-bit little-endian. Anything else is a TypeError (the caller converts it in Python).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn header_buffers<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyList>,
) -> PyResult<(
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
)> {
    let n = headers.len();
    let mut listed = Vec::with_capacity(n);
    let mut list_ends = Vec::with_capacity(n + 1);
    list_ends.push(0usize);
    let (mut keys, mut key_ends) = (Vec::new(), vec![0usize]);
    let (mut values, mut value_ends, mut present) = (Vec::new(), vec![0usize], Vec::new());
    for record in headers.iter() {
        let pairs = if record.is_none() { None } else { Some(record.cast_into::<PyList>()?) };
        let count = pairs.as_ref().map_or(0, |p| p.len());
        listed.push(count > 0);
        for pair in pairs.iter().flat_map(|p| p.iter()) {
            let pair = pair.cast_into::<PyTuple>()?;
            if pair.len() != 2 {
                return Err(PyTypeError::new_err("a header is not a (key, value) pair"));
            }
            keys.extend_from_slice(pair.get_borrowed_item(0)?.cast::<PyString>()?.to_str()?.as_bytes());
            key_ends.push(keys.len());
            let value = pair.get_borrowed_item(1)?;
            present.push(!value.is_none());
            if !value.is_none() {
                values.extend_from_slice(value.cast::<PyBytes>()?.as_bytes());
            }
            value_ends.push(values.len());
        }
        list_ends.push(key_ends.len() - 1);
    }
    Ok((
        bitmap(py, &listed),
        int32_offsets(py, &list_ends)?,
        int32_offsets(py, &key_ends)?,
        PyBytes::new(py, &keys),
        bitmap(py, &present),
        int32_offsets(py, &value_ends)?,
        PyBytes::new(py, &values),
    ))
}
