//! How hard the demo's launchers try to create a pod: the in-process launcher and the `podline
//! run` the launcher-kill round SIGKILLs make the same number of attempts.

/// Create attempts per pod in the demo (see where the launch config is built).
pub const DEMO_CREATE_ATTEMPTS: u32 = 24;
