//! Arbitrary bytes opened as a store file and read in full: recovery, every tree walk and
//! reduction must return errors, never panic or loop forever.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    settee_store::fuzz_open(data);
});
