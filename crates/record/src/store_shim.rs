//! Temporary mirror of `podline_store`'s observation types until the store crate lands.
#![allow(missing_docs)]
use std::collections::BTreeMap;

use jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodObservation {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub resource_version: u64,
    pub run: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub owner: Option<String>,
    pub node: Option<String>,
    pub phase: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub created_at: Option<Timestamp>,
    pub scheduled_at: Option<Timestamp>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub deletion_requested_at: Option<Timestamp>,
    pub containers: Vec<ContainerObservation>,
    pub transitions: Vec<(String, Timestamp)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerObservation {
    pub name: String,
    pub image: String,
    pub image_id: Option<String>,
    pub state: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub exit_code: Option<i32>,
    pub restarts: u32,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
}
