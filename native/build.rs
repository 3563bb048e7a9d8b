// pyo3's cfgs (the Python version, the limited API, PyPy) for this crate's
// own code: py/text.rs reads a str's storage where its layout is public.
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
