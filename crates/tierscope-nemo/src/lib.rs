//! NEMO (Li et al., "Finding NEMO: Nimble and Expressive Memory Observability"):
//! memory-controller telemetry and its driver, self-contained. Requests are routed to a
//! controller and channel (`interleave`); each controller's pipelines match, update and
//! notify (`pipeline`, with the operators in `ops`); pipelines must fit the controller's
//! SRAM (`sram`, `controller`); the driver registers telemetries, programs translations,
//! merges reads across controllers and drains notifications (`driver`); `multiplex`
//! rotates regions through translation entries and gives §6.1's sweep time. (The
//! noisy-neighbour use case, §5.3, runs on the engines: the `throttle` policy.)
//! docs/techniques/NEMO.md gives every rule's source in the paper or the public code.

pub mod controller;
pub mod driver;
pub mod interleave;
pub mod llc;
pub mod multiplex;
pub mod pipeline;
pub mod sram;

/// Table 1's operators, shared with the machines' capability (`tierscope_core::memtel`).
pub use tierscope_core::memtel::ops;

pub use driver::{Driver, DriverError, MemTelemetry, NemoConfig, Notification, TelemetryId};
pub use interleave::{Interleave, Route};
pub use llc::{Llc, LlcConfig};
pub use multiplex::{sweep_time, sweep_time_sram, Multiplexer};
pub use ops::{Operand, Overflow, Predicate, ReadEffect, UpdateOp};
pub use pipeline::{Filter, Kinds, MaskShift, Notify, Request, TelemetrySpec, Translation, Update};
