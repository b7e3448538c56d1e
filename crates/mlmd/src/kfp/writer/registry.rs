//! Run contexts and types: created or found, memoized, single-flight.
//!
//! Why a module of its own: every pod of a workflow shares its run context
//! and every output its artifact type, so these are resolved once per
//! process (create first, look up only on `AlreadyExists`) while many
//! workers ask at once; the context's name rules (`<namespace>.<workflow>`
//! when the plain name is someone else's) live here too.

use super::mapping::{context_external_id, or_empty, string_props, writable_context};
use super::memo::Memo;
use super::record::KfpWriter;
use crate::error::MlmdError;
use crate::kfp::keys::RUN_CONTEXT_TYPE;
use crate::proto::*;

impl KfpWriter {
    /// The run context of a workflow: created if missing, else found by
    /// type and name. When the name is taken by the same workflow name in
    /// another namespace, `<namespace>.<workflow>` is used. Single-flight:
    /// concurrent callers for one workflow make one resolution.
    pub async fn run_context(&self, namespace: &str, workflow: &str) -> Result<Context, MlmdError> {
        let key = (namespace.to_owned(), workflow.to_owned());
        if let Some(c) = self.memo().contexts.get(&key) {
            return Ok(c.clone());
        }
        let _flight = self
            .flights
            .lock(format!("context\0{namespace}\0{workflow}"))
            .await;
        if let Some(c) = self.memo().contexts.get(&key) {
            return Ok(c.clone());
        }
        let context = self.resolve_context(namespace, workflow).await?;
        self.memo().contexts.insert(key, context.clone());
        Ok(context)
    }

    /// Create the run context, or find it when the create says it exists.
    /// Creating first costs one call for a new workflow (the common case)
    /// and two for one recorded before this process started.
    async fn resolve_context(&self, namespace: &str, workflow: &str) -> Result<Context, MlmdError> {
        let ours = context_external_id(namespace, workflow);
        let type_id = self.context_type().await?;
        let names = [workflow.to_owned(), format!("{namespace}.{workflow}")];
        for name in &names {
            let mut context = Context {
                type_id: Some(type_id),
                name: Some(name.clone()),
                external_id: Some(ours.clone()),
                properties: [
                    ("pipeline_name".to_owned(), Value::string(workflow)),
                    ("run_id".to_owned(), Value::string(workflow)),
                ]
                .into(),
                custom_properties: [("namespace".to_owned(), Value::string(namespace))].into(),
                ..Default::default()
            };
            match self
                .client
                .put_contexts(PutContextsRequest {
                    contexts: vec![context.clone()],
                })
                .await
            {
                Ok(r) => {
                    context.id = r.context_ids.first().copied();
                    return Ok(context);
                }
                // Taken: by us before a restart, by KFP's own writer (no
                // external id), or by the same workflow name in another
                // namespace; or our external id is taken under the other name.
                Err(e) if e.is_already_exists() => {}
                Err(e) => return Err(e),
            }
            let found = self
                .client
                .get_context_by_type_and_name(GetContextByTypeAndNameRequest {
                    type_name: Some(RUN_CONTEXT_TYPE.into()),
                    context_name: Some(name.clone()),
                    type_version: None,
                })
                .await?
                .context;
            if let Some(found) = found {
                let owner = found.external_id.as_deref();
                if owner.is_none() || owner == Some(ours.as_str()) {
                    return Ok(writable_context(found));
                }
            }
            // Someone else's name: the next one.
        }
        // Both names belong to others: find ours by external id.
        let found = self
            .client
            .get_contexts_by_external_ids(GetContextsByExternalIdsRequest {
                external_ids: vec![ours],
            })
            .await;
        or_empty(found)?
            .contexts
            .into_iter()
            .next()
            .map(writable_context)
            .ok_or(MlmdError::Rpc {
                method: "PutContexts",
                code: tonic::Code::AlreadyExists,
                message: format!("no free KfpRun context name for {namespace}/{workflow}"),
            })
    }

    /// The memoize-or-put rule every type follows: the memo first; then one caller per key
    /// puts the type (`can_add_fields`, so an older definition is extended) while the others
    /// wait and then find the memo; the id is memoized.
    async fn type_id<Put, Fut>(
        &self,
        flight: String,
        memoized: impl Fn(&Memo) -> Option<i64>,
        remember: impl FnOnce(&mut Memo, i64),
        method: &'static str,
        put: Put,
    ) -> Result<i64, MlmdError>
    where
        Put: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<i64>, MlmdError>>,
    {
        if let Some(id) = memoized(&self.memo()) {
            return Ok(id);
        }
        let _flight = self.flights.lock(flight).await;
        if let Some(id) = memoized(&self.memo()) {
            return Ok(id);
        }
        let id = put().await?.ok_or(MlmdError::MissingField {
            method,
            field: "type_id",
        })?;
        remember(&mut self.memo(), id);
        Ok(id)
    }

    /// The run context type, created (or extended) once per process.
    async fn context_type(&self) -> Result<i64, MlmdError> {
        self.type_id(
            "context-type".to_owned(),
            |memo| memo.context_type,
            |memo, id| memo.context_type = Some(id),
            "PutContextType",
            || async {
                let request = PutContextTypeRequest {
                    context_type: Some(ContextType {
                        name: Some(RUN_CONTEXT_TYPE.into()),
                        properties: string_props(&["pipeline_name", "run_id"]),
                        ..Default::default()
                    }),
                    can_add_fields: Some(true),
                    can_omit_fields: Some(true),
                };
                Ok(self.client.put_context_type(request).await?.type_id)
            },
        )
        .await
    }

    /// The execution type of a component version, created (or extended)
    /// once per process.
    pub(super) async fn execution_type(&self, component_version: &str) -> Result<i64, MlmdError> {
        let name = format!("components.{component_version}");
        self.type_id(
            format!("execution-type\0{name}"),
            |memo| memo.execution_types.get(&name).copied(),
            |memo, id| {
                memo.execution_types.insert(name.clone(), id);
            },
            "PutExecutionType",
            || async {
                let request = PutExecutionTypeRequest {
                    execution_type: Some(ExecutionType {
                        name: Some(name.clone()),
                        properties: string_props(&["pipeline_name", "run_id", "component_id"]),
                        ..Default::default()
                    }),
                    can_add_fields: Some(true),
                    can_omit_fields: Some(true),
                };
                Ok(self.client.put_execution_type(request).await?.type_id)
            },
        )
        .await
    }

    /// An artifact type by name, created (or extended) once per process.
    pub(super) async fn artifact_type(&self, name: &str) -> Result<i64, MlmdError> {
        self.type_id(
            format!("artifact-type\0{name}"),
            |memo| memo.artifact_types.get(name).copied(),
            |memo, id| {
                memo.artifact_types.insert(name.to_owned(), id);
            },
            "PutArtifactType",
            || async {
                let request = PutArtifactTypeRequest {
                    artifact_type: Some(ArtifactType {
                        name: Some(name.to_owned()),
                        ..Default::default()
                    }),
                    can_add_fields: Some(true),
                    can_omit_fields: Some(true),
                };
                Ok(self.client.put_artifact_type(request).await?.type_id)
            },
        )
        .await
    }
}
