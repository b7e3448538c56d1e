//! MLMD wire messages: the subset of `ml_metadata` that podline sends and reads.
//!
//! Hand-written `prost` messages implementing `proto/mlmd_subset.proto` (the
//! specification; field numbers from MLMD 1.17). Writing them by hand keeps
//! the build free of protoc and of a build script. MLMD's protos are proto2:
//! presence matters (MLMD checks `has_id()` to decide insert versus update),
//! so every scalar is an `Option`.
//!
//! Field-level docs live in the `.proto` file and MLMD's documentation; the
//! names here are MLMD's own, so they are not repeated on every field.
#![allow(missing_docs)]

use std::collections::BTreeMap;

/// MLMD's property type enum: the schema of a type's declared properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum PropertyType {
    Unknown = 0,
    Int = 1,
    Double = 2,
    String = 3,
    Struct = 4,
    Proto = 5,
    Boolean = 6,
}

/// A property value (MLMD `Value`): one of int, double, string or bool.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Value {
    #[prost(oneof = "value::Kind", tags = "1, 2, 3, 6")]
    pub value: Option<value::Kind>,
}

/// The oneof inside [`Value`].
pub mod value {
    /// Which kind of value a [`super::Value`] holds.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(int64, tag = "1")]
        IntValue(i64),
        #[prost(double, tag = "2")]
        DoubleValue(f64),
        #[prost(string, tag = "3")]
        StringValue(String),
        #[prost(bool, tag = "6")]
        BoolValue(bool),
    }
}

impl Value {
    /// A string value, the kind KFP uses for almost every property.
    pub fn string(s: impl Into<String>) -> Self {
        Value {
            value: Some(value::Kind::StringValue(s.into())),
        }
    }
    /// An int value.
    pub fn int(i: i64) -> Self {
        Value {
            value: Some(value::Kind::IntValue(i)),
        }
    }
    /// A double value.
    pub fn double(d: f64) -> Self {
        Value {
            value: Some(value::Kind::DoubleValue(d)),
        }
    }
    /// The string inside, if this is a string value (tests and re-reads use it).
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Some(value::Kind::StringValue(s)) => Some(s),
            _ => None,
        }
    }
}

/// Properties keyed by name; ordered so requests are deterministic.
pub type Properties = BTreeMap<String, Value>;

/// An MLMD Artifact: a file or dataset a step read or wrote, identified by URI.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Artifact {
    #[prost(int64, optional, tag = "1")]
    pub id: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub type_id: Option<i64>,
    #[prost(string, optional, tag = "3")]
    pub uri: Option<String>,
    #[prost(btree_map = "string, message", tag = "4")]
    pub properties: Properties,
    #[prost(btree_map = "string, message", tag = "5")]
    pub custom_properties: Properties,
    #[prost(enumeration = "ArtifactState", optional, tag = "6")]
    pub state: Option<i32>,
    #[prost(string, optional, tag = "7")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "8")]
    pub r#type: Option<String>,
    #[prost(int64, optional, tag = "9")]
    pub create_time_since_epoch: Option<i64>,
    #[prost(int64, optional, tag = "10")]
    pub last_update_time_since_epoch: Option<i64>,
    #[prost(string, optional, tag = "11")]
    pub external_id: Option<String>,
}

/// `Artifact.State`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ArtifactState {
    Unknown = 0,
    Pending = 1,
    Live = 2,
    MarkedForDeletion = 3,
    Deleted = 4,
    Abandoned = 5,
    Reference = 6,
}

/// An MLMD ArtifactType (KFP: the component output type, or `NoType`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArtifactType {
    #[prost(int64, optional, tag = "1")]
    pub id: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(btree_map = "string, enumeration(PropertyType)", tag = "3")]
    pub properties: BTreeMap<String, i32>,
    #[prost(string, optional, tag = "4")]
    pub version: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub description: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub external_id: Option<String>,
}

/// An MLMD Event: the link between an execution and an artifact it read or wrote.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    #[prost(int64, optional, tag = "1")]
    pub artifact_id: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub execution_id: Option<i64>,
    #[prost(message, optional, tag = "3")]
    pub path: Option<EventPath>,
    #[prost(enumeration = "EventType", optional, tag = "4")]
    pub r#type: Option<i32>,
    #[prost(int64, optional, tag = "5")]
    pub milliseconds_since_epoch: Option<i64>,
}

/// `Event.Path`: which input or output of the step the artifact is.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventPath {
    #[prost(message, repeated, tag = "1")]
    pub steps: Vec<EventStep>,
}

/// `Event.Path.Step`: an index or a key (KFP uses keys: the input/output name).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventStep {
    #[prost(oneof = "event_step::Value", tags = "1, 2")]
    pub value: Option<event_step::Value>,
}

/// The oneof inside [`EventStep`].
pub mod event_step {
    /// An index or a key.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(int64, tag = "1")]
        Index(i64),
        #[prost(string, tag = "2")]
        Key(String),
    }
}

impl EventPath {
    /// A one-step path keyed by `key`, the shape KFP writes for inputs and outputs.
    pub fn key(key: impl Into<String>) -> Self {
        EventPath {
            steps: vec![EventStep {
                value: Some(event_step::Value::Key(key.into())),
            }],
        }
    }
    /// The first step's key, if any (how KFP reads the name back).
    pub fn first_key(&self) -> Option<&str> {
        match self.steps.first()?.value.as_ref()? {
            event_step::Value::Key(k) => Some(k),
            event_step::Value::Index(_) => None,
        }
    }
}

/// `Event.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EventType {
    Unknown = 0,
    DeclaredOutput = 1,
    DeclaredInput = 2,
    Input = 3,
    Output = 4,
    InternalInput = 5,
    InternalOutput = 6,
    PendingOutput = 7,
}

/// An MLMD Execution: one run of one step (KFP: one Argo pod).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Execution {
    #[prost(int64, optional, tag = "1")]
    pub id: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub type_id: Option<i64>,
    #[prost(enumeration = "ExecutionState", optional, tag = "3")]
    pub last_known_state: Option<i32>,
    #[prost(btree_map = "string, message", tag = "4")]
    pub properties: Properties,
    #[prost(btree_map = "string, message", tag = "5")]
    pub custom_properties: Properties,
    #[prost(string, optional, tag = "6")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub r#type: Option<String>,
    #[prost(int64, optional, tag = "8")]
    pub create_time_since_epoch: Option<i64>,
    #[prost(int64, optional, tag = "9")]
    pub last_update_time_since_epoch: Option<i64>,
    #[prost(string, optional, tag = "10")]
    pub external_id: Option<String>,
}

/// `Execution.State`: what podline sets and KFP's writer never did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ExecutionState {
    Unknown = 0,
    New = 1,
    Running = 2,
    Complete = 3,
    Failed = 4,
    Cached = 5,
    Canceled = 6,
}

/// An MLMD ExecutionType (KFP: `components.<name>@sha256=<hex>`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecutionType {
    #[prost(int64, optional, tag = "1")]
    pub id: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(btree_map = "string, enumeration(PropertyType)", tag = "3")]
    pub properties: BTreeMap<String, i32>,
    #[prost(string, optional, tag = "6")]
    pub version: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub description: Option<String>,
    #[prost(string, optional, tag = "9")]
    pub external_id: Option<String>,
}

/// An MLMD ContextType (KFP: `KfpRun`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContextType {
    #[prost(int64, optional, tag = "1")]
    pub id: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(btree_map = "string, enumeration(PropertyType)", tag = "3")]
    pub properties: BTreeMap<String, i32>,
    #[prost(string, optional, tag = "4")]
    pub version: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub description: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub external_id: Option<String>,
}

/// An MLMD Context: a group of executions and artifacts (KFP: one workflow run).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Context {
    #[prost(int64, optional, tag = "1")]
    pub id: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub type_id: Option<i64>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(btree_map = "string, message", tag = "4")]
    pub properties: Properties,
    #[prost(btree_map = "string, message", tag = "5")]
    pub custom_properties: Properties,
    #[prost(string, optional, tag = "6")]
    pub r#type: Option<String>,
    #[prost(int64, optional, tag = "7")]
    pub create_time_since_epoch: Option<i64>,
    #[prost(int64, optional, tag = "8")]
    pub last_update_time_since_epoch: Option<i64>,
    #[prost(string, optional, tag = "9")]
    pub external_id: Option<String>,
}

/// Artifact-in-context relation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Attribution {
    #[prost(int64, optional, tag = "1")]
    pub artifact_id: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub context_id: Option<i64>,
}

/// Execution-in-context relation.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Association {
    #[prost(int64, optional, tag = "1")]
    pub execution_id: Option<i64>,
    #[prost(int64, optional, tag = "2")]
    pub context_id: Option<i64>,
}

/// Defines a request/response message pair concisely. Every field is a
/// `prost` attribute list, a name and a type.
macro_rules! message {
    ($(#[$doc:meta])* $name:ident { $( #[prost($($attr:tt)*)] $field:ident : $ty:ty ),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct $name {
            $( #[prost($($attr)*)] pub $field: $ty, )*
        }
    };
}

message!(
    /// Upsert an artifact type (idempotent when the schema is compatible).
    PutArtifactTypeRequest {
    #[prost(message, optional, tag = "1")] artifact_type: Option<ArtifactType>,
    #[prost(bool, optional, tag = "2")] can_add_fields: Option<bool>,
    #[prost(bool, optional, tag = "5")] can_omit_fields: Option<bool>,
});
message!(
    /// The artifact type id.
    PutArtifactTypeResponse {
    #[prost(int64, optional, tag = "1")] type_id: Option<i64>,
});
message!(
    /// Upsert an execution type.
    PutExecutionTypeRequest {
    #[prost(message, optional, tag = "1")] execution_type: Option<ExecutionType>,
    #[prost(bool, optional, tag = "2")] can_add_fields: Option<bool>,
    #[prost(bool, optional, tag = "5")] can_omit_fields: Option<bool>,
});
message!(
    /// The execution type id.
    PutExecutionTypeResponse {
    #[prost(int64, optional, tag = "1")] type_id: Option<i64>,
});
message!(
    /// Upsert a context type.
    PutContextTypeRequest {
    #[prost(message, optional, tag = "1")] context_type: Option<ContextType>,
    #[prost(bool, optional, tag = "2")] can_add_fields: Option<bool>,
    #[prost(bool, optional, tag = "5")] can_omit_fields: Option<bool>,
});
message!(
    /// The context type id.
    PutContextTypeResponse {
    #[prost(int64, optional, tag = "1")] type_id: Option<i64>,
});
message!(
    /// List context types: the cheap connectivity probe.
    GetContextTypesRequest {});
message!(
    /// All context types.
    GetContextTypesResponse {
    #[prost(message, repeated, tag = "1")] context_types: Vec<ContextType>,
});
message!(
    /// Insert or update contexts.
    PutContextsRequest {
    #[prost(message, repeated, tag = "1")] contexts: Vec<Context>,
});
message!(
    /// Ids of the contexts put, in request order.
    PutContextsResponse {
    #[prost(int64, repeated, tag = "1")] context_ids: Vec<i64>,
});
message!(
    /// Look a context up by type and name: an indexed lookup, not a scan.
    GetContextByTypeAndNameRequest {
    #[prost(string, optional, tag = "1")] type_name: Option<String>,
    #[prost(string, optional, tag = "2")] context_name: Option<String>,
    #[prost(string, optional, tag = "3")] type_version: Option<String>,
});
message!(
    /// The context, absent when not found.
    GetContextByTypeAndNameResponse {
    #[prost(message, optional, tag = "1")] context: Option<Context>,
});
message!(
    /// Contexts by external id.
    GetContextsByExternalIdsRequest {
    #[prost(string, repeated, tag = "1")] external_ids: Vec<String>,
});
message!(
    /// The contexts found.
    GetContextsByExternalIdsResponse {
    #[prost(message, repeated, tag = "1")] contexts: Vec<Context>,
});
message!(
    /// One artifact (new or existing) with the event linking it to the execution.
    ArtifactAndEvent {
    #[prost(message, optional, tag = "1")] artifact: Option<Artifact>,
    #[prost(message, optional, tag = "2")] event: Option<Event>,
});
message!(
    /// `PutExecutionRequest.Options`.
    PutExecutionOptions {
    #[prost(bool, optional, tag = "1")] reuse_context_if_already_exist: Option<bool>,
    #[prost(bool, optional, tag = "2")] reuse_artifact_if_already_exist_by_external_id: Option<bool>,
});
message!(
    /// Atomic write: an execution, its artifacts and events, and its contexts
    /// (associations and attributions are created too) in one transaction.
    PutExecutionRequest {
    #[prost(message, optional, tag = "1")] execution: Option<Execution>,
    #[prost(message, repeated, tag = "2")] artifact_event_pairs: Vec<ArtifactAndEvent>,
    #[prost(message, repeated, tag = "3")] contexts: Vec<Context>,
    #[prost(message, optional, tag = "4")] options: Option<PutExecutionOptions>,
});
message!(
    /// Ids assigned by [`PutExecutionRequest`].
    PutExecutionResponse {
    #[prost(int64, optional, tag = "1")] execution_id: Option<i64>,
    #[prost(int64, repeated, tag = "2")] artifact_ids: Vec<i64>,
    #[prost(int64, repeated, tag = "3")] context_ids: Vec<i64>,
});
message!(
    /// Insert or update executions.
    PutExecutionsRequest {
    #[prost(message, repeated, tag = "1")] executions: Vec<Execution>,
});
message!(
    /// Ids of the executions put.
    PutExecutionsResponse {
    #[prost(int64, repeated, tag = "1")] execution_ids: Vec<i64>,
});
message!(
    /// Insert events (immutable; a duplicate is AlreadyExists).
    PutEventsRequest {
    #[prost(message, repeated, tag = "1")] events: Vec<Event>,
});
message!(
    /// Empty.
    PutEventsResponse {});
message!(
    /// Insert relations (idempotent: an existing relation is a no-op).
    PutAttributionsAndAssociationsRequest {
    #[prost(message, repeated, tag = "1")] attributions: Vec<Attribution>,
    #[prost(message, repeated, tag = "2")] associations: Vec<Association>,
});
message!(
    /// Empty.
    PutAttributionsAndAssociationsResponse {});
message!(
    /// Executions by external id: how podline finds its own earlier writes.
    GetExecutionsByExternalIdsRequest {
    #[prost(string, repeated, tag = "1")] external_ids: Vec<String>,
});
message!(
    /// The executions found.
    GetExecutionsByExternalIdsResponse {
    #[prost(message, repeated, tag = "1")] executions: Vec<Execution>,
});
message!(
    /// Artifacts by external id.
    GetArtifactsByExternalIdsRequest {
    #[prost(string, repeated, tag = "1")] external_ids: Vec<String>,
});
message!(
    /// The artifacts found.
    GetArtifactsByExternalIdsResponse {
    #[prost(message, repeated, tag = "1")] artifacts: Vec<Artifact>,
});
message!(
    /// Executions by id.
    GetExecutionsByIdRequest {
    #[prost(int64, repeated, tag = "1")] execution_ids: Vec<i64>,
});
message!(
    /// The executions found.
    GetExecutionsByIdResponse {
    #[prost(message, repeated, tag = "1")] executions: Vec<Execution>,
});
message!(
    /// Artifacts by id.
    GetArtifactsByIdRequest {
    #[prost(int64, repeated, tag = "1")] artifact_ids: Vec<i64>,
});
message!(
    /// The artifacts found.
    GetArtifactsByIdResponse {
    #[prost(message, repeated, tag = "1")] artifacts: Vec<Artifact>,
});
message!(
    /// Artifacts by URI: how KFP links a step's inputs to upstream outputs.
    GetArtifactsByUriRequest {
    #[prost(string, repeated, tag = "2")] uris: Vec<String>,
});
message!(
    /// The artifacts found.
    GetArtifactsByUriResponse {
    #[prost(message, repeated, tag = "1")] artifacts: Vec<Artifact>,
});
message!(
    /// Executions in a context (what the KFP UI calls for a run).
    GetExecutionsByContextRequest {
    #[prost(int64, optional, tag = "1")] context_id: Option<i64>,
});
message!(
    /// The executions in the context.
    GetExecutionsByContextResponse {
    #[prost(message, repeated, tag = "1")] executions: Vec<Execution>,
    #[prost(string, optional, tag = "2")] next_page_token: Option<String>,
});
message!(
    /// Artifacts in a context.
    GetArtifactsByContextRequest {
    #[prost(int64, optional, tag = "1")] context_id: Option<i64>,
});
message!(
    /// The artifacts in the context.
    GetArtifactsByContextResponse {
    #[prost(message, repeated, tag = "1")] artifacts: Vec<Artifact>,
    #[prost(string, optional, tag = "2")] next_page_token: Option<String>,
});
message!(
    /// Paging and filtering of a list call (MLMD's filter syntax, e.g.
    /// `last_known_state IN (NEW, RUNNING)`; pages of at most 100).
    ListOperationOptions {
    #[prost(int32, optional, tag = "1")] max_result_size: Option<i32>,
    #[prost(string, optional, tag = "3")] next_page_token: Option<String>,
    #[prost(string, optional, tag = "4")] filter_query: Option<String>,
});
message!(
    /// Executions matching a filter, one page at a time.
    GetExecutionsRequest {
    #[prost(message, optional, tag = "1")] options: Option<ListOperationOptions>,
});
message!(
    /// One page of executions and the token for the next, if any.
    GetExecutionsResponse {
    #[prost(message, repeated, tag = "1")] executions: Vec<Execution>,
    #[prost(string, optional, tag = "2")] next_page_token: Option<String>,
});
message!(
    /// Events of executions.
    GetEventsByExecutionIdsRequest {
    #[prost(int64, repeated, tag = "1")] execution_ids: Vec<i64>,
});
message!(
    /// The events found.
    GetEventsByExecutionIdsResponse {
    #[prost(message, repeated, tag = "1")] events: Vec<Event>,
});
