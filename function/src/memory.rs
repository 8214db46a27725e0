//! The process's peak resident memory per invocation (Linux: reset the high-water mark
//! through /proc/self/clear_refs, read VmHWM afterwards). Elsewhere both are no-ops and
//! the peak reads 0. And the functions' allocator, which keeps freed blocks for reuse.
//!
//! And the model of that memory the driver plans with ([`task_peak`], [`BASE_MEMORY`]):
//! stated here, beside the code it describes, so that the scheduler and the graph (which
//! refuses or sizes linear-algebra tasks before planning) use one formula. What a task's
//! kernel holds beyond its blocks (its workspace) is the kernels' model, beside them:
//! `nums_layout::batch::kernel_workspace`.

use std::alloc::{GlobalAlloc, Layout, System};
#[cfg(all(target_os = "linux", target_env = "gnu"))]
use std::sync::atomic::Ordering::Relaxed;

/// Memory of a function process before it holds any block (runtime, threads, buffers).
pub const BASE_MEMORY: u64 = 40 << 20;

/// What a task's projected peak ([`task_peak`]) depends on: its blocks' sizes in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskBlocks {
    /// The inputs it reads from the store (decoded bytes).
    pub fetched: u64,
    /// How many blocks `fetched` is.
    pub reads: u64,
    /// The chunks of those blocks, and the largest: an edge block is decoded as its
    /// whole chunk, then cropped (where no block is an edge, `fetched` and the largest).
    pub fetched_chunks: u64,
    /// The largest chunk read.
    pub largest_chunk: u64,
    /// Its largest input, fetched or held (a kernel temporary of its size).
    pub max_in: u64,
    /// Its output block.
    pub out: u64,
    /// The output's chunk: an edge block is padded to it to be encoded.
    pub out_chunk: u64,
    /// Its kernel's workspace ([`nums_layout::batch::kernel_workspace`]).
    pub work: u64,
}

impl TaskBlocks {
    /// A task whose blocks are whole chunks (no edge block): `reads` blocks of `fetched`
    /// bytes read, none larger than `max_in`.
    pub fn whole(fetched: u64, reads: u64, max_in: u64, out: u64, work: u64) -> TaskBlocks {
        TaskBlocks {
            fetched,
            reads,
            fetched_chunks: fetched,
            largest_chunk: max_in,
            max_in,
            out,
            out_chunk: out,
            work,
        }
    }
}

/// Projected peak memory of one task run by [`crate::handle`] (the sequential run the
/// pipeline keeps within): the process's base; its fetched inputs decoded, what their
/// reads hold while in flight (`reading`) and [`READ_MEMORY`] per block read; one
/// input-sized kernel temporary; the output twice (result and accumulator) or, while it
/// is encoded, once with its chunk-sized padded and encoded copies; and its kernel's
/// workspace. In a batch, blocks kept for later tasks add to it, and a block already
/// held is not fetched again, and the batch's description ([`batch_memory`]) is held
/// throughout (the driver's `sched/batch.rs`).
///
/// Every fetched input used to count three times (encoded, decompressed, decoded), as if
/// all were read at once: a sum of 2,000 blocks of 128 KiB was projected at 790 MiB and
/// peaked at 285-295 MiB; and an edge block counted its own size where the function
/// decodes (and encodes) its whole chunk: a task on the 1-row last block of an array in
/// 64 MiB chunks was projected at 40 MiB and peaked at 92-94 MiB
/// (function/tests/memory_projection.rs).
pub fn task_peak(t: &TaskBlocks) -> u64 {
    BASE_MEMORY
        + t.fetched
        + reading(t.fetched_chunks, t.largest_chunk)
        + READ_MEMORY * t.reads
        + t.max_in
        + t.out
        + 2 * t.out_chunk
        + t.work
}

/// What a task's reads hold beyond their decoded blocks, at most: a read in flight holds
/// its encoded bytes until its decoding ends (about its chunk's size at most: a chunk
/// that zstd cannot shrink is stored raw) and, for an edge block, the whole chunk decoded
/// before it is cropped (through another codec chain than nums-cloud's, zarrs' byte
/// buffer instead), so twice its chunk; and at most `IO_CONCURRENCY` (16) reads are in
/// flight at once, in the pipeline and in the sequential run, so a task of many inputs
/// holds a few of these at a time.
fn reading(chunks: u64, largest_chunk: u64) -> u64 {
    2 * chunks.min(crate::IO_CONCURRENCY as u64 * largest_chunk)
}

/// What each block read costs beyond its bytes: its buffer's page rounding and the
/// allocator's gaps between blocks decoded side by side (a block below the mapping
/// threshold comes from the heap, among the encoded buffers freed as it filled), and its
/// entries in the pipeline's tables. Measured on a sum of 2,000 blocks of 128 KiB: 7.9 KiB
/// a block (function/tests/memory_projection.rs).
pub const READ_MEMORY: u64 = 8 << 10;

/// What a function holds for its batch besides blocks, for the whole invocation: the
/// payload and the decoded batch, the pipeline's tables of blocks (uses, reads, live ones)
/// and, for each array the batch names, its stored form (a zarrs array with its codec
/// chain: about 5 KiB). Measured on the largest invocation of a sample sort's main stage
/// (4,096 tasks naming 4,087 arrays): 21.7 MiB, which these constants project as 29 MiB
/// (driver/tests/sort_plan.rs). Before it was counted, that stage went out as one
/// invocation of ~39,000 tasks, projected within `memory_mb` and killed at it.
pub fn batch_memory(tasks: u64, inputs: u64, arrays: u64) -> u64 {
    TASK_MEMORY * tasks + INPUT_MEMORY * inputs + ARRAY_MEMORY * arrays
}

/// A task's share of [`batch_memory`]: its payload (about 260 bytes of JSON) and decoded
/// form.
pub const TASK_MEMORY: u64 = 1 << 10;
/// An input reference's: its payload and decoded form, its entries in the pipeline's
/// tables.
pub const INPUT_MEMORY: u64 = 256;
/// An array's: its stored form.
pub const ARRAY_MEMORY: u64 = 6 << 10;

/// The memory tier of a function process ([`nums_layout::tier`]): blocks it read or wrote
/// kept across its invocations, so that work sent to the same process again
/// (the driver's slot affinity) reads them from memory. The tier must never make a batch
/// fail for memory (the local endpoint kills a process over `memory_mb`, as Lambda does),
/// so before each invocation it shrinks to `percent` of the batch's headroom: the batch's
/// `prefetch_budget`, which the planner sets to the memory limit less the batch's
/// projected peak. The rest of the headroom goes to the pipeline and the allocator's
/// kept blocks as before ([`crate::pipeline`]); the tier's share is taken from it, so
/// the projection's bound holds whatever the tier holds. A block the batch reads from
/// the tier is one the projection counts anyway (as read). Half by default
/// ([`DEFAULT_TIER_PERCENT`]); 0 turns the tier off.
pub fn tier_budget(headroom: u64, percent: u32) -> u64 {
    headroom / 100 * u64::from(percent.min(100))
}

/// The share of a batch's headroom the function process's memory tier may hold, in
/// percent, when the deployment sets none (`NUMS_FUNCTION_TIER_PERCENT`).
pub const DEFAULT_TIER_PERCENT: u32 = 50;

/// The environment variable that sets a function process's tier share (the local
/// endpoint sets it from the `function_tier_percent` setting).
pub const TIER_PERCENT_ENV: &str = "NUMS_FUNCTION_TIER_PERCENT";

/// Large buffers (blocks) get their own mappings, returned to the system when freed, so
/// resident memory follows the blocks alive (glibc otherwise raises its mmap threshold
/// and keeps freed blocks in the heap, which the memory limit would count); up to
/// `limit / KEPT_SHARE` bytes of freed blocks may be kept for the next blocks of about
/// their size ([`BlockAllocator`]; each invocation sets its own bound within that,
/// [`bound_kept_blocks`]). Called once, before any block exists.
pub fn setup_block_memory(limit: u64) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator tuning.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE as i32) };
        kept::CAP.store((limit / KEPT_SHARE) as usize, Relaxed);
        kept::BOUND.store((limit / KEPT_SHARE) as usize, Relaxed);
    }
    let _ = limit;
}

/// Keeps up to `limit / KEPT_SHARE` bytes of freed blocks for reuse in a process whose
/// functions run beside other code (the Python extension, the driver's binary, which run
/// small computes in-process): [`setup_block_memory`] without its mmap threshold, which
/// would send every large allocation of that other code (NumPy's arrays) to fresh pages.
/// Without it, each block a compute in this process makes was a fresh mapping, zeroed by
/// the kernel: 44% of `(X - X.mean(0)) / X.std(0)` on a 500 MB array (`perf`).
pub fn keep_freed_blocks(limit: u64) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        kept::CAP.store((limit / KEPT_SHARE) as usize, Relaxed);
        kept::BOUND.store((limit / KEPT_SHARE) as usize, Relaxed);
    }
    let _ = limit;
}

/// Lets freed blocks be kept up to `bytes` (at most `limit / KEPT_SHARE`, none before
/// [`setup_block_memory`]) until the end of the invocation; returns the bound set. Kept
/// blocks are resident memory that the batch's projection does not count: the invocation
/// takes them out of its headroom (`prefetch_budget`), so the memory limit holds.
pub fn bound_kept_blocks(bytes: u64) -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let bound = (kept::CAP.load(Relaxed) as u64).min(bytes);
        kept::BOUND.store(bound as usize, Relaxed);
        bound
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = bytes;
        0
    }
}

/// Frees the blocks [`BlockAllocator`] keeps and hands the heap's free pages back to the
/// system: at the end of an invocation, so that an idle process holds only what is alive
/// and the next invocation's peak starts from that. (Blocks under the mapping threshold
/// come from the heap, which glibc returns only from its top: after a sum of 2,000 blocks
/// of 128 KiB the process stayed 30 MiB up, and the next invocation, a one-block task
/// projected at the 40 MiB base, peaked at 53 MiB.)
pub fn release_kept_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        kept::release();
        // SAFETY: malloc_trim only returns free memory to the system.
        unsafe { libc::malloc_trim(0) };
    }
}

/// Bytes of freed blocks kept for reuse now.
pub fn kept_bytes() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let held = kept::held() as u64;
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let held = 0;
    held
}

/// How many of the freed blocks kept now would each serve an allocation of `bytes` (a
/// block decoded into one costs no fresh pages). Blocks under the mapping threshold come
/// from the heap, never from fresh mappings: `usize::MAX` for them.
pub fn kept_fitting(bytes: u64) -> usize {
    if bytes < LARGE as u64 {
        return usize::MAX;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let n = kept::fitting(bytes as usize);
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let n = 0;
    n
}

/// The share of the memory limit that freed blocks may hold (kept for reuse). (A quarter
/// kept both inputs of `mean(U * V)` in blocks of 128 MiB at `memory_mb` = 2048, within
/// noise of an eighth there, and put the CSV import of benches/memory_projection.py 1%
/// over its projection.)
pub const KEPT_SHARE: u64 = 8;

/// Buffers from this size up are blocks: mapped on their own, and kept when freed.
const LARGE: usize = 1 << 20;

/// The functions' allocator: the system's, except that a freed block is kept (within
/// [`setup_block_memory`]'s bound; nothing before it is called, as in the driver) and
/// handed to the next allocation of about its size. A new mapping's pages each cost a
/// page fault and a zeroing in the kernel, and each freed one an unmap: in the peers
/// benchmark's `mean(U * V, axis=0)` that was 60% of the functions' time (`perf`), and a
/// batch's blocks are mostly of a few sizes, so a kept block is soon used again.
pub struct BlockAllocator;

// SAFETY: every pointer handed out comes from `System` with a layout `System` accepts
// for it (kept ones were allocated with alignment <= 16, i.e. by malloc, whose free and
// realloc ignore the size), and is returned to `System` at most once.
unsafe impl GlobalAlloc for BlockAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if let Some(p) = kept::take(layout) {
            return p;
        }
        huge_pages(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if let Some(p) = kept::take(layout) {
            // Zeroing pages already mapped costs less than faulting in fresh ones.
            unsafe { p.write_bytes(0, layout.size()) };
            return p;
        }
        huge_pages(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if unsafe { kept::keep(ptr, layout) } {
            return;
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Any pointer handed out is a live `System` one: its realloc (mremap for mapped
        // blocks) is cheaper than a copy into a kept block.
        huge_pages(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

/// Buffers from this size up ask for transparent huge pages (NumPy's threshold).
const HUGE: usize = 4 << 20;

/// Asks the kernel to back the 2 MiB-aligned pages of a new buffer of `size` bytes at `p`
/// with huge pages, as NumPy does for its arrays: where transparent huge pages are
/// given on request (`madvise`, the common setting), a block otherwise gets 4 KiB pages,
/// one page fault each and a TLB miss per page a kernel's strided reads cross (a column
/// of row blocks, the min of a 500 MB array ran at a third of NumPy's bandwidth).
/// `NUMS_CLOUD_HUGE_PAGES=0` turns it off (to compare). Returns `p`.
fn huge_pages(p: *mut u8, size: usize) -> *mut u8 {
    #[cfg(target_os = "linux")]
    if size >= HUGE && !p.is_null() && huge_pages_on() {
        const PAGE: usize = 2 << 20;
        let start = (p as usize).next_multiple_of(PAGE);
        let end = (p as usize + size) / PAGE * PAGE;
        if end > start {
            // SAFETY: advice on pages of a buffer this process owns; it changes no data.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    let _ = size;
    p
}

/// Whether [`huge_pages`] advises (read once; `getenv`, which does not allocate, since
/// this runs inside the allocator).
#[cfg(target_os = "linux")]
fn huge_pages_on() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
    static ON: AtomicU8 = AtomicU8::new(2);
    match ON.load(Relaxed) {
        2 => {
            // SAFETY: a NUL-terminated name; the value is only read, before returning.
            let v = unsafe { libc::getenv(c"NUMS_CLOUD_HUGE_PAGES".as_ptr()) };
            let off = !v.is_null() && unsafe { *v } == b'0' as libc::c_char;
            ON.store(u8::from(!off), Relaxed);
            !off
        }
        on => on == 1,
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod kept {
    use super::LARGE;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Bytes the kept blocks may hold in all, this invocation; 0 keeps none.
    pub(super) static BOUND: AtomicUsize = AtomicUsize::new(0);
    /// The most `BOUND` may be (the memory limit's share).
    pub(super) static CAP: AtomicUsize = AtomicUsize::new(0);

    const SLOTS: usize = 16;

    /// Kept blocks: (address, usable size), packed from slot 0, oldest first; (0, 0) is
    /// an empty slot. A fixed array: the allocator cannot allocate for its own books.
    static KEPT: Mutex<[(usize, usize); SLOTS]> = Mutex::new([(0, 0); SLOTS]);

    fn kept() -> std::sync::MutexGuard<'static, [(usize, usize); SLOTS]> {
        KEPT.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn eligible(layout: Layout) -> bool {
        layout.size() >= LARGE && layout.align() <= 16 && BOUND.load(Relaxed) > 0
    }

    /// Whether kept block `e` may serve an allocation of `want` bytes: it holds them and
    /// wastes at most an eighth of them.
    fn fits(e: (usize, usize), want: usize) -> bool {
        e.0 != 0 && e.1 >= want && e.1 - want <= want / 8
    }

    /// How many kept blocks would serve an allocation of `want` bytes.
    pub(super) fn fitting(want: usize) -> usize {
        if BOUND.load(Relaxed) == 0 {
            return 0;
        }
        kept().iter().filter(|&&e| fits(e, want)).count()
    }

    /// The smallest kept block that holds `layout` and wastes at most an eighth of it.
    pub(super) fn take(layout: Layout) -> Option<*mut u8> {
        if !eligible(layout) {
            return None;
        }
        let want = layout.size();
        let mut k = kept();
        let i = (0..SLOTS)
            .filter(|&i| fits(k[i], want))
            .min_by_key(|&i| k[i].1)?;
        let p = k[i].0;
        // Keep the list packed, oldest first.
        k.copy_within(i + 1.., i);
        k[SLOTS - 1] = (0, 0);
        Some(p as *mut u8)
    }

    /// Keeps a freed block if the bound allows (freeing the oldest kept ones to make room).
    ///
    /// # Safety
    /// `ptr` was allocated by `System` with `layout` and is not used again by the caller.
    pub(super) unsafe fn keep(ptr: *mut u8, layout: Layout) -> bool {
        if !eligible(layout) {
            return false;
        }
        let bound = BOUND.load(Relaxed);
        // SAFETY: a live malloc'd pointer (alignment <= 16).
        let size = unsafe { libc::malloc_usable_size(ptr.cast()) };
        if size > bound {
            return false;
        }
        let mut out = [(0usize, 0usize); SLOTS];
        {
            let mut k = kept();
            let mut held: usize = k.iter().map(|e| e.1).sum();
            let mut n = k.iter().take_while(|e| e.0 != 0).count();
            // The oldest (slot 0) leave first; the list shifts down as they do.
            let mut gone = 0;
            while held + size > bound || n == SLOTS {
                out[gone] = k[0];
                held -= k[0].1;
                k.copy_within(1.., 0);
                k[SLOTS - 1] = (0, 0);
                n -= 1;
                gone += 1;
            }
            k[n] = (ptr as usize, size);
        }
        free(&out);
        true
    }

    /// Bytes the kept blocks hold.
    pub(super) fn held() -> usize {
        kept().iter().map(|e| e.1).sum()
    }

    /// Frees every kept block.
    pub(super) fn release() {
        let out = std::mem::replace(&mut *kept(), [(0, 0); SLOTS]);
        free(&out);
    }

    fn free(blocks: &[(usize, usize)]) {
        for &(p, size) in blocks.iter().filter(|e| e.0 != 0) {
            // SAFETY: a malloc'd block no one uses; free ignores the layout's size.
            unsafe { System.dealloc(p as *mut u8, Layout::from_size_align_unchecked(size, 16)) };
        }
    }
}

/// Resets the high-water mark to the current resident size.
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident bytes since the last [`reset_peak`].
pub fn peak() -> u64 {
    status_kib("VmHWM:").unwrap_or(0) * 1024
}

/// Resident bytes of process `pid`: now, and the peak since it started or last reset it
/// (`VmRSS`, `VmHWM`; the function resets the peak at each invocation).
pub fn usage_of(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = field_kib(&s, "VmRSS:")? * 1024;
    let peak = field_kib(&s, "VmHWM:").map_or(rss, |k| k * 1024);
    Some((rss, peak.max(rss)))
}

fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    field_kib(&s, field)
}

fn field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_sees_an_allocation() {
        super::reset_peak();
        let before = super::peak();
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        let after = super::peak();
        assert!(after >= before + (60 << 20), "{before} -> {after}");
    }
}
