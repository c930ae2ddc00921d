//! Integration tests of the PostgreSQL backend against a live server.
//!
//! The server is `postgres://postgres@127.0.0.1:5432/test` unless `SLOTGUARD_TEST_DATABASE_URL` says
//! otherwise. Every test works in a schema of its own (`sg_t_<random>`), dropped when it ends, pass or
//! fail; nothing else on the server is touched. Advisory locks are per database, not per schema, so
//! lock tests use keys no other test uses.

mod admin;
mod bouncer;
mod claims;
mod clock;
mod common;
mod connect;
mod contended;
mod contract;
mod failover;
mod lease;
mod locks;
mod logs;
mod migrations;
mod partitioned;
mod pooled;
mod pooler;
mod presence;
mod retention;
