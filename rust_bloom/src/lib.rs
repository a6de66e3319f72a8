//! Placeholder module root; replaced by the Bloom filter implementation.
use pyo3::prelude::*;

#[pymodule]
fn _rust_bloom(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
