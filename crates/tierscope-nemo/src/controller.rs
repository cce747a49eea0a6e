//! One memory controller's NEMO engine: its pipelines and its SRAM (NEMO paper §3,
//! Figure 1: "each memory controller is augmented with a small telemetry engine").

use crate::pipeline::{Pipeline, Request, TelemetrySpec};
use crate::sram;
use tierscope_core::FieldError;

#[derive(Debug, Clone)]
pub struct Controller {
    channels: usize,
    sram_bits: u64,
    used_bits: u64,
    max_pipelines: usize,
    pipelines: Vec<Pipeline>,
}

impl Controller {
    pub fn new(channels: usize, sram_bytes: u64, max_pipelines: usize) -> Self {
        Controller {
            channels,
            sram_bits: sram_bytes * 8,
            used_bits: 0,
            max_pipelines,
            pipelines: Vec::new(),
        }
    }

    /// Whether `spec` would fit: a free pipeline and enough SRAM.
    pub fn check(&self, spec: &TelemetrySpec) -> Result<(), FieldError> {
        if self.pipelines.len() >= self.max_pipelines {
            return Err(FieldError::new(
                "pipelines",
                format!(
                    "all {} pipelines of the controller are in use",
                    self.max_pipelines
                ),
            ));
        }
        sram::check_fit(
            spec,
            self.channels,
            self.sram_bits - self.used_bits,
            self.sram_bits,
        )
    }

    /// Installs a checked `spec` as the last pipeline; returns its position.
    pub fn install(&mut self, spec: &TelemetrySpec) -> usize {
        self.used_bits += sram::pipeline_bits(spec, self.channels);
        self.pipelines.push(Pipeline::new(spec, self.channels));
        self.pipelines.len() - 1
    }

    /// Removes the pipeline at `slot`, freeing its SRAM; later pipelines move down one.
    pub fn remove(&mut self, slot: usize, spec: &TelemetrySpec) {
        self.used_bits -= sram::pipeline_bits(spec, self.channels);
        self.pipelines.remove(slot);
    }

    pub fn pipeline_mut(&mut self, slot: usize) -> &mut Pipeline {
        &mut self.pipelines[slot]
    }

    pub fn used_bytes(&self) -> u64 {
        self.used_bits.div_ceil(8)
    }

    /// A request reaching this controller on `channel`: every pipeline sees it (§3,
    /// "feeds them to all telemetry pipelines simultaneously").
    #[inline]
    pub fn observe(&mut self, req: &Request, channel: usize) {
        for p in &mut self.pipelines {
            p.observe(req, channel);
        }
    }
}
