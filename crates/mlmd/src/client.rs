//! A small, typed gRPC client for `ml_metadata.MetadataStoreService`.
//!
//! Hand-written over `tonic::client::Grpc` (no generated stubs): one method
//! per RPC podline uses. The channel connects lazily, so building a client
//! never fails because MLMD is down; calls then fail with `Unavailable`,
//! which [`MlmdError::is_retryable`] classifies for the writer's retry loop.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::uri::PathAndQuery;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::error::MlmdError;
use crate::proto::*;

/// How to reach MLMD. Mirrors KFP's `MetadataStoreClientConfig`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlmdClientConfig {
    /// Host name or IP (IPv6 without brackets is fine).
    pub host: String,
    /// gRPC port (KFP: 8080).
    pub port: u16,
    /// TLS, `None` for plaintext (KFP's default).
    pub tls: Option<MlmdTls>,
    /// Largest response accepted; gRPC's default is 4 MiB.
    pub max_receive_message_length: Option<usize>,
    /// Bound on establishing the TCP/TLS/HTTP2 connection.
    pub connect_timeout: Duration,
    /// Bound on one RPC, so a stuck server cannot hang the writer.
    pub request_timeout: Duration,
}

/// TLS settings for the MLMD channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlmdTls {
    /// A PEM CA bundle to trust (KFP: `CA_CERT_PATH`); the system roots otherwise.
    pub ca_cert_path: Option<PathBuf>,
}

impl MlmdClientConfig {
    /// Plaintext to `host:port` with default timeouts (10 s connect, 30 s per call).
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        MlmdClientConfig {
            host: host.into(),
            port,
            tls: None,
            max_receive_message_length: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }

    /// The URL tonic dials, with IPv6 literals bracketed.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// The MLMD client. Cheap to clone; clones share the HTTP/2 connection and
/// the call counters.
#[derive(Clone, Debug)]
pub struct MlmdClient {
    grpc: tonic::client::Grpc<Channel>,
    counts: Arc<CallCounts>,
}

/// RPCs sent, in all and per method: what the benchmark reports as MLMD
/// calls and write transactions per pod, and what tests assert to prove a
/// round trip is saved (e.g. one context creation per workflow).
#[derive(Debug, Default)]
struct CallCounts {
    calls: AtomicU64,
    writes: AtomicU64,
    by_method: Mutex<BTreeMap<&'static str, u64>>,
}

macro_rules! rpc {
    ($(#[$doc:meta])* $fn:ident, $method:literal, $req:ty, $resp:ty) => {
        $(#[$doc])*
        pub async fn $fn(&self, request: $req) -> Result<$resp, MlmdError> {
            self.unary::<$req, $resp>(
                $method,
                concat!("/ml_metadata.MetadataStoreService/", $method),
                request,
            )
            .await
        }
    };
}

impl MlmdClient {
    /// Build a client; connects lazily on the first call.
    pub fn new(config: &MlmdClientConfig) -> Result<Self, MlmdError> {
        let url = config.url();
        let invalid = |source| MlmdError::InvalidEndpoint {
            url: url.clone(),
            source,
        };
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(invalid)?
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .tcp_nodelay(true);
        if let Some(tls) = &config.tls {
            let mut tls_config = ClientTlsConfig::new().domain_name(config.host.clone());
            match &tls.ca_cert_path {
                Some(path) => {
                    let pem = std::fs::read(path).map_err(|source| MlmdError::CaCert {
                        path: path.clone(),
                        source,
                    })?;
                    tls_config = tls_config.ca_certificate(Certificate::from_pem(pem));
                }
                None => tls_config = tls_config.with_native_roots(),
            }
            endpoint = endpoint.tls_config(tls_config).map_err(invalid)?;
        }
        let mut grpc = tonic::client::Grpc::new(endpoint.connect_lazy());
        if let Some(limit) = config.max_receive_message_length {
            grpc = grpc.max_decoding_message_size(limit);
        }
        Ok(MlmdClient {
            grpc,
            counts: Arc::default(),
        })
    }

    /// How many RPCs this client (and its clones) sent: the benchmark's
    /// "MLMD calls per pod".
    pub fn calls(&self) -> u64 {
        self.counts.calls.load(Ordering::Relaxed)
    }

    /// How many write RPCs (`Put*`) this client (and its clones) sent. MLMD
    /// runs each in one transaction (one disk sync on a SQLite or MySQL
    /// store), so this is the number of write transactions asked for,
    /// whether they committed or were rolled back (e.g. `AlreadyExists`).
    pub fn writes(&self) -> u64 {
        self.counts.writes.load(Ordering::Relaxed)
    }

    /// How many `method` RPCs (MLMD's name, e.g. `"PutContexts"`) this client
    /// (and its clones) sent.
    pub fn calls_to(&self, method: &str) -> u64 {
        self.by_method().get(method).copied().unwrap_or(0)
    }

    fn by_method(&self) -> std::sync::MutexGuard<'_, BTreeMap<&'static str, u64>> {
        // Only counters behind it: a poisoned lock still holds valid numbers.
        self.counts
            .by_method
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    async fn unary<Req, Resp>(
        &self,
        method: &'static str,
        path: &'static str,
        request: Req,
    ) -> Result<Resp, MlmdError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.counts.calls.fetch_add(1, Ordering::Relaxed);
        if method.starts_with("Put") {
            self.counts.writes.fetch_add(1, Ordering::Relaxed);
        }
        *self.by_method().entry(method).or_default() += 1;
        let mut grpc = self.grpc.clone();
        let status = |s: tonic::Status| MlmdError::Rpc {
            method,
            code: s.code(),
            message: s.message().to_owned(),
        };
        grpc.ready().await.map_err(|e| MlmdError::Rpc {
            method,
            code: tonic::Code::Unavailable,
            message: e.to_string(),
        })?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        let response = grpc
            .unary(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                codec,
            )
            .await
            .map_err(status)?;
        Ok(response.into_inner())
    }

    rpc!(
        /// Upsert an artifact type.
        put_artifact_type, "PutArtifactType", PutArtifactTypeRequest, PutArtifactTypeResponse);
    rpc!(
        /// Upsert an execution type.
        put_execution_type, "PutExecutionType", PutExecutionTypeRequest, PutExecutionTypeResponse);
    rpc!(
        /// Upsert a context type.
        put_context_type, "PutContextType", PutContextTypeRequest, PutContextTypeResponse);
    rpc!(
        /// List context types (the connectivity probe).
        get_context_types, "GetContextTypes", GetContextTypesRequest, GetContextTypesResponse);
    rpc!(
        /// Insert or update contexts.
        put_contexts, "PutContexts", PutContextsRequest, PutContextsResponse);
    rpc!(
        /// Indexed lookup of a context by type and name.
        get_context_by_type_and_name, "GetContextByTypeAndName",
        GetContextByTypeAndNameRequest, GetContextByTypeAndNameResponse);
    rpc!(
        /// Contexts by external id.
        get_contexts_by_external_ids, "GetContextsByExternalIds",
        GetContextsByExternalIdsRequest, GetContextsByExternalIdsResponse);
    rpc!(
        /// Atomic execution + artifacts + events + contexts write.
        put_execution, "PutExecution", PutExecutionRequest, PutExecutionResponse);
    rpc!(
        /// Insert or update executions.
        put_executions, "PutExecutions", PutExecutionsRequest, PutExecutionsResponse);
    rpc!(
        /// Insert events.
        put_events, "PutEvents", PutEventsRequest, PutEventsResponse);
    rpc!(
        /// Insert attributions and associations (idempotent).
        put_attributions_and_associations, "PutAttributionsAndAssociations",
        PutAttributionsAndAssociationsRequest, PutAttributionsAndAssociationsResponse);
    rpc!(
        /// Executions by external id.
        get_executions_by_external_ids, "GetExecutionsByExternalIds",
        GetExecutionsByExternalIdsRequest, GetExecutionsByExternalIdsResponse);
    rpc!(
        /// Artifacts by external id.
        get_artifacts_by_external_ids, "GetArtifactsByExternalIds",
        GetArtifactsByExternalIdsRequest, GetArtifactsByExternalIdsResponse);
    rpc!(
        /// Executions by id.
        get_executions_by_id, "GetExecutionsByID", GetExecutionsByIdRequest, GetExecutionsByIdResponse);
    rpc!(
        /// Artifacts by id.
        get_artifacts_by_id, "GetArtifactsByID", GetArtifactsByIdRequest, GetArtifactsByIdResponse);
    rpc!(
        /// Artifacts by URI.
        get_artifacts_by_uri, "GetArtifactsByURI", GetArtifactsByUriRequest, GetArtifactsByUriResponse);
    rpc!(
        /// Executions in a context.
        get_executions_by_context, "GetExecutionsByContext",
        GetExecutionsByContextRequest, GetExecutionsByContextResponse);
    rpc!(
        /// Artifacts in a context.
        get_artifacts_by_context, "GetArtifactsByContext",
        GetArtifactsByContextRequest, GetArtifactsByContextResponse);
    rpc!(
        /// Executions matching a filter query, paged.
        get_executions, "GetExecutions", GetExecutionsRequest, GetExecutionsResponse);
    rpc!(
        /// Events of executions.
        get_events_by_execution_ids, "GetEventsByExecutionIDs",
        GetEventsByExecutionIdsRequest, GetEventsByExecutionIdsResponse);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_should_bracket_ipv6_literals() {
        assert_eq!(
            MlmdClientConfig::new("::1", 8080).url(),
            "http://[::1]:8080"
        );
        assert_eq!(
            MlmdClientConfig::new("metadata-grpc-service.kubeflow.svc.cluster.local", 8080).url(),
            "http://metadata-grpc-service.kubeflow.svc.cluster.local:8080"
        );
        let mut tls = MlmdClientConfig::new("10.0.0.1", 8443);
        tls.tls = Some(MlmdTls { ca_cert_path: None });
        assert_eq!(tls.url(), "https://10.0.0.1:8443");
    }

    #[tokio::test]
    async fn a_call_to_a_closed_port_should_be_retryable_unavailable() {
        // Bind then drop to get a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
        let mut config = MlmdClientConfig::new("127.0.0.1", port);
        config.connect_timeout = Duration::from_secs(2);
        let client = MlmdClient::new(&config).expect("client");
        let err = client
            .get_context_types(GetContextTypesRequest {})
            .await
            .expect_err("nobody listens");
        assert!(err.is_retryable(), "{err}");
        assert_eq!(client.calls(), 1);
        assert_eq!(client.calls_to("GetContextTypes"), 1);
        assert_eq!(client.writes(), 0, "a read is not a write transaction");
    }
}
