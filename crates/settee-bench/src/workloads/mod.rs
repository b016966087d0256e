//! The published workloads.

pub mod reads;
pub mod views;
