//! What the tests of several crates share, so that none includes another's files.
//!
//! - [`resolution_table`] and [`rendered`]: the post-renderer's resolution table and the real
//!   rendered streams (`postrender/tests/data/rendered/`), read by the post-renderer's tests
//!   and the end-to-end ones;
//! - [`flag_docs`]: docs/config.md's flag tables, written from the programs' clap commands;
//! - [`ingress_gen`]: the property tests' generators of rendered streams and configurations;
//! - `recorded_cluster` (feature `recorded-cluster`): the webhook's `--source kubernetes`
//!   against the recorded API server answers of `webhook/tests/data/apiserver/`;
//! - `stand_in_controller` (feature `stand-in-controller`): stand-in ingress controllers that
//!   publish an address per class and answer HTTP for their Ingresses' hosts.
//!
//! Paths to test data start at the workspace root.

pub mod flag_docs;
pub mod ingress_gen;
#[cfg(feature = "recorded-cluster")]
pub mod recorded_cluster;
pub mod rendered;
pub mod resolution_table;
#[cfg(feature = "stand-in-controller")]
pub mod stand_in_controller;
