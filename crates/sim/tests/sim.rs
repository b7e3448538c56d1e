//! Integration tests of the sim, one binary with a module per area.

mod sim {
    pub mod common;
    mod crud;
    mod kubelet;
}
