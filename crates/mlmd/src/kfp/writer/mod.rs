//! Records KFP pods into MLMD, idempotently.
//!
//! Differences from KFP's writer, each for a failure it had:
//! - Identity is deterministic: execution external id `podline/kfp/<ns>/<uid>`,
//!   output artifacts `…/<uid>/<output>`, run context `podline/kfp-run/<ns>/<wf>`.
//!   A restart at any point finds its earlier writes instead of duplicating them.
//! - Each phase is one atomic `PutExecution` (execution, events, artifacts,
//!   association, attributions), so there are no half-written steps.
//! - Contexts are created first and looked up (`GetContextByTypeAndName`, no
//!   full scans) only when the create says `AlreadyExists` (a restart, or the
//!   name taken in another namespace). Resolving a context or a type is
//!   single-flight: the workers that need the same one wait for the first,
//!   so a backlog of N pods of one workflow makes one `PutContexts`, not N
//!   racing ones answered `AlreadyExists`.
//! - Write transactions per pod: one when the pod is first seen (NEW or
//!   RUNNING, its inputs linked), one when it finishes (state, outputs,
//!   output parameters, late inputs), both in one `PutExecution`; a pod
//!   first seen finished costs one. [`KfpWriter::record_unless_inputs_missing`]
//!   holds a finished pod back, writing nothing, while its upstream artifacts
//!   are missing, so a backlog written out of order does not cost a second
//!   write (`PutEvents`) per downstream pod.
//! - `last_known_state` follows the pod: NEW/RUNNING, then COMPLETE, FAILED,
//!   CACHED or CANCELED. A terminal state is written in the same transaction
//!   as the outputs, so "terminal" means "outputs recorded".
//!
//! The writer holds no lock across an await; its memo only saves round trips
//! and may be lost at any time.
//!
//! The parts (`execution`, `inputs`, `registry` and `cancel` each add methods
//! to `record`'s [`KfpWriter`]; all build on `memo`, `flight` and `mapping`,
//! which name nothing else of the writer's):
//! - `record`: [`KfpWriter`], its entry points and the per-pod state machine
//!   (what MLMD has, what the pod is, the one write between them);
//! - `execution`: the execution's transactions (first sight, finish) and
//!   reading back what an earlier run or another writer committed;
//! - `inputs`: linking a pod's inputs to their upstream artifacts;
//! - `registry`: run contexts and types, created or found, single-flight;
//! - `cancel`: the unfinished executions of vanished pods, and canceling them;
//! - `memo`: the bounded memo of what MLMD holds; `flight`: single-flight locks;
//! - `mapping`: pure, a pod's MLMD objects and identity, and MLMD's answers read.
//!
//! This file only declares and re-exports them: a part naming an item
//! defined here would make a module cycle.

mod cancel;
mod execution;
mod flight;
mod inputs;
mod mapping;
mod memo;
mod record;
mod registry;

pub use mapping::{
    artifact_external_id, context_external_id, execution_external_id, execution_proto, is_terminal,
    pod_uid_of,
};
pub use record::{KfpWriter, Recorded, Written};
