//! lakesink's optional native kernels, for the sink's two costliest per-record steps (each has a Python twin that
//! writes the same bytes, and lakesink runs that twin when this module is absent or declines an input):
//!
//! - [`json_check`]: whether a JSON value is already exactly what Connect's read-and-write-again gives;
//! - [`side_files`]: the keys and headers side files' bytes, and the Arrow headers column, a batch at a time.
//!
//! Arrays cross the boundary as `bytes`: a binary column as its value bytes plus n + 1 little-endian 64-bit
//! offsets (Arrow's large_binary layout), so one call handles a whole batch without a Python object per value.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod json_check;
mod side_files;

/// The n + 1 offsets of a column, checked: ascending, within ``len`` bytes of data. ``what`` names the argument in
/// the error.
pub(crate) fn offsets(what: &str, offsets: &[u8], len: usize) -> PyResult<Vec<usize>> {
    if offsets.len() < 8 || !offsets.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!(
            "{what}: {} bytes is not a whole number (at least one) of 8-byte offsets",
            offsets.len()
        )));
    }
    let ends: Vec<i64> = offsets.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    if ends[0] < 0 || ends.windows(2).any(|w| w[0] > w[1]) || ends[ends.len() - 1] as u64 > len as u64 {
        return Err(PyValueError::new_err(format!("{what}: not ascending within the data")));
    }
    Ok(ends.into_iter().map(|e| e as usize).collect())
}

#[pymodule]
fn lakesink_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(json_check::proven_mask, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::header_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::avro_bytes_datums, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::json_base64_strings, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::avro_headers, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::json_headers, m)?)?;
    Ok(())
}
