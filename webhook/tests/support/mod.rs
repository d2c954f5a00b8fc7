//! What the webhook's integration tests share. Each test binary uses some of it.
#![allow(dead_code)]

pub mod data;
pub mod patched;
pub mod review;
pub mod state;
