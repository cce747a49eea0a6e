//! Time multiplexing of translation entries (NEMO paper §3.3 "the OS can reprogram any
//! entry to time-multiplex its slots across more regions than fit in SRAM", §5.2, §6.1)
//! and the sweep-time formula of §6.1.
//!
//! The multiplexer owns a list of primary keys and one or more telemetries of one shape
//! (§5.2: seven pipelines of 16 hugepages each, 112 tracked at a time). Each scan, every
//! `tau`, reads the regions programmed during the last period and programs the next batch
//! round-robin, as MEMTIS-NEMO's `reprogram()` does every 500 ms. The read side effect
//! should be a reset so each scan sees only its own period (Listing 1 resets to 0).

use crate::driver::{Driver, DriverError, TelemetryId};

/// §6.1: the time to visit every region of an `m`-byte range once when `p` pipelines of
/// `s` states each track `g` bytes per state, reprogrammed every `tau`:
/// `T = M x tau / (P x S x G)`. Any time unit: the result is in `tau`'s.
pub fn sweep_time(m: u64, tau: f64, p: u64, s: u64, g: u64) -> f64 {
    m as f64 * tau / (p as f64 * s as f64 * g as f64)
}

/// §6.1 with `|SRAM| = P x S x W` substituted: `T = M x tau x W / (|SRAM| x G)`, where
/// `w` is the state width and `sram` the state SRAM, both in bytes.
pub fn sweep_time_sram(m: u64, tau: f64, w: u64, sram: u64, g: u64) -> f64 {
    m as f64 * tau * w as f64 / (sram as f64 * g as f64)
}

#[derive(Debug, Clone)]
pub struct Multiplexer {
    telemetries: Vec<TelemetryId>,
    /// Regions each telemetry holds at once: `min(T, S / span)`.
    per_telemetry: usize,
    keys: Vec<u64>,
    /// The next key to program.
    cursor: usize,
    /// Keys programmed now, slot `i` on telemetry `i / per_telemetry`, region `i % per_telemetry`.
    programmed: Vec<u64>,
    /// Keys whose regions have been read after a full period; a sweep is done at `keys.len()`.
    visited: usize,
    scans: u64,
    buffer: Vec<u64>,
}

impl Multiplexer {
    /// Rotates `keys` through `telemetries` (one shape, all registered on `driver`) and
    /// programs the first batch.
    pub fn new(
        driver: &mut Driver,
        telemetries: Vec<TelemetryId>,
        keys: Vec<u64>,
    ) -> Result<Self, DriverError> {
        let mut per_telemetry = usize::MAX;
        for &t in &telemetries {
            let entries = driver.spec(t)?.entries as u64;
            per_telemetry = per_telemetry.min(driver.regions(t)?.min(entries) as usize);
        }
        let mut mux = Multiplexer {
            telemetries,
            per_telemetry,
            keys,
            cursor: 0,
            programmed: Vec::new(),
            visited: 0,
            scans: 0,
            buffer: Vec::new(),
        };
        mux.program_next(driver)?;
        Ok(mux)
    }

    /// Regions tracked at once across all telemetries.
    pub fn slots(&self) -> usize {
        self.per_telemetry * self.telemetries.len()
    }

    /// The keys programmed now.
    pub fn programmed(&self) -> &[u64] {
        &self.programmed
    }

    pub fn scans(&self) -> u64 {
        self.scans
    }

    /// Whether every key has been tracked for a full period at least once.
    pub fn swept(&self) -> bool {
        self.visited >= self.keys.len()
    }

    /// The end of a period: reads every programmed region, hands `visit` its key and its
    /// states, then programs the next batch.
    pub fn scan(
        &mut self,
        driver: &mut Driver,
        mut visit: impl FnMut(u64, &[u64]),
    ) -> Result<(), DriverError> {
        for (i, &key) in self.programmed.iter().enumerate() {
            let t = self.telemetries[i / self.per_telemetry];
            driver.read_region(t, (i % self.per_telemetry) as u64, &mut self.buffer)?;
            visit(key, &self.buffer);
        }
        self.visited += self.programmed.len();
        self.scans += 1;
        self.program_next(driver)
    }

    fn program_next(&mut self, driver: &mut Driver) -> Result<(), DriverError> {
        for (i, &key) in self.programmed.iter().enumerate() {
            driver.clear_translation(self.telemetries[i / self.per_telemetry], key)?;
        }
        self.programmed.clear();
        let batch = self.slots().min(self.keys.len());
        for i in 0..batch {
            let key = self.keys[(self.cursor + i) % self.keys.len()];
            let t = self.telemetries[i / self.per_telemetry];
            driver.set_translation(t, key, (i % self.per_telemetry) as u64)?;
            self.programmed.push(key);
        }
        if !self.keys.is_empty() {
            self.cursor = (self.cursor + batch) % self.keys.len();
        }
        Ok(())
    }
}
