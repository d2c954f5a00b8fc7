//! The bodies of the fuzz targets live in the main workspace (`fuzz-bodies/`), where
//! `cargo test` runs them over the seed corpus; this crate hands them libFuzzer's input.

pub use styrmin_fuzz_bodies::*;
