//! Canceling the executions of pods that vanished while nobody watched.
//!
//! Why a module of its own: it is the one job that starts from MLMD rather
//! than from a pod (a paged, filtered query of this writer's unfinished
//! executions), and the only write that makes the memo forget a pod.

use super::mapping::{or_empty, pod_uid_of, writable};
use super::record::KfpWriter;
use crate::error::MlmdError;
use crate::proto::*;

impl KfpWriter {
    /// Executions this writer recorded that are not finished (NEW or
    /// RUNNING), in `namespace` or in all namespaces: the candidates for
    /// CANCELED when their pod vanished while nobody watched. Paged (MLMD
    /// caps a page at 100), never a full unfiltered scan.
    pub async fn unfinished_executions(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<Execution>, MlmdError> {
        let prefix = match namespace {
            Some(ns) => format!("podline/kfp/{ns}/%"),
            None => "podline/kfp/%".to_owned(),
        };
        let filter = format!("external_id LIKE '{prefix}' AND last_known_state IN (NEW, RUNNING)");
        let mut all = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .get_executions(GetExecutionsRequest {
                    options: Some(ListOperationOptions {
                        max_result_size: Some(100),
                        next_page_token: token.take(),
                        filter_query: Some(filter.clone()),
                    }),
                })
                .await;
            let page = or_empty(page)?;
            all.extend(page.executions.into_iter().map(writable));
            match page.next_page_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(all),
            }
        }
    }

    /// Mark an unfinished execution CANCELED (its pod is gone; the caller
    /// makes sure no pod event of it is being written). The memo forgets it.
    pub async fn cancel(&self, execution: &Execution) -> Result<(), MlmdError> {
        let mut update = execution.clone();
        update.last_known_state = Some(ExecutionState::Canceled as i32);
        self.client
            .put_executions(PutExecutionsRequest {
                executions: vec![update],
            })
            .await?;
        if let Some(uid) = pod_uid_of(execution) {
            self.memo().pods.remove(uid);
        }
        Ok(())
    }
}
