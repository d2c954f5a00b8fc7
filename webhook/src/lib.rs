//! `styrmin-webhook`: the mutating admission webhook that enforces Styrmin's ingress rules
//! (rules W1–W4) and blocks deploys while an environment's dedicated ingress controller is
//! being removed (W2).
//!
//! Layout: [`decide`] holds the decisions as pure functions of a [`view::View`] and one
//! request ([`admission`] its wire types, [`patch`] and [`flux`] the patches it answers
//! with); [`view`] the in-memory view and the seam its sources plug into ([`policy_file`]
//! and [`kube_source`]); [`api`] the HTTP surface (routers, handlers, their shared state);
//! [`server`] the TLS accept loop and its budgets ([`budget`] for request bodies); [`cli`]
//! the wiring.

pub mod admission;
pub mod api;
pub mod audit;
pub mod budget;
pub mod cli;
pub mod client_text;
pub mod crd;
pub mod decide;
pub mod flux;
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
