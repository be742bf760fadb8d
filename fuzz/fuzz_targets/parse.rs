//! The wire parser never panics and agrees with an independent reference reading of the frame
//! (acceptance, offsets, header fields, flow key; through GRE, the tunnel layer too), for every
//! link kind, with and without a NIC-stripped VLAN tag: `lro_testkit::parser`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lro_fuzz::parser::every_link(data);
});
