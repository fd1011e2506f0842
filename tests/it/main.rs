//! The integration tests: one crate, so the library and its dependencies are linked once, not
//! once per file. Each module is the suite of one part (`power`, `faults`, `cli`, ...);
//! `tests/common` holds what they share and `tests/emulator` the board emulator.
//!
//! `tests/alloc.rs` stays a crate of its own: its global allocator counts every allocation of
//! every thread in the process, which other tests running beside it would add to.
//!
//! Clock sessions started in this process (`power::PowerSession`) are process-wide: its panic
//! hook restores every registered one. The tests that start one take [`common::SESSIONS`], so
//! a deliberate panic in one cannot restore another's.

#[path = "../common/mod.rs"]
mod common;
#[macro_use]
#[path = "../emulator/mod.rs"]
mod emulator;

mod architecture;
mod boards;
mod check_run;
mod cli;
mod daemon;
mod dla_form;
mod families;
mod faults;
mod gstreamer;
mod hazards;
mod http;
mod mavlink;
mod mot;
mod mqtt;
mod onnxruntime;
mod power;
mod properties;
mod reference;
mod ros2;
mod synthetic_accuracy;
mod v4l2_buffers;
mod view;
