//! Which memory controller and which of its channels serve a physical address.
//!
//! Servers interleave physical memory across controllers at a fine granularity (NEMO
//! paper §3, "modern servers interleave physical memory across MCs at fine
//! granularity"), and the prototype's two channels are chosen by the parity of the cache
//! line address (§4). We model the common scheme: the address is cut into chunks of
//! `granularity` bytes, consecutive chunks go round-robin to the controllers, and
//! consecutive chunks of one controller go round-robin to its channels.

use tierscope_core::FieldError;

/// The smallest interleaving unit: a cache line, the unit a memory request moves.
pub const CACHE_LINE: u64 = 64;

/// Where a request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub controller: usize,
    pub channel: usize,
}

/// Controllers and channels with round-robin interleaving at a power-of-two granularity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interleave {
    controllers: usize,
    channels: usize,
    granularity_shift: u32,
}

impl Interleave {
    /// `controllers` memory controllers of `channels` channels each, interleaved every
    /// `granularity` bytes (a power of two of at least a cache line).
    pub fn new(controllers: usize, channels: usize, granularity: u64) -> Result<Self, FieldError> {
        if controllers == 0 {
            return Err(FieldError::new("controllers", "must be at least 1"));
        }
        if channels == 0 {
            return Err(FieldError::new("channels", "must be at least 1"));
        }
        if !granularity.is_power_of_two() || granularity < CACHE_LINE {
            return Err(FieldError::new(
                "granularity",
                format!("must be a power of two of at least {CACHE_LINE} bytes, got {granularity}"),
            ));
        }
        Ok(Interleave {
            controllers,
            channels,
            granularity_shift: granularity.trailing_zeros(),
        })
    }

    pub fn controllers(&self) -> usize {
        self.controllers
    }

    pub fn channels(&self) -> usize {
        self.channels
    }

    pub fn granularity(&self) -> u64 {
        1 << self.granularity_shift
    }

    /// The controller and channel serving `addr`. On the per-request path: two divisions
    /// by small constants, no branches.
    #[inline]
    pub fn route(&self, addr: u64) -> Route {
        let chunk = addr >> self.granularity_shift;
        let controller = (chunk % self.controllers as u64) as usize;
        let channel = ((chunk / self.controllers as u64) % self.channels as u64) as usize;
        Route {
            controller,
            channel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prototype_channels_follow_cache_line_parity() {
        // §4: one controller, 2 channels "corresponding to the parity of a cache line address".
        let il = Interleave::new(1, 2, 64).unwrap();
        for (addr, channel) in [(0, 0), (63, 0), (64, 1), (127, 1), (128, 0), (0x1_0040, 1)] {
            assert_eq!(
                il.route(addr),
                Route {
                    controller: 0,
                    channel
                },
                "addr {addr:#x}"
            );
        }
    }

    #[test]
    fn controllers_then_channels_round_robin() {
        // 3 controllers x 2 channels at 256 B: chunk = addr / 256;
        // controller = chunk % 3, channel = (chunk / 3) % 2.
        let il = Interleave::new(3, 2, 256).unwrap();
        let cases = [
            (0u64, 0, 0),    // chunk 0
            (256, 1, 0),     // chunk 1
            (512, 2, 0),     // chunk 2
            (768, 0, 1),     // chunk 3: 3 % 3 = 0, 3 / 3 = 1
            (1791, 0, 0),    // 1791 / 256 = 6: 6 % 3 = 0, 6 / 3 = 2, 2 % 2 = 0
            (7 * 256, 1, 0), // chunk 7: 7 % 3 = 1, 7 / 3 = 2, 2 % 2 = 0
            (5 * 256, 2, 1), // chunk 5: 5 % 3 = 2, 5 / 3 = 1
        ];
        for (addr, controller, channel) in cases {
            assert_eq!(
                il.route(addr),
                Route {
                    controller,
                    channel
                },
                "addr {addr}"
            );
        }
    }

    #[test]
    fn every_target_gets_an_equal_share() {
        // Brute force: over 4 x 3 x 8 consecutive chunks each (controller, channel) pair is
        // hit exactly 8 times.
        let il = Interleave::new(4, 3, 4096).unwrap();
        let mut hits = [[0u32; 3]; 4];
        for chunk in 0..(4 * 3 * 8) {
            let r = il.route(chunk * 4096 + 17);
            hits[r.controller][r.channel] += 1;
        }
        assert!(hits.iter().flatten().all(|&h| h == 8), "{hits:?}");
    }

    #[test]
    fn bad_shapes_name_their_field() {
        assert_eq!(Interleave::new(0, 1, 64).unwrap_err().field, "controllers");
        assert_eq!(Interleave::new(1, 0, 64).unwrap_err().field, "channels");
        assert_eq!(Interleave::new(1, 1, 32).unwrap_err().field, "granularity");
        assert_eq!(Interleave::new(1, 1, 96).unwrap_err().field, "granularity");
    }
}
