//! `styrmin-webhook`: the mutating admission webhook that enforces Styrmin's ingress rules and
//! blocks deploys while an environment's dedicated ingress controller is being removed (which
//! rules: docs/rules.md, "Which part applies which rules").
//!
//! Layout, each layer using only the ones above it here:
//!
//! - [`view`], the in-memory view and the seam its sources plug into, and [`clock`];
//! - [`decide`], the decisions as pure functions of a view and one request ([`admission`]
//!   its wire types, [`patch`] and [`helm_release`] the patches it answers with), and beside it
//!   [`audit`], the pure judging of what is already in a cluster;
//! - the view sources: [`policy_file`] and [`kube_source`] (which also runs the audit);
//! - [`api`], the HTTP surface (routers, handlers, their shared state), and [`server`], the
//!   TLS accept loop and its budgets ([`budget`] for request bodies, [`tls`]);
//! - [`cli`], the subcommands, which wire the rest.

pub mod acme_issuers;
pub mod admission;
pub mod annotation_catalog;
pub mod api;
pub mod audit;
pub mod budget;
pub mod cli;
pub mod client_text;
pub mod clock;
pub mod controllers;
pub mod crd;
pub mod decide;
pub mod helm_release;
pub mod ingress_controllers;
pub mod kube_source;
pub mod metrics;
pub mod open_files;
pub mod patch;
pub mod plan;
pub mod policy_file;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod view;
