//! Arbitrary bytes through the record, node and header decoders: errors are fine, panics
//! are not.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = settee_store::fuzz_decode(data);
});
