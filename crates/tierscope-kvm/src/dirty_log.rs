//! KVM's dirty log of the heap and of the page-table pages (what Intel PML logs in
//! hardware), and the write-log capability the engine offers monitors on it.

use crate::engine::Shared;
use crate::vm::{Layout, Vm, SLOT_HEAP, SLOT_PT};
use crate::KvmError;
use std::sync::Arc;
use tierscope_core::{AddrRange, WriteLog};

/// KVM's dirty log of the heap (and its page-table pages), shareable with a monitor.
#[derive(Clone)]
pub struct DirtyLog {
    pub(crate) vm: Arc<Vm>,
}

impl DirtyLog {
    fn pages(&self, slot: u32, base: u64) -> Result<Vec<u64>, KvmError> {
        Ok(self
            .vm
            .dirty_pages(slot)?
            .into_iter()
            .map(|p| base + p * 4096)
            .collect())
    }

    /// Written heap pages (guest-virtual, 4 KiB, sorted) since the previous harvest.
    pub fn harvest(&self) -> Result<Vec<u64>, KvmError> {
        let l = &self.vm.layout;
        let mut v = self.pages(SLOT_HEAP, l.heap_va)?;
        v.retain(|&a| a < l.heap_va + l.heap_len);
        Ok(v)
    }

    /// Page-table pages (guest-physical) written since the previous harvest: under shadow
    /// paging these are the pages whose ACCESSED/DIRTY bits the MMU set (vmmload's read
    /// detection).
    pub fn harvest_page_tables(&self) -> Result<Vec<u64>, KvmError> {
        self.pages(SLOT_PT, self.vm.layout.pt_gpa)
    }

    /// The spans (guest-virtual) the leaf page tables written since the previous harvest
    /// map: under shadow paging the MMU writes a table when it sets an ACCESSED or DIRTY
    /// bit in it, so these tables hold entries accessed since (vmmload's read detection).
    pub fn harvest_table_spans(&self) -> Result<Vec<AddrRange>, KvmError> {
        let leaves = &self.vm.leaf_tables;
        let mut out: Vec<AddrRange> = self
            .harvest_page_tables()?
            .into_iter()
            .filter_map(|t| {
                let i = leaves.binary_search_by_key(&t, |&(g, _, _)| g).ok()?;
                let (_, va0, span) = leaves[i];
                Some(AddrRange::new(va0, va0 + 512 * span))
            })
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    pub fn layout(&self) -> &Layout {
        &self.vm.layout
    }
}

/// The engine's write log: harvests of the dirty log; a failed harvest is recorded as a
/// guest error (`KvmEngine::check`) and drains nothing.
pub(crate) struct KvmWriteLog {
    pub(crate) log: DirtyLog,
    pub(crate) shared: Arc<Shared>,
}

impl KvmWriteLog {
    fn drain<T>(&self, r: Result<Vec<T>, KvmError>, out: &mut Vec<T>) {
        match r {
            Ok(mut v) => out.append(&mut v),
            Err(e) => self
                .shared
                .errors
                .lock()
                .expect("errors")
                .push(format!("dirty log: {e}")),
        }
    }
}

impl WriteLog for KvmWriteLog {
    fn drain_written(&mut self, out: &mut Vec<u64>) {
        self.drain(self.log.harvest(), out);
    }

    fn drain_tables(&mut self, out: &mut Vec<AddrRange>) {
        self.drain(self.log.harvest_table_spans(), out);
    }
}
