//! Launch Kubernetes pods as tasks: idempotent create under 409 storms, await start, follow logs, report, clean up.
