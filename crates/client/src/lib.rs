//! podline's Kubernetes client core: retry policy, full-jitter backoff, bounded timeouts and a watch that never hangs.
