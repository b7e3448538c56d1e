//! The task description ([`TaskSpec`]) and how it becomes a Pod.
//!
//! A pod is built from an optional template (a Pod manifest, YAML or JSON) with the task's own
//! fields laid over it: they always win. podline then adds what makes a launch safe to retry and
//! find again:
//!
//! - a unique name: the base name plus `-` and 8 random `[a-z0-9]` characters (unless
//!   `exact_name`), so two runs of the same task never clash;
//! - the label [`LAUNCH_ID_LABEL`], chosen before the first POST: when a create's response is
//!   lost and the retry answers `AlreadyExists`, this label tells our pod from someone else's;
//! - [`TASK_ID_LABEL`] (to find a task's running pod again and reattach to it) and
//!   [`RUN_LABEL`] (to group the pods of one invocation that runs many tasks);
//! - `restartPolicy: Never`: a task runs once, its exit code is the result.
//!
//! Env values are secrets as far as podline is concerned: nothing here logs them, and
//! [`TaskSpec`]'s `Debug` prints env names only.
//!
//! One job per module, this one only declares and re-exports them: `task` holds what a user says
//! ([`TaskSpec`], [`PullPolicy`]); `built` the pod ready to create ([`BuiltPod`]); `labels` the
//! labels and name limits; `pod` builds the pod ([`TaskSpec::build_pod`], names, launch ids);
//! `validate` checks names, labels and quantities as the API server will; `parse` reads
//! `KEY=VALUE` values, resource lists and pod templates; `file` reads and checks a tasks file
//! ([`parse_tasks`]).

mod built;
mod file;
mod labels;
mod parse;
mod pod;
mod task;
mod validate;

pub use built::BuiltPod;
pub use file::parse_tasks;
pub use labels::{
    DEFAULT_CONTAINER, LAUNCH_ID_LABEL, MAX_ACTIVE_DEADLINE, MAX_GENERATED_NAME, RUN_LABEL,
    SUFFIX_LEN, TASK_ID_LABEL,
};
pub use parse::{load_template, parse_key_value, parse_resources, parse_template};
pub use pod::{new_launch_id, unique_name};
pub use task::{PullPolicy, TaskSpec};
pub use validate::{is_quantity, validate_label_key, validate_label_value, validate_pod_name};
