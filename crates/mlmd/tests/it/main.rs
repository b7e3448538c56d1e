//! Integration tests against the real ML Metadata store (through
//! `tests/mlmd_server.py`). They skip loudly when python3/ml-metadata is
//! missing, and fail instead when `PODLINE_REQUIRE_MLMD=1`.

mod support;

mod client_real;
mod kfp_sim;
mod writer_real;
