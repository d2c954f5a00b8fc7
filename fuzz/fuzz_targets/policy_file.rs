#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| styrmin_fuzz::policy_file(data));
