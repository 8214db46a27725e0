//! Where blocks live in memory: the driver's view of what each local function process's
//! memory tier holds ([`nums_function::memory::tier_budget`]), from the batches that
//! process ran — the blocks each read from the store and wrote — kept least recently used
//! within the budget each batch gave the tier, as the tier keeps them. LSHS places a task
//! over such blocks on the slot that holds them (NumS placed operations on the Ray node
//! holding their operands), and its cost model charges them as memory hits.
//!
//! A hint only: a block evicted sooner than here, or held by a process that died before
//! its replacement first reported, is a miss that reads the store; a block rewritten in
//! the store is never served stale, because the tier checks each kept block's version at
//! every read.

use std::sync::Mutex;

use lru::LruCache;
use nums_layout::batch::Batch;

/// The key of the Invoke API's ClientContext `custom` map that names the local function
/// process (its slot, from 0) an invocation is for.
pub(crate) const SLOT_CONTEXT: &str = "nums_slot";

/// The ClientContext (base64 JSON, as the Invoke API takes it) of an invocation for slot
/// `slot`'s process.
pub(crate) fn slot_context(slot: usize) -> String {
    use base64::Engine;
    let json = serde_json::json!({ "custom": { SLOT_CONTEXT: slot.to_string() } });
    base64::engine::general_purpose::STANDARD.encode(json.to_string())
}

/// What the slots' processes hold, as far as the driver knows (see the module docs).
pub(crate) struct Residency {
    /// The tier's share of each batch's headroom, in percent.
    percent: u32,
    /// Per slot, what it holds; and the blocks met so far.
    slots: Mutex<(Vec<Held>, u64)>,
}

/// A kept block: its decoded bytes, and when it was last met (a count of blocks met).
#[derive(Clone, Copy)]
struct Kept {
    bytes: u64,
    tick: u64,
}

/// One process's blocks, most recently used first.
struct Held {
    /// Which of the slot's processes holds them ([`nums_layout::batch::Stats::process_generation`]).
    generation: u64,
    blocks: LruCache<String, Kept>,
    bytes: u64,
    budget: u64,
}

impl Held {
    fn new() -> Held {
        Held {
            generation: 0,
            blocks: LruCache::unbounded(),
            bytes: 0,
            budget: 0,
        }
    }

    fn evict_to(&mut self, budget: u64) {
        while self.bytes > budget {
            let Some((_, k)) = self.blocks.pop_lru() else {
                break;
            };
            self.bytes -= k.bytes;
        }
    }

    /// Keeps `key`, as the tier keeps a block (none over a quarter of the budget).
    fn keep(&mut self, key: String, bytes: u64, tick: u64) {
        if bytes > self.budget / 4 {
            return;
        }
        if let Some(old) = self.blocks.put(key, Kept { bytes, tick }) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
        let budget = self.budget;
        self.evict_to(budget);
    }
}

impl Residency {
    /// Nothing held yet; processes keep `percent` of each batch's headroom.
    pub(crate) fn new(percent: u64) -> Residency {
        Residency {
            percent: percent.min(100) as u32,
            slots: Mutex::new((Vec::new(), 0)),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, (Vec<Held>, u64)> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether any process is known to hold anything (else plans are made as if none did).
    pub(crate) fn is_empty(&self) -> bool {
        self.slots().0.iter().all(|h| h.blocks.is_empty())
    }

    /// Slot `slot`'s process `generation` ran `batch`: its tier shrank to the batch's
    /// share, then kept each block the batch read from the store or wrote, in the order it
    /// met them. A later process of the slot (the endpoint replaced the one before) started
    /// with nothing held; a report from an earlier one, gone, is too late to count.
    pub(crate) fn ran(&self, slot: usize, generation: u64, batch: &Batch) {
        let budget = nums_function::memory::tier_budget(batch.prefetch_budget, self.percent);
        let mut g = self.slots();
        let (slots, tick) = &mut *g;
        if slots.len() <= slot {
            slots.resize_with(slot + 1, Held::new);
        }
        let h = &mut slots[slot];
        if generation < h.generation {
            return;
        }
        if generation > h.generation {
            *h = Held {
                generation,
                ..Held::new()
            };
        }
        h.budget = budget;
        h.evict_to(budget);
        if budget == 0 {
            return;
        }
        let key = |r: &nums_layout::batch::BlockRef| {
            let a = &batch.arrays[r.array as usize];
            let key = nums_layout::zarr::chunk_key(&a.path, &r.index);
            (key, a.meta.block_nbytes(&r.index))
        };
        let mut made = std::collections::HashSet::new();
        for t in &batch.tasks {
            for r in t.inputs.iter().filter(|r| !made.contains(*r)) {
                let (k, n) = key(r);
                *tick += 1;
                h.keep(k, n, *tick);
            }
            made.insert(&t.output);
            if t.write_output {
                let (k, n) = key(&t.output);
                *tick += 1;
                h.keep(k, n, *tick);
            }
        }
    }

    /// The slot whose process holds the block stored at `key` (its store's key), if one
    /// is known to: the one that met it last, where several did.
    pub(crate) fn holder(&self, key: &str) -> Option<usize> {
        // Slots are few (the workers): a look in each.
        let g = self.slots();
        (g.0.iter().enumerate())
            .filter_map(|(s, h)| Some((h.blocks.peek(key)?.tick, s)))
            .max()
            .map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nums_layout::batch::{ArrayRef, BlockRef, Kernel, Task, UnaryOp};
    use nums_layout::{ArrayMeta, DType, StoreSpec};

    /// A batch reading blocks `reads` of an 8-block array of 1 MiB blocks (`x`) into one
    /// output block each, with `headroom` bytes of headroom.
    fn batch(reads: &[u64], headroom: u64) -> Batch {
        let meta = ArrayMeta::new(vec![8 * 131_072], vec![131_072], DType::Float64);
        let array = |path: &str| ArrayRef {
            path: path.into(),
            meta: meta.clone(),
            read_only: false,
            sparse: false,
            intermediate: false,
            foreign: None,
        };
        Batch {
            store: StoreSpec {
                url: "file:///tmp/x".into(),
                endpoint: None,
            },
            job_prefix: "j".into(),
            arrays: vec![array("j/x"), array("j/y")],
            tasks: reads
                .iter()
                .map(|&i| Task {
                    kernel: Kernel::Unary { op: UnaryOp::Neg },
                    inputs: vec![BlockRef {
                        array: 0,
                        index: vec![i],
                    }],
                    output: BlockRef {
                        array: 1,
                        index: vec![i],
                    },
                    write_output: true,
                })
                .collect(),
            prefetch_budget: headroom,
        }
    }

    /// What a slot's process ran it holds, within the budget its last batch gave the
    /// tier, least recently used gone first; the latest holder of a block wins.
    #[test]
    fn holds_what_each_slot_read_and_wrote_within_its_budget() {
        let r = Residency::new(50);
        assert!(r.is_empty());
        // 16 MiB of headroom: an 8 MiB tier, eight blocks of 1 MiB.
        r.ran(0, 0, &batch(&[0, 1, 2], 16 << 20));
        r.ran(1, 0, &batch(&[3], 16 << 20));
        assert_eq!(r.holder("j/x/c/0"), Some(0));
        assert_eq!(r.holder("j/y/c/2"), Some(0));
        assert_eq!(r.holder("j/x/c/3"), Some(1));
        assert_eq!(r.holder("j/x/c/7"), None);
        // Met later on slot 1: there.
        r.ran(1, 0, &batch(&[1], 16 << 20));
        assert_eq!(r.holder("j/x/c/1"), Some(1));
        assert_eq!(r.holder("j/x/c/0"), Some(0));
        // Slot 0 runs 4..8: ten blocks more than its eight hold; 0..2's go.
        r.ran(0, 0, &batch(&[4, 5, 6, 7], 16 << 20));
        assert_eq!(r.holder("j/x/c/0"), None);
        assert_eq!(r.holder("j/y/c/7"), Some(0));
        // A batch that leaves no headroom empties the slot's tier.
        r.ran(1, 0, &batch(&[], 0));
        assert_eq!(r.holder("j/x/c/3"), None);
        // A tier that is off holds nothing.
        let off = Residency::new(0);
        off.ran(0, 0, &batch(&[0], 16 << 20));
        assert!(off.is_empty());
    }

    /// A slot whose process was replaced holds only what the new process met, from its
    /// first report; a late report from the process before it counts for nothing.
    #[test]
    fn a_replaced_process_holds_nothing_of_its_predecessor() {
        let r = Residency::new(50);
        r.ran(0, 0, &batch(&[0, 1], 16 << 20));
        r.ran(1, 0, &batch(&[2], 16 << 20));
        // Slot 0's second process reports first: 0 and 1 are no longer held there.
        r.ran(0, 1, &batch(&[3], 16 << 20));
        assert_eq!(r.holder("j/x/c/0"), None);
        assert_eq!(r.holder("j/y/c/1"), None);
        assert_eq!(r.holder("j/x/c/3"), Some(0));
        assert_eq!(r.holder("j/x/c/2"), Some(1));
        // The first process's last batch, reported after: it is gone with its blocks.
        r.ran(0, 0, &batch(&[4], 16 << 20));
        assert_eq!(r.holder("j/x/c/4"), None);
        r.ran(0, 1, &batch(&[5], 16 << 20));
        assert_eq!(r.holder("j/x/c/3"), Some(0));
        assert_eq!(r.holder("j/x/c/5"), Some(0));
    }
}
