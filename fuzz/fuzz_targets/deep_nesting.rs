#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| styrmin_fuzz::deep_nesting(data));
