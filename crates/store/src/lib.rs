//! The pod lifecycle store: idempotent, monotonic records of what every pod did (SQLite and PostgreSQL).
