//! An embedded, fault-injecting Kubernetes API server (pods, events, leases, watch, logs) with a simulated kubelet.

pub mod logs;
