//! Virtual addresses, address ranges, page sizes and page-table levels of x86-64 paging.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A level of the x86-64 radix page table, numbered from the leaf: an entry at level `n`
/// spans `4 KiB << (9 * n)` bytes.
///
/// Names follow the hardware: `Pte` (4 KiB), `Pmd` (PDE, 2 MiB), `Pud` (PDPTE, 1 GiB),
/// `Pml4` (512 GiB) and `Pml5` (256 TiB, 5-level paging only). The Telescope paper's "PGD"
/// is the root: `Pml4` with 4-level paging, `Pml5` with 5-level paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Pte = 0,
    Pmd = 1,
    Pud = 2,
    Pml4 = 3,
    Pml5 = 4,
}

impl Level {
    pub const ALL: [Level; 5] = [Level::Pte, Level::Pmd, Level::Pud, Level::Pml4, Level::Pml5];

    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn from_index(i: usize) -> Level {
        match i {
            0 => Level::Pte,
            1 => Level::Pmd,
            2 => Level::Pud,
            3 => Level::Pml4,
            _ => Level::Pml5,
        }
    }

    /// log2 of the bytes one entry at this level maps.
    pub const fn span_shift(self) -> u32 {
        12 + 9 * self as u32
    }

    /// Bytes one entry at this level maps.
    pub const fn span(self) -> u64 {
        1u64 << self.span_shift()
    }

    /// The first address of the entry's span containing `va`.
    pub const fn align_down(self, va: u64) -> u64 {
        va & !(self.span() - 1)
    }

    /// The level above, if any.
    pub const fn up(self) -> Option<Level> {
        match self {
            Level::Pml5 => None,
            l => Some(Level::from_index(l as usize + 1)),
        }
    }

    /// The level below, if any.
    pub const fn down(self) -> Option<Level> {
        match self {
            Level::Pte => None,
            l => Some(Level::from_index(l as usize - 1)),
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Level::Pte => "pte",
            Level::Pmd => "pmd",
            Level::Pud => "pud",
            Level::Pml4 => "pml4",
            Level::Pml5 => "pml5",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// 4-level (48-bit) or 5-level (57-bit) paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Paging {
    #[serde(rename = "4")]
    FourLevel,
    #[serde(rename = "5")]
    FiveLevel,
}

impl Paging {
    pub const fn levels(self) -> usize {
        match self {
            Paging::FourLevel => 4,
            Paging::FiveLevel => 5,
        }
    }

    /// The root level (the paper's PGD).
    pub const fn root(self) -> Level {
        match self {
            Paging::FourLevel => Level::Pml4,
            Paging::FiveLevel => Level::Pml5,
        }
    }

    /// Bytes of virtual address space in the lower (user) half.
    pub const fn user_space_bytes(self) -> u64 {
        match self {
            Paging::FourLevel => 1 << 47,
            Paging::FiveLevel => 1 << 56,
        }
    }
}

/// The size of the pages mapping a workload's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageSize {
    Base4K,
    Huge2M,
}

impl PageSize {
    pub const fn bytes(self) -> u64 {
        match self {
            PageSize::Base4K => 4096,
            PageSize::Huge2M => 2 << 20,
        }
    }

    /// The page-table level holding the leaf entries of pages of this size.
    pub const fn leaf_level(self) -> Level {
        match self {
            PageSize::Base4K => Level::Pte,
            PageSize::Huge2M => Level::Pmd,
        }
    }

    pub fn parse(text: &str) -> Result<PageSize, String> {
        match crate::units::parse_size(text) {
            Ok(4096) => Ok(PageSize::Base4K),
            Ok(0x20_0000) => Ok(PageSize::Huge2M),
            _ => Err(format!(
                "page size `{text}` is not supported (expected 4KiB or 2MiB)"
            )),
        }
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PageSize::Base4K => "4KiB",
            PageSize::Huge2M => "2MiB",
        })
    }
}

impl Serialize for PageSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        PageSize::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A half-open range of virtual addresses `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AddrRange {
    pub start: u64,
    pub end: u64,
}

impl AddrRange {
    pub const fn new(start: u64, end: u64) -> Self {
        AddrRange { start, end }
    }

    pub const fn len(&self) -> u64 {
        self.end - self.start
    }

    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    pub const fn contains(&self, va: u64) -> bool {
        self.start <= va && va < self.end
    }

    /// Bytes shared with `other`.
    pub fn overlap(&self, other: &AddrRange) -> u64 {
        self.end
            .min(other.end)
            .saturating_sub(self.start.max(other.start))
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}-{:#x}", self.start, self.end)
    }
}

/// One mapping of the monitored process, like a line of /proc/pid/maps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub range: AddrRange,
    pub page_size: PageSize,
    /// What the mapping is ("heap:a", "stack", ...), for humans only.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_spans() {
        assert_eq!(Level::Pte.span(), 4096);
        assert_eq!(Level::Pmd.span(), 2 << 20);
        assert_eq!(Level::Pud.span(), 1 << 30);
        assert_eq!(Level::Pml4.span(), 512 << 30);
        assert_eq!(Level::Pml5.span(), 256 << 40);
        assert_eq!(Level::Pud.align_down((5 << 30) + 17), 5 << 30);
        assert_eq!(Level::Pte.up(), Some(Level::Pmd));
        assert_eq!(Level::Pml5.up(), None);
        assert_eq!(Paging::FourLevel.root(), Level::Pml4);
    }

    #[test]
    fn page_sizes_parse() {
        assert_eq!(PageSize::parse("4KiB").unwrap(), PageSize::Base4K);
        assert_eq!(PageSize::parse("2MiB").unwrap(), PageSize::Huge2M);
        assert!(PageSize::parse("1GiB").is_err());
    }
}
