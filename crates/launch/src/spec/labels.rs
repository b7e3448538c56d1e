//! The labels podline puts on a task's pod, and the names and limits it builds the pod within.

use std::time::Duration;

/// Label carrying the launch id: a random id chosen before the first create attempt. It is what
/// makes create idempotent: an `AlreadyExists` answer is ours exactly when the existing pod
/// carries our launch id.
pub const LAUNCH_ID_LABEL: &str = "podline.io/launch-id";
/// Label carrying the user's task id; a reattaching run finds a running pod of the same task by
/// it.
pub const TASK_ID_LABEL: &str = "podline.io/task-id";
/// Label grouping the pods of one invocation that runs many tasks, for `kubectl get -l`.
pub const RUN_LABEL: &str = "podline.io/run";
/// Name of the main container when neither the template nor the task names one.
pub const DEFAULT_CONTAINER: &str = "task";
/// Length of the random name suffix (as Airflow's KubernetesPodOperator does).
pub const SUFFIX_LEN: usize = 8;
/// Maximum pod name length podline generates (a DNS-1123 label, so the name also works as a
/// hostname and label value).
pub const MAX_GENERATED_NAME: usize = 63;

/// The largest `activeDeadlineSeconds` the API server accepts (it validates 1..=2^31-1).
pub const MAX_ACTIVE_DEADLINE: Duration = Duration::from_secs(2_147_483_647);
