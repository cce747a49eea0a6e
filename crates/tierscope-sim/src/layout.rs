//! Where a workload's memory sits in the simulated process: a small program image near the
//! bottom, shared libraries just below the top of the mmap area, the workload's regions
//! allocated top-down below them (as Linux places large anonymous mmaps), and a stack near
//! the top of user space. DAMON's three-region heuristic sees the same two big gaps it sees
//! in a real process.

use tierscope_core::workload::WorkloadSpec;
use tierscope_core::{AddrRange, Mapping, PageSize, Paging};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// The program's text, data and brk heap.
pub const PROGRAM: AddrRange = AddrRange::new(0x5555_5540_0000, 0x5555_5540_0000 + 4 * MIB);
const LIBS_SIZE: u64 = 16 * MIB;
const STACK_SIZE: u64 = 8 * MIB;

/// The mappings of a process running `spec`, and where each workload region starts.
#[derive(Debug, Clone)]
pub struct Layout {
    pub mappings: Vec<Mapping>,
    /// Start address of each workload region, in spec order.
    pub region_starts: Vec<u64>,
    /// All workload regions, as one range.
    pub heap: AddrRange,
}

/// Rounds `x` up to a multiple of `align` (a power of two).
pub const fn align_up(x: u64, align: u64) -> u64 {
    (x + align - 1) & !(align - 1)
}

impl Layout {
    /// The workload's regions in the spec's order (each rounded up to 2 MiB; laid out
    /// top-down, so the first is the highest).
    pub fn regions(&self) -> Vec<AddrRange> {
        self.region_starts
            .iter()
            .enumerate()
            .map(|(i, &start)| {
                let end = if i == 0 {
                    self.heap.end
                } else {
                    self.region_starts[i - 1]
                };
                AddrRange::new(start, end)
            })
            .collect()
    }
}

/// Lays out `spec`. Regions are rounded up to whole 2 MiB blocks (so THP can map them) and
/// placed contiguously; fails when they do not fit in the user address space.
pub fn lay_out(spec: &WorkloadSpec, paging: Paging, page: PageSize) -> Result<Layout, String> {
    let user_top = paging.user_space_bytes();
    let stack_end = user_top - 8 * GIB;
    let mmap_top = user_top - TIB;
    let libs = AddrRange::new(mmap_top - LIBS_SIZE, mmap_top);
    // Checked: a spec that skipped validation may hold sizes near 2^64.
    let sizes: Vec<u64> = spec
        .regions
        .iter()
        .map(|r| r.size.0.checked_next_multiple_of(2 * MIB))
        .collect::<Option<_>>()
        .ok_or("a region is larger than the address space")?;
    let total = sizes
        .iter()
        .try_fold(0u64, |sum, &s| sum.checked_add(s))
        .ok_or("the workload's regions add up to more than 2^64 bytes")?;
    let room = libs.start - 2 * MIB - PROGRAM.end - GIB;
    if total > room {
        return Err(format!(
            "the workload's {} bytes do not fit in {}-level paging's user address space{}",
            total,
            paging.levels(),
            if paging == Paging::FourLevel {
                " (use machine.paging_levels = 5)"
            } else {
                ""
            }
        ));
    }
    // Top-down: the first region is allocated first, so it sits highest; heap offsets in
    // reports count from the lowest address.
    let heap_end = libs.start - 2 * MIB;
    let heap_start = heap_end - total;
    let mut region_starts = vec![0; sizes.len()];
    let mut top = heap_end;
    let mut heap_maps = vec![];
    for (i, (r, &size)) in spec.regions.iter().zip(&sizes).enumerate() {
        top -= size;
        region_starts[i] = top;
        heap_maps.push(Mapping {
            range: AddrRange::new(top, top + size),
            page_size: page,
            name: format!("heap:{}", r.name),
        });
    }
    heap_maps.reverse();
    let mut mappings = vec![Mapping {
        range: PROGRAM,
        page_size: PageSize::Base4K,
        name: "program".into(),
    }];
    mappings.extend(heap_maps);
    mappings.push(Mapping {
        range: libs,
        page_size: PageSize::Base4K,
        name: "libs".into(),
    });
    mappings.push(Mapping {
        range: AddrRange::new(stack_end - STACK_SIZE, stack_end),
        page_size: PageSize::Base4K,
        name: "stack".into(),
    });
    Ok(Layout {
        mappings,
        region_starts,
        heap: AddrRange::new(heap_start, heap_end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::parse_masim;

    #[test]
    fn regions_are_contiguous_aligned_and_sorted() {
        let spec = parse_masim("a, 1000000\nb, 64GiB\n\np\n10\na, 1, 4096, 1\n").unwrap();
        let l = lay_out(&spec, Paging::FourLevel, PageSize::Huge2M).unwrap();
        for w in l.mappings.windows(2) {
            assert!(w[0].range.end <= w[1].range.start);
        }
        assert_eq!(l.heap.len(), 2 * MIB + 64 * GIB);
        assert_eq!(l.region_starts[0] + 2 * MIB, l.heap.end);
        assert_eq!(l.region_starts[1], l.heap.start);
        assert!(l.heap.start.is_multiple_of(2 * MIB));
    }

    #[test]
    fn sizes_near_two_to_the_64_are_errors_not_overflows() {
        // Specs that skipped validation (the MASIM parser refuses these sizes).
        let mut spec = parse_masim("a, 4096\nb, 4096\n\np\n10\na, 1, 4096, 1\n").unwrap();
        spec.regions[0].size.0 = u64::MAX;
        assert!(lay_out(&spec, Paging::FiveLevel, PageSize::Base4K).is_err());
        spec.regions[0].size.0 = 1 << 63;
        spec.regions[1].size.0 = 1 << 63;
        assert!(lay_out(&spec, Paging::FiveLevel, PageSize::Base4K).is_err());
    }

    #[test]
    fn petabytes_need_five_levels() {
        let spec = parse_masim("a, 1PiB\n\np\n10\na, 1, 4096, 1\n").unwrap();
        let e = lay_out(&spec, Paging::FourLevel, PageSize::Base4K).unwrap_err();
        assert!(e.contains("paging_levels = 5"), "{e}");
        assert!(lay_out(&spec, Paging::FiveLevel, PageSize::Base4K).is_ok());
    }
}
