#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| styrmin_fuzz::rendered_stream(data));
