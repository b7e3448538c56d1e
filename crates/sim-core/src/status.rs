//! [`ApiError`]: a failed API call, as the `Status` object with the code, reason, message and
//! details the real API server would send (the API server in `podline-sim` renders it as an
//! HTTP answer).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ListMeta, Status, StatusCause, StatusDetails,
};

/// A failed API call. Build it with the constructors named after the reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`...).
    pub reason: String,
    /// Human-readable message, worded like the real server's.
    pub message: String,
    /// Optional details (name, kind, causes).
    pub details: Option<Box<StatusDetails>>,
    /// Seconds for a `Retry-After` header (429, some 5xx).
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// A bare error with a code, reason and message.
    pub fn new(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(Box::new(StatusDetails {
            name: (!name.is_empty()).then(|| name.to_owned()),
            group: (!group.is_empty()).then(|| group.to_owned()),
            kind: Some(kind.to_owned()),
            ..StatusDetails::default()
        }));
        self
    }

    /// 404 for a missing object: `pods "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_empty_details()
    }

    /// `details: {}`, as kube-apiserver's NotFound for an unknown resource has.
    fn with_empty_details(mut self) -> Self {
        self.details = Some(Box::default());
        self
    }

    /// 409 for a create whose name is taken: `pods "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 409 for a stale resourceVersion on update.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// 409 Conflict with a custom message (precondition failures).
    pub fn conflict_message(group: &str, resource: &str, name: &str, message: String) -> Self {
        Self::new(409, "Conflict", message).with_details(group, resource, name)
    }

    /// 409 as the ResourceQuota admission answers a lost optimistic write (kubernetes#67761).
    pub fn quota_conflict(quota: &str) -> Self {
        Self::conflict("", "resourcequotas", quota)
    }

    /// 422 Invalid with one cause per field: `Pod "x" is invalid: spec.containers[0].image: Required value`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<StatusCause>) -> Self {
        let list: Vec<String> = causes.iter().map(cause_line).collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details(group, kind, name);
        if let Some(details) = err.details.as_mut() {
            details.causes = Some(causes);
        }
        err
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 415 UnsupportedMediaType for a create or update body of a type the server cannot decode:
    /// apimachinery's `NewUnsupportedMediaTypeError` lists the serializers of the request's
    /// negotiation (JSON, YAML, protobuf; CBOR is off in 1.32), and no details
    /// (`k8s.io/apimachinery/pkg/runtime/serializer` negotiation, `errors.go`).
    pub fn unsupported_media_type() -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        )
    }

    /// 415 for a PATCH whose content type is not a patch type: go-restful refuses it by the
    /// route's `Consumes` before any handler runs, and kube-apiserver's service error handler
    /// turns go-restful's text into `NewGenericServerResponse(415, ...)`, so the message is
    /// go-restful's and the details are empty (apiserver `pkg/endpoints/installer.go`,
    /// `pkg/server/handler.go` `serviceErrorHandler`; measured on 1.32.13).
    pub fn unsupported_patch_media_type() -> Self {
        let mut err = Self::new(415, "UnsupportedMediaType", "415: Unsupported Media Type");
        err.details = Some(Box::default());
        err
    }

    /// 401 Unauthorized (missing or wrong bearer token).
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 410 Expired for a resume from a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 429 TooManyRequests with Retry-After.
    pub fn too_many_requests(retry_after: u32) -> Self {
        let mut err = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        );
        err.retry_after = Some(retry_after);
        if let Some(details) = err.details.as_mut() {
            details.retry_after_seconds = Some(retry_after as i32);
        } else {
            err.details = Some(Box::new(StatusDetails {
                retry_after_seconds: Some(retry_after as i32),
                ..StatusDetails::default()
            }));
        }
        err
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// A 5xx (or any code) with the reason the real server uses for it.
    pub fn for_code(code: u16) -> Self {
        match code {
            400 => Self::bad_request("the server rejected our request for an unknown reason"),
            401 => Self::unauthorized(),
            403 => Self::new(403, "Forbidden", "forbidden"),
            404 => Self::path_not_found(),
            409 => Self::quota_conflict("compute-resources"),
            410 => Self::expired("the resourceVersion is too old"),
            429 => Self::too_many_requests(1),
            500 => Self::internal("Internal error occurred: injected fault"),
            502 => Self::new(502, "InternalError", "Internal error occurred: bad gateway"),
            503 => Self::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => Self::new(
                504,
                "Timeout",
                "the server was unable to return a response in the time allotted, but may still be processing the request",
            ),
            other => Self::new(other, "Unknown", format!("injected status {other}")),
        }
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Status {
        Status {
            code: Some(i32::from(self.code)),
            details: self.details.as_deref().cloned(),
            message: Some(self.message.clone()),
            metadata: ListMeta::default(),
            // kube-apiserver leaves `reason` out for errors it has no reason for (500s from
            // the storage layer): an empty reason here is that.
            reason: (!self.reason.is_empty()).then(|| self.reason.clone()),
            status: Some("Failure".to_owned()),
        }
    }

    /// The `Status` object as JSON (with `kind` and `apiVersion`).
    pub fn to_json(&self) -> Vec<u8> {
        // Invariant: Status is plain data; serializing into a Vec cannot fail.
        serde_json::to_vec(&self.to_status()).expect("Status always serializes")
    }
}

/// `pods` or `leases.coordination.k8s.io`, as the real server names resources in messages.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// One cause as kube-apiserver words it in an Invalid message: `field: message`.
pub(crate) fn cause_line(cause: &StatusCause) -> String {
    format!(
        "{}: {}",
        cause.field.as_deref().unwrap_or_default(),
        cause.message.as_deref().unwrap_or_default()
    )
}
