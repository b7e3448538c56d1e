//! Test helpers for podline: the sim on a random port, tracing for tests, wait-until helpers.
