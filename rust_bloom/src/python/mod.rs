//! The Python extension module that maturin builds, one binding file per component; each
//! converts arguments, releases the GIL around the work and maps errors to Python exceptions.
mod bloom;
mod dedup;
mod extract;
mod filters;
mod line_filter;
mod minhash;
mod report;
mod suffix;
mod text_stats;
mod workfile;

use pyo3::prelude::*;

#[pymodule]
fn _rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    bloom::register(m)?;
    dedup::register(m)?;
    extract::register(m)?;
    filters::register(m)?;
    line_filter::register(m)?;
    minhash::register(m)?;
    report::register(m)?;
    suffix::register(m)?;
    text_stats::register(m)?;
    workfile::register(m)?;
    Ok(())
}
