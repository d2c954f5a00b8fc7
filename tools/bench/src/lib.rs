//! What the scale benchmarks share (`make bench-scale`): reading the API server's request
//! counts, Prometheus text and a process's memory.

pub mod measure;
