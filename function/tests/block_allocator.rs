//! The functions' allocator ([`BlockAllocator`]) in a test binary of its own, so that no
//! other test takes or frees blocks while this one counts them.

use nums_function::memory::{
    BlockAllocator, KEPT_SHARE, bound_kept_blocks, kept_bytes, kept_fitting, release_kept_blocks,
    setup_block_memory,
};

#[global_allocator]
static ALLOC: BlockAllocator = BlockAllocator;

/// A freed block is handed to the next allocation of its size (zeroed if asked), the kept
/// bytes stay within the bound (the oldest leave first), and release frees them all.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_freed_block_is_kept_within_the_bound_and_reused() {
    setup_block_memory(KEPT_SHARE * (48 << 20));
    let n = (9 << 20) + 4321;
    let a = vec![7u8; n];
    let p = a.as_ptr();
    drop(a);
    assert!(kept_bytes() >= n as u64);
    // What the pipeline asks before it reads a block ahead into a kept one (a small
    // block comes from the heap: always).
    assert_eq!(kept_fitting(n as u64), 1);
    assert_eq!(kept_fitting(2 * n as u64), 0);
    assert_eq!(kept_fitting(4096), usize::MAX);
    let b = vec![0u8; n];
    assert_eq!(b.as_ptr(), p, "the freed block was not reused");
    assert!(
        b.iter().all(|&x| x == 0),
        "a reused block asked zeroed was not"
    );
    assert_eq!(kept_bytes(), 0);
    // A block much larger than a kept one does not take it.
    let c = vec![3u8; 2 * n];
    assert_ne!(c.as_ptr(), p);
    drop(c);
    let many: Vec<Vec<u8>> = (0..8).map(|_| vec![1u8; (13 << 20) + 77]).collect();
    drop(many);
    assert!(kept_bytes() <= 48 << 20, "kept {} bytes", kept_bytes());
    assert!(
        kept_bytes() >= 3 * (13 << 20),
        "kept only {} bytes",
        kept_bytes()
    );
    drop(b);
    release_kept_blocks();
    assert_eq!(kept_bytes(), 0);

    // An invocation's own bound: within the limit's share, and none with no headroom.
    assert_eq!(bound_kept_blocks(u64::MAX), 48 << 20);
    assert_eq!(bound_kept_blocks(20 << 20), 20 << 20);
    drop(vec![1u8; 12 << 20]);
    drop(vec![1u8; (12 << 20) + 4096 * 300]);
    assert!(kept_bytes() <= 20 << 20, "kept {} bytes", kept_bytes());
    release_kept_blocks();
    assert_eq!(bound_kept_blocks(0), 0);
    drop(vec![1u8; 12 << 20]);
    assert_eq!(kept_bytes(), 0, "kept with a bound of 0");
}
