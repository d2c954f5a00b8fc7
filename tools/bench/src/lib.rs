//! What the scale benchmarks share (`make bench-scale`): reading the API server's request
//! counts, Prometheus text and a process's memory, and creating their Ingresses.

pub mod fleet;
pub mod measure;
