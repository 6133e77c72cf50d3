//! The `path_decode` target: the properties are `kubedav_fuzz_checks::path_decode`, which `make test`
//! also checks on the committed corpus.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kubedav_fuzz_checks::path_decode::check(data));
