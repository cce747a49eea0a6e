//! KVM's binary statistics (KVM_GET_STATS_FD): exit counts and the like, per vCPU.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

/// KVM_GET_STATS_FD = _IO(KVMIO, 0xce).
const KVM_GET_STATS_FD: libc::c_ulong = 0xae << 8 | 0xce;

pub struct StatsFd {
    file: File,
}

impl StatsFd {
    pub fn open(fd: &impl AsRawFd) -> Option<StatsFd> {
        // SAFETY: KVM_GET_STATS_FD takes no argument and returns a new file descriptor (or
        // -1); it does not touch memory of this process.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), KVM_GET_STATS_FD as _, 0) };
        if r < 0 {
            return None;
        }
        // SAFETY: `r` is a fresh descriptor that nothing else owns.
        Some(StatsFd {
            file: unsafe { File::from_raw_fd(r) },
        })
    }

    fn u32_at(buf: &[u8], off: usize) -> u32 {
        u32::from_ne_bytes(buf[off..off + 4].try_into().expect("4 bytes"))
    }

    /// Every statistic as (name, value); histograms are summed.
    pub fn read(&self) -> Vec<(String, u64)> {
        let mut h = [0u8; 24];
        if self.file.read_exact_at(&mut h, 0).is_err() {
            return vec![];
        }
        let name_size = Self::u32_at(&h, 4) as usize;
        let num = Self::u32_at(&h, 8) as usize;
        let desc_off = Self::u32_at(&h, 16) as u64;
        let data_off = Self::u32_at(&h, 20) as u64;
        let dsz = 16 + name_size;
        let mut descs = vec![0u8; dsz * num];
        if self.file.read_exact_at(&mut descs, desc_off).is_err() {
            return vec![];
        }
        let mut out = vec![];
        for i in 0..num {
            let d = &descs[i * dsz..(i + 1) * dsz];
            let size = u16::from_ne_bytes([d[6], d[7]]) as usize;
            let off = Self::u32_at(d, 8) as u64;
            let name: String = d[16..]
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as char)
                .collect();
            let mut data = vec![0u8; 8 * size.max(1)];
            if self.file.read_exact_at(&mut data, data_off + off).is_err() {
                continue;
            }
            let v = data
                .chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .sum();
            out.push((name, v));
        }
        out
    }
}
