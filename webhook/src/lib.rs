//! `styrmin-webhook`: the mutating admission webhook that enforces Styrmin's ingress rules and
//! blocks deploys while an environment's dedicated ingress controller is being removed (which
//! rules: docs/rules.md, "Which part applies which rules"), and apart from it the cluster-wide
//! controllers: the audit, the PolicyReports and the migrations.
//!
//! Layout, each layer using only the ones above it here:
//!
//! - [`view`], the in-memory view and the seam its sources plug into, and [`clock`];
//! - [`kube_calls`], what every call to the API server goes through: one time limit, the
//!   backoffs and the token bucket;
//! - [`telemetry`], the log lines, and [`client_text`], text a client sent, bounded before it
//!   goes into a log line or an error answer;
//! - [`crd`], the custom resources: the three levels and StyrminMigration;
//! - [`ingress_controllers`], the common ingress controllers and the annotations each reads,
//!   and [`annotation_catalog`], what a target controller does with another's annotations;
//! - [`decide`], the decisions as pure functions of a view and one request ([`admission`]
//!   its wire types, [`patch`] and [`helm_release`] the patches it answers with), and beside it
//!   [`audit`], the pure judging of what is already in a cluster;
//! - the view sources: [`policy_file`] and [`kube_source`] (which also runs the audit, in the
//!   controllers' scope);
//! - [`plan`], what a proposed change of the levels does to the Ingresses already in a
//!   cluster, pure like the audit, and [`acme_issuers`], the cert-manager issuers whose ACME
//!   solvers name a class;
//! - [`controllers`], the cluster-wide controllers on the holder of their Lease: the
//!   PolicyReport writer and the migration executor;
//! - [`metrics`], the Prometheus metrics of admission, the audit and the controllers;
//! - [`api`], the HTTP surface (routers, handlers, their shared state), and [`server`], the
//!   TLS accept loop and its budgets ([`budget`] for request bodies, [`tls`], and
//!   [`open_files`], the descriptor limit the connection caps fit under);
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
pub mod kube_calls;
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
