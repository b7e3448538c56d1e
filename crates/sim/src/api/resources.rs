//! The resource endpoints: one dispatcher that routes by [`RequestInfo`] to generic handlers
//! (list, watch, get, create, update, patch, delete) over any [`ApiKind`].

use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Node, PersistentVolumeClaim, Pod, Secret, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Time};
use podline_sim_core::cluster::{Stored, WorkflowTaskResult, Write};
use podline_sim_core::delete::{arrange_removal, delete_object, no_new_finalizers, update_write};
use podline_sim_core::kinds::ApiKind;
use podline_sim_core::part::Part;
use podline_sim_core::validation::Causes;
use serde_json::json;

use super::apply::{self, Writer};
use super::body::{JsonBody, read_raw_body};
use super::filter::Filter;
use super::query::{self, ListParams, WriteParams, continue_token};
use super::request_info::{RequestInfo, Verb};
use super::respond::{json_response, page_not_found};
use super::state::AppState;
use super::{delete, patch, watch};
use crate::status::{ApiError, ErrorResponse};

/// Routes a resource request to its kind's handler; 404 for unknown resources.
pub async fn dispatch(State(state): State<AppState>, req: Request) -> Response {
    let Some(info) = req.extensions().get::<RequestInfo>().cloned() else {
        return page_not_found();
    };
    if !info.is_resource {
        return page_not_found();
    }
    if !served_group_version(&info.group, &info.version) {
        return page_not_found();
    }
    let result = match (
        info.group.as_str(),
        info.version.as_str(),
        info.resource.as_str(),
    ) {
        ("", "v1", "pods") => handle::<Pod>(state, info, req).await,
        ("", "v1", "namespaces") => handle::<Namespace>(state, info, req).await,
        ("", "v1", "events") => handle::<Event>(state, info, req).await,
        ("", "v1", "nodes") => handle::<Node>(state, info, req).await,
        ("", "v1", "bindings") => legacy_binding(state, info, req).await,
        ("", "v1", "secrets") => handle::<Secret>(state, info, req).await,
        ("", "v1", "configmaps") => handle::<ConfigMap>(state, info, req).await,
        ("", "v1", "serviceaccounts") => handle::<ServiceAccount>(state, info, req).await,
        ("", "v1", "persistentvolumeclaims") => {
            handle::<PersistentVolumeClaim>(state, info, req).await
        }
        ("storage.k8s.io", "v1", "storageclasses") => {
            handle::<StorageClass>(state, info, req).await
        }
        ("coordination.k8s.io", "v1", "leases") => handle::<Lease>(state, info, req).await,
        ("policy", "v1", "poddisruptionbudgets") => {
            handle::<PodDisruptionBudget>(state, info, req).await
        }
        ("scheduling.k8s.io", "v1", "priorityclasses") => {
            handle::<PriorityClass>(state, info, req).await
        }
        ("argoproj.io", "v1alpha1", "workflowtaskresults") => {
            handle::<WorkflowTaskResult>(state, info, req).await
        }
        _ => Err(ApiError::path_not_found()),
    };
    result.unwrap_or_else(ErrorResponse::into_response)
}

/// Whether the sim serves this API group version (else its paths are not found by the mux, and
/// answer as [`page_not_found`] does).
fn served_group_version(group: &str, version: &str) -> bool {
    matches!(
        (group, version),
        ("", "v1")
            | ("coordination.k8s.io", "v1")
            | ("policy", "v1")
            | ("scheduling.k8s.io", "v1")
            | ("storage.k8s.io", "v1")
            | ("argoproj.io", "v1alpha1")
    )
}

/// The namespace part of a kind's table key.
fn key_namespace<K: ApiKind>(info: &RequestInfo) -> String {
    if K::NAMESPACED {
        info.namespace.clone()
    } else {
        String::new()
    }
}

async fn handle<K: ApiKind>(
    state: AppState,
    info: RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    if K::NAMESPACED && info.namespace.is_empty() && !info.name.is_empty() {
        return Err(ApiError::path_not_found());
    }
    let is_pod = K::RESOURCE == "pods";
    if info.name.is_empty() && matches!(info.verb, Verb::Update | Verb::Patch) {
        return Err(ApiError::method_not_allowed(info.verb.as_str()));
    }
    let query = req.uri().query().map(str::to_owned);
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let field_manager = query::Query::new(query.as_deref())
        .get("fieldManager")
        .map(str::to_owned);
    let writer = |part, apply| Writer::new(field_manager.as_deref(), &user_agent, apply, part);
    let validation = super::decode::FieldValidation::parse(
        query::Query::new(query.as_deref()).get("fieldValidation"),
    );
    match (info.subresource.as_str(), info.verb) {
        ("log", Verb::Get) if is_pod => super::logs::pod_log(&state, &info, query.as_deref()).await,
        ("exec", Verb::Get | Verb::Create) if is_pod => {
            super::exec::pod_exec(&state, &info, req).await
        }
        ("attach", Verb::Get | Verb::Create) if is_pod => {
            super::exec::pod_attach(&state, &info, req).await
        }
        ("binding", Verb::Create) if is_pod => {
            let dry_run = is_dry_run(query.as_deref())?;
            let body = read_body(&state, req).await?;
            super::binding::bind(
                &state,
                &info,
                super::binding::Route::Subresource,
                &body,
                dry_run,
            )
        }
        ("eviction", Verb::Create) if is_pod => {
            let params: WriteParams = query::parse(query.as_deref())?;
            let dry_run: Vec<String> = params.dry_run.into_iter().collect();
            let body = read_body(&state, req).await?;
            super::eviction::evict(&state, &info, &body, &dry_run)
        }
        ("", Verb::List) => list::<K>(&state, &info, query.as_deref()),
        ("", Verb::Watch) => watch::watch::<K>(&state, &info, query.as_deref()),
        ("", Verb::Get) => get::<K>(&state, &info, query.as_deref()),
        ("status", Verb::Get) if K::HAS_STATUS => get::<K>(&state, &info, query.as_deref()),
        ("", Verb::Create) => {
            let body = read_create_body::<K>(&state, req).await?;
            let (obj, warnings) = super::decode::decode_validated::<K>(&body, validation)?;
            let created = create::<K>(
                &state,
                &info,
                query.as_deref(),
                obj,
                Some(writer(Part::Main, false)),
            );
            created.map(|r| with_warnings(r, &warnings))
        }
        ("", Verb::Update) => {
            let body = read_body(&state, req).await?;
            update::<K>(&state, &info, body, writer(Part::Main, false), validation)
        }
        ("status", Verb::Update) if K::HAS_STATUS => {
            let body = read_body(&state, req).await?;
            update::<K>(&state, &info, body, writer(Part::Status, false), validation)
        }
        ("", Verb::Patch) => {
            let body = read_raw_body(&state, req).await?;
            let apply = body.media_type == APPLY_PATCH;
            let writer = writer(Part::Main, apply);
            patch_object::<K>(&state, &info, query.as_deref(), body, writer)
        }
        ("status", Verb::Patch) if K::HAS_STATUS => {
            let body = read_raw_body(&state, req).await?;
            let apply = body.media_type == APPLY_PATCH;
            let writer = writer(Part::Status, apply);
            patch_object::<K>(&state, &info, query.as_deref(), body, writer)
        }
        ("", Verb::Delete) => {
            let body = read_raw_body(&state, req).await?;
            let opts = delete_options(query.as_deref(), &body)?;
            if K::RESOURCE == "namespaces" {
                return super::namespaces::delete_namespace(&state, &info.name, &opts);
            }
            let ns = key_namespace::<K>(&info);
            let cluster = state.cluster();
            let (deleted, pending) = delete_object::<K>(cluster, &ns, &info.name, &opts)?;
            arrange_removal(cluster, &ns, &info.name, pending);
            Ok(delete::delete_response(&deleted))
        }
        ("", Verb::DeleteCollection) if K::RESOURCE != "namespaces" => {
            let body = read_raw_body(&state, req).await?;
            let opts = delete_options(query.as_deref(), &body)?;
            delete::delete_collection::<K>(&state, &info, query.as_deref(), &opts)
        }
        ("finalize", Verb::Update) if K::RESOURCE == "namespaces" => {
            let body = read_body(&state, req).await?;
            super::namespaces::finalize(&state, &info.name, &body.bytes)
        }
        ("", _) | ("status", _) => Err(ApiError::method_not_allowed(info.verb.as_str())),
        _ => Err(ApiError::path_not_found()),
    }
}

/// `POST /api/v1/namespaces/{ns}/bindings`, the legacy way to bind a pod (the Binding's
/// `metadata.name` names it); create is its only verb.
async fn legacy_binding(
    state: AppState,
    info: RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    if info.namespace.is_empty() || !info.name.is_empty() || !info.subresource.is_empty() {
        return Err(ApiError::path_not_found());
    }
    if info.verb != Verb::Create {
        return Err(ApiError::method_not_allowed(info.verb.as_str()));
    }
    let dry_run = is_dry_run(req.uri().query())?;
    let body = read_body(&state, req).await?;
    super::binding::bind(&state, &info, super::binding::Route::Legacy, &body, dry_run)
}

/// Reads a create/update body, requiring a JSON or YAML content type (415 otherwise).
async fn read_body(state: &AppState, req: Request) -> Result<JsonBody, ApiError> {
    accept_json_or_yaml(read_raw_body(state, req).await?)
}

/// `body` if its content type is JSON or YAML; 415 otherwise.
fn accept_json_or_yaml(body: JsonBody) -> Result<JsonBody, ApiError> {
    match body.media_type.as_str() {
        "" | "application/json" | "application/yaml" | "*/*" => Ok(body),
        _ => Err(ApiError::unsupported_media_type()),
    }
}

/// Reads a create body: as [`read_body`], and for the kinds `kubectl create <kind>` sends as
/// protobuf (namespaces, poddisruptionbudgets, secrets, configmaps, serviceaccounts) also
/// protobuf (transcoded to JSON, see [`super::protobuf`]).
async fn read_create_body<K: ApiKind>(
    state: &AppState,
    req: Request,
) -> Result<JsonBody, ApiError> {
    let body = read_raw_body(state, req).await?;
    if matches!(
        K::RESOURCE,
        "namespaces" | "poddisruptionbudgets" | "secrets" | "configmaps" | "serviceaccounts"
    ) && body.media_type == super::protobuf::MEDIA_TYPE
    {
        return Ok(JsonBody {
            bytes: super::protobuf::object_json(K::KIND, &body.bytes)?.into(),
            media_type: "application/json".into(),
        });
    }
    accept_json_or_yaml(body)
}

/// Decodes an object body (JSON, or YAML when the content type says so); 400 when malformed.
pub fn decode<T: serde::de::DeserializeOwned>(body: &JsonBody) -> Result<T, ApiError> {
    if body.media_type == "application/yaml" {
        let text = std::str::from_utf8(&body.bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
        return serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("yaml parse error: {e}")));
    }
    serde_json::from_slice(&body.bytes).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        } else {
            ApiError::bad_request(format!(
                "the object provided is unrecognized or malformed: {e}"
            ))
        }
    })
}

fn delete_options(query: Option<&str>, body: &JsonBody) -> Result<DeleteOptions, ApiError> {
    let params: WriteParams = query::parse(query)?;
    let mut opts = if body.bytes.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        decode::<DeleteOptions>(body)?
    };
    if opts.grace_period_seconds.is_none() {
        opts.grace_period_seconds = params.grace_period_seconds;
    }
    let q = query::Query::new(query);
    if opts.propagation_policy.is_none() {
        opts.propagation_policy = q.get("propagationPolicy").map(str::to_owned);
    }
    if opts.orphan_dependents.is_none() {
        opts.orphan_dependents = q.flag("orphanDependents");
    }
    // kube-apiserver's `BeforeDelete`: a negative grace period is treated as 1 s.
    if opts.grace_period_seconds.is_some_and(|g| g < 0) {
        opts.grace_period_seconds = Some(1);
    }
    Ok(opts)
}

fn get<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    // A get with a resourceVersion is served by the watch cache, which parses it first.
    query::check_resource_version(query::Query::new(query).get("resourceVersion"), false)?;
    let ns = key_namespace::<K>(info);
    match K::table(state.cluster()).get(&ns, &info.name) {
        Some(stored) => Ok(json_response(StatusCode::OK, stored.json())),
        None => Err(ApiError::not_found(K::GROUP, K::RESOURCE, &info.name)),
    }
}

/// kube-apiserver's message when a continue token's resourceVersion was compacted.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn list<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let params: ListParams = query::parse(query)?;
    let filter = Filter::new::<K>(info, &params)?;
    let resume = match params.continue_token.as_deref().filter(|t| !t.is_empty()) {
        Some(token) => Some(
            continue_token::decode(token)
                .map_err(|why| ApiError::bad_request(format!("invalid continue token: {why}")))?,
        ),
        None => None,
    };
    let rv = params.resource_version.as_deref();
    if resume.is_some() && rv.is_some_and(|rv| !rv.is_empty() && rv != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    // Paginated lists (and continues) go to etcd in kube-apiserver 1.32; the rest is served by
    // the watch cache, and the two word a bad resourceVersion differently.
    let from_etcd = resume.is_some() || (params.limit.is_some_and(|l| l > 0) && rv != Some("0"));
    query::check_resource_version(rv, from_etcd)?;
    // A continue serves the snapshot of the first page (kube reads etcd at the token's
    // revision): 410 once the sim's history no longer reaches back to it.
    let (items, snapshot_rv) = match &resume {
        Some((rv, key)) => (
            K::table(state.cluster())
                .snapshot_at(filter.namespace.as_deref(), key, *rv)
                .map_err(|_| ApiError::expired(CONTINUE_EXPIRED))?,
            *rv,
        ),
        None => K::table(state.cluster()).snapshot(filter.namespace.as_deref(), None),
    };
    let list_rv = resume.as_ref().map_or(snapshot_rv, |(rv, _)| *rv);
    // `resourceVersion=0` without a continue is served by the watch cache, which does not page
    // in 1.32: every item, no `continue` (apiserver `pkg/storage/cacher/cacher.go`
    // `GetList`/`shouldDelegateList`; measured on 1.32.13).
    let from_cache = resume.is_none() && rv == Some("0");
    let limit = params
        .limit
        .filter(|l| *l > 0 && !from_cache)
        .map(|l| l as usize);
    let mut selected: Vec<&Stored<K>> = Vec::new();
    let mut next_key = None;
    let mut remaining = 0usize;
    for stored in &items {
        if !filter.matches(&stored.facts) {
            continue;
        }
        if let Some(limit) = limit
            && selected.len() >= limit
        {
            if next_key.is_none()
                && let Some(last) = selected.last()
            {
                let last = last.decode();
                next_key = Some((
                    last.meta().namespace.clone().unwrap_or_default(),
                    last.meta().name.clone().unwrap_or_default(),
                ));
            }
            remaining += 1;
            continue;
        }
        selected.push(stored);
    }
    let mut meta = json!({ "resourceVersion": list_rv.to_string() });
    if let Some(key) = &next_key {
        let key = if K::NAMESPACED {
            key.clone()
        } else {
            (String::new(), key.1.clone())
        };
        meta["continue"] = json!(continue_token::encode(list_rv, &key));
        // etcd3's store counts what remains only when no selector filters the list
        // (`pred.Empty()`; apiserver `pkg/storage/etcd3/store.go` `GetList`).
        if !filter.has_selectors() {
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    let items: Vec<Bytes> = selected.iter().map(|stored| stored.json()).collect();
    let size: usize = items.iter().map(|json| json.len() + 1).sum();
    let mut out = Vec::with_capacity(size + 256);
    out.extend_from_slice(b"{\"kind\":\"");
    out.extend_from_slice(K::LIST_KIND.as_bytes());
    out.extend_from_slice(b"\",\"apiVersion\":\"");
    out.extend_from_slice(K::API_VERSION.as_bytes());
    out.extend_from_slice(b"\",\"metadata\":");
    out.extend_from_slice(meta.to_string().as_bytes());
    out.extend_from_slice(b",\"items\":[");
    let type_meta = list_item_type_meta::<K>();
    for (i, json) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match json.strip_prefix(type_meta.as_bytes()) {
            Some(rest) if !K::CUSTOM_RESOURCE => {
                out.push(b'{');
                out.extend_from_slice(rest);
            }
            _ => out.extend_from_slice(json),
        }
    }
    // The newline Go's encoder ends a body with (`end_json_with_newline` would otherwise copy
    // the whole list to add it).
    out.extend_from_slice(b"]}\n");
    Ok(json_response(StatusCode::OK, out))
}

/// How a stored object's JSON begins (`{"apiVersion":..,"kind":..,`): built-in kinds' LIST
/// items go without it (the list names them), while GETs and watch events keep it.
fn list_item_type_meta<K: ApiKind>() -> String {
    format!(
        "{{\"apiVersion\":\"{}\",\"kind\":\"{}\",",
        K::API_VERSION,
        K::KIND
    )
}

/// Whether the request is a dry run (`dryRun=All`): validate and answer, store nothing.
fn is_dry_run(query: Option<&str>) -> Result<bool, ApiError> {
    let params: WriteParams = query::parse(query)?;
    Ok(params.dry_run.as_deref() == Some("All"))
}

/// Characters of generated name suffixes (the real server's alphabet: no vowels, no look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generate_name(base: &str) -> String {
    let base: String = base.chars().take(58).collect();
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rand::random_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{base}{suffix}")
}

fn check_namespace<K: ApiKind>(obj: &mut K, info: &RequestInfo) -> Result<(), ApiError> {
    if !K::NAMESPACED {
        obj.meta_mut().namespace = None;
        return Ok(());
    }
    match obj.meta().namespace.as_deref() {
        Some(ns) if !ns.is_empty() && ns != info.namespace => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            obj.meta_mut().namespace = Some(info.namespace.clone());
            Ok(())
        }
    }
}

fn invalid<K: ApiKind>(name: &str, causes: Causes) -> ApiError {
    let mut err = ApiError::invalid(K::GROUP, K::KIND, name, causes.0);
    if !K::GROUP.is_empty() {
        // kube-apiserver names the kind with its group: `Lease.coordination.k8s.io "x" is invalid`.
        err.message = format!("{}.{}{}", K::KIND, K::GROUP, &err.message[K::KIND.len()..]);
    }
    err
}

/// Creates `obj`; `writer` records its fields as the creator's (None: `obj` carries the managed
/// fields of the apply that creates it).
fn create<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
    mut obj: K,
    writer: Option<Writer>,
) -> Result<Response, ApiError> {
    let applied_fields = obj.meta().managed_fields.clone();
    check_namespace(&mut obj, info)?;
    if K::NAMESPACED && !state.cluster().namespace_exists(&info.namespace) {
        return Err(ApiError::not_found("", "namespaces", &info.namespace));
    }
    if K::NAMESPACED
        && podline_sim_core::controllers::namespace::is_terminating(
            state.cluster(),
            &info.namespace,
        )
    {
        let name = obj.meta().name.clone().unwrap_or_default();
        return Err(
            podline_sim_core::controllers::namespace::terminating_forbidden::<K>(
                &name,
                &info.namespace,
            ),
        );
    }
    let dry_run = is_dry_run(query)?;
    let generate = obj
        .meta()
        .generate_name
        .clone()
        .filter(|g| !g.is_empty() && obj.meta().name.as_deref().unwrap_or_default().is_empty());
    {
        let meta = obj.meta_mut();
        meta.uid = Some(uuid::Uuid::new_v4().to_string());
        meta.creation_timestamp = Some(Time(Timestamp::now()));
        meta.resource_version = None;
        meta.generation = K::CUSTOM_RESOURCE.then_some(1);
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.managed_fields = None;
        meta.self_link = None;
    }
    // Admission plugins run before the registry generates a name, so their refusals name the
    // object by its `generateName`.
    obj.admit_against(state.cluster())?;
    if let Some(base) = &generate {
        obj.meta_mut().name = Some(generate_name(base));
    }
    let causes = obj.admit_create();
    let name = obj.meta().name.clone().unwrap_or_default();
    if !causes.is_empty() {
        return Err(invalid::<K>(&name, causes));
    }
    match &writer {
        Some(writer) => obj = with_update_fields(obj, None, writer)?,
        None => obj.meta_mut().managed_fields = applied_fields,
    }
    if dry_run {
        let json = serde_json::to_vec(&obj).map_err(|e| ApiError::internal(e.to_string()))?;
        return Ok(json_response(StatusCode::CREATED, json));
    }
    let ns = key_namespace::<K>(info);
    // Generated names retry on a collision, like the real server's RetryGenerateName.
    let attempts = if generate.is_some() { 8 } else { 1 };
    let mut last_err = None;
    for attempt in 0..attempts {
        if attempt > 0
            && let Some(base) = &generate
        {
            obj.meta_mut().name = Some(generate_name(base));
        }
        let name = obj.meta().name.clone().unwrap_or_default();
        let candidate = obj.clone();
        match K::commit(state.cluster(), &ns, &name, |current| match current {
            Some(_) => Err(ApiError::already_exists(K::GROUP, K::RESOURCE, &name)),
            None => Ok((Write::Create(candidate), ())),
        }) {
            Ok((Some(commit), ())) => {
                if K::RESOURCE == "namespaces" && !K::NAMESPACED {
                    podline_sim_core::controllers::namespace_added(state.cluster(), &name);
                }
                let mut response = json_response(StatusCode::CREATED, commit.event.json.clone());
                response
                    .extensions_mut()
                    .insert(crate::audit::StoredName(name));
                return Ok(response);
            }
            Ok((None, ())) => return Err(ApiError::internal("create stored nothing")),
            Err(err) => last_err = Some(err),
        }
    }
    Err(last_err.unwrap_or_else(|| ApiError::internal("create failed")))
}

/// Copies the fields clients cannot change from `old` into `new`.
fn keep_system_metadata<K: ApiKind>(new: &mut K, old: &K) {
    let (o, n) = (old.meta(), new.meta_mut());
    n.uid.clone_from(&o.uid);
    n.creation_timestamp.clone_from(&o.creation_timestamp);
    n.deletion_timestamp.clone_from(&o.deletion_timestamp);
    n.deletion_grace_period_seconds = o.deletion_grace_period_seconds;
    n.generation = o.generation;
    n.namespace.clone_from(&o.namespace);
    n.name.clone_from(&o.name);
    n.generate_name.clone_from(&o.generate_name);
    n.managed_fields.clone_from(&o.managed_fields);
    n.self_link = None;
}

/// The media type of server-side apply.
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// `obj` with `writer`'s non-apply write over `old` (None: a create) in its managed fields.
fn with_update_fields<K: ApiKind>(obj: K, old: Option<&K>, writer: &Writer) -> Result<K, ApiError> {
    let internal = |e: serde_json::Error| ApiError::internal(format!("managed fields: {e}"));
    let new = serde_json::to_value(&obj).map_err(internal)?;
    let old = old
        .map(serde_json::to_value)
        .transpose()
        .map_err(internal)?;
    let entries = old.as_ref().map(apply::entries_of).unwrap_or_default();
    let entries = apply::entries_after_update(&new, old.as_ref(), &entries, writer, K::API_VERSION);
    // Only the managed fields change: set them on the typed object rather than decoding the
    // whole tree back.
    let mut obj = obj;
    obj.meta_mut().managed_fields = (!entries.is_empty()).then_some(entries);
    Ok(obj)
}

/// The shared tail of update and patch: preconditions, admission, commit, response.
fn replace<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    writer: &Writer,
    make: impl FnOnce(&Stored<K>) -> Result<K, ApiError>,
) -> Result<Response, ApiError> {
    let ns = key_namespace::<K>(info);
    let name = info.name.clone();
    let (event, unchanged) = K::commit(state.cluster(), &ns, &name, |current| {
        let Some(current) = current else {
            return Err(ApiError::not_found(K::GROUP, K::RESOURCE, &name));
        };
        let mut obj = make(current)?;
        let stored = current;
        let current = stored.decode();
        let current_rv = current.meta().resource_version.clone();
        // Every kind served here allows unconditional updates (`AllowUnconditionalUpdate`).
        match obj.meta().resource_version.as_deref() {
            None | Some("") => {}
            Some(rv) if Some(rv) != current_rv.as_deref() => {
                return Err(ApiError::conflict(K::GROUP, K::RESOURCE, &name));
            }
            Some(_) => {}
        }
        obj.meta_mut().resource_version = current_rv;
        let applied_fields = obj.meta().managed_fields.clone();
        keep_system_metadata(&mut obj, &current);
        let causes = obj.admit_update(&current, writer.part);
        if !causes.is_empty() {
            return Err(invalid::<K>(&name, causes));
        }
        if writer.operation == "Apply" {
            obj.meta_mut().managed_fields = applied_fields;
        } else {
            obj = with_update_fields(obj, Some(&current), writer)?;
        }
        if let Some(message) = no_new_finalizers(obj.meta(), current.meta()) {
            let mut causes = Causes::default();
            causes.forbidden("metadata.finalizers", &message);
            return Err(invalid::<K>(&name, causes));
        }
        if serde_json::to_value(&obj).ok() == serde_json::to_value(&current).ok() {
            Ok((Write::Unchanged, Some(stored.json())))
        } else {
            Ok((update_write(obj), None))
        }
    })?;
    match (event, unchanged) {
        (Some(commit), _) => Ok(json_response(StatusCode::OK, commit.event.json.clone())),
        (None, Some(json)) => Ok(json_response(StatusCode::OK, json)),
        (None, None) => Err(ApiError::internal("update stored nothing")),
    }
}

fn update<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    body: JsonBody,
    writer: Writer,
    validation: super::decode::FieldValidation,
) -> Result<Response, ApiError> {
    let (mut obj, warnings) = super::decode::decode_validated::<K>(&body, validation)?;
    match obj.meta().name.as_deref() {
        None | Some("") => obj.meta_mut().name = Some(info.name.clone()),
        Some(n) if n != info.name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({})",
                info.name
            )));
        }
        Some(_) => {}
    }
    check_namespace(&mut obj, info)?;
    replace::<K>(state, info, &writer, move |_| Ok(obj)).map(|r| with_warnings(r, &warnings))
}

/// `response` with a `Warning: 299 - "<text>"` header per warning, as kube-apiserver sends
/// the warnings of a write (unknown fields under `fieldValidation=Warn`, the default).
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

fn patch_object<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
    body: JsonBody,
    writer: Writer,
) -> Result<Response, ApiError> {
    if writer.operation == "Apply" {
        return apply_object::<K>(state, info, query, &body, &writer);
    }
    let validation =
        super::decode::FieldValidation::parse(query::Query::new(query).get("fieldValidation"));
    let patch = patch::Patch::parse(&body.media_type, &body.bytes, validation)?;
    replace::<K>(state, info, &writer, |current| {
        let mut doc: serde_json::Value = serde_json::from_slice(&current.json())
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
        patch.apply(&mut doc)?;
        serde_json::from_value::<K>(doc).map_err(|e| {
            ApiError::new(
                422,
                "Invalid",
                format!("the patched object is not a valid {}: {e}", K::KIND),
            )
        })
    })
}

/// Server-side apply (see [`apply`]): `fieldManager` is required, `force` takes fields over;
/// an object that does not exist is created from the configuration.
fn apply_object<K: ApiKind>(
    state: &AppState,
    info: &RequestInfo,
    query: Option<&str>,
    body: &JsonBody,
    writer: &Writer,
) -> Result<Response, ApiError> {
    let q = query::Query::new(query);
    if q.get("fieldManager").is_none_or(str::is_empty) {
        let mut causes = Causes::default();
        causes.required("fieldManager", "is required for apply patch");
        let mut err = ApiError::invalid("meta.k8s.io", "PatchOptions.meta.k8s.io", "", causes.0);
        if let Some(details) = err.details.as_mut() {
            details.kind = Some("PatchOptions".to_owned());
        }
        return Err(err);
    }
    let force = q.flag("force").unwrap_or(false);
    let text = std::str::from_utf8(&body.bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
    let mut config: serde_json::Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    match config["metadata"]["name"].as_str() {
        None | Some("") => config["metadata"]["name"] = json!(info.name),
        Some(n) if n != info.name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({})",
                info.name
            )));
        }
        Some(_) => {}
    }
    let decode_merged = |merged: serde_json::Value| {
        serde_json::from_value::<K>(merged).map_err(|e| {
            ApiError::bad_request(format!(
                "the applied configuration is not a valid {}: {e}",
                K::KIND
            ))
        })
    };
    let ns = key_namespace::<K>(info);
    if K::table(state.cluster()).get(&ns, &info.name).is_none() {
        let merged = apply::apply(None, &config, writer, force, K::API_VERSION)?;
        let obj = decode_merged(merged)?;
        return create::<K>(state, info, query, obj, None);
    }
    replace::<K>(state, info, writer, |current| {
        let live: serde_json::Value = serde_json::from_slice(&current.json())
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
        let merged = apply::apply(Some(&live), &config, writer, force, K::API_VERSION)?;
        decode_merged(merged)
    })
}
