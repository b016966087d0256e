//! The published workloads.

pub mod reads;
