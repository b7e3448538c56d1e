//! Errors and a fast policy for the retry modules' tests.

use std::time::Duration;

use kube::core::Status;
use kube::core::response::StatusDetails;

use super::RetryPolicy;
use crate::backoff::FullJitter;

pub(super) fn status(code: u16, reason: &str) -> Status {
    Status::failure("test", reason).with_code(code)
}

pub(super) fn api(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(status(code, reason).boxed())
}

pub(super) fn api_retry_after(code: u16, secs: u32) -> kube::Error {
    let details: StatusDetails =
        serde_json::from_value(serde_json::json!({ "retryAfterSeconds": secs })).unwrap();
    kube::Error::Api(
        status(code, "TooManyRequests")
            .with_details(details)
            .boxed(),
    )
}

pub(super) fn fast_policy() -> RetryPolicy {
    RetryPolicy::new(
        FullJitter::try_new(Duration::from_millis(1), Duration::from_millis(10), 2.0).unwrap(),
    )
}
