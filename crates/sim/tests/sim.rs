//! Integration tests of the sim, one binary with a module per area.

mod sim {
    pub mod common;
    mod crud;
    mod errors;
    mod exec;
    mod faults;
    mod gc;
    mod http2;
    mod kinds;
    mod kubectl;
    mod kubectl_kinds;
    mod kubectl_kit;
    mod kubelet;
    mod layering;
    mod limits;
    mod python;
    mod volumes;
    mod watch;
}
