//! Sorting `u64` keys (every int and float sorts as one: [`crate::order::Sortable::key`]).
//! Where the CPU has AVX-512, a vectorised quicksort after x86-simd-sort's design (which
//! NumPy's `np.sort` uses): each partition step compares 8 keys to the pivot at once and
//! compresses them to the two ends, and pieces of up to 256 keys are sorted in registers by
//! a bitonic network. On a 3M column here it sorted 1.2-1.4x faster than std's ipnsort
//! on one thread; sorted on several, its partition splits the keys among the threads, where
//! sorting parts and merging them spent a sixth of the time in the merge. Elsewhere std's
//! `sort_unstable`, and the parts merged ([`crate::order`]'s `par_sort`).

/// Sorts `v` on this thread; false (and `v` untouched) where the CPU has no AVX-512.
pub(crate) fn sort(v: &mut [u64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        // SAFETY: the CPU has AVX-512F and POPCNT (checked just above).
        unsafe { avx512::qsort(v, depth_limit(v.len())) };
        return true;
    }
    let _ = v;
    false
}

/// Sorts `v` on rayon's threads: split by a partition until each thread has a part, the
/// parts sorted as [`sort`] does; false (and `v` untouched) where the CPU has no AVX-512.
pub(crate) fn par_sort(v: &mut [u64]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if avx512::available() {
        // A part a third larger than an even share stays whole: a split that missed
        // the middle by a little costs less than one more pass.
        let grain = (v.len() * 4 / 3).div_ceil(rayon::current_num_threads().max(1));
        par_qsort(v, grain, depth_limit(v.len()));
        return true;
    }
    let _ = v;
    false
}

/// Partitions past this depth hand the piece to std's sort (an input that defeats the
/// pivots stays O(n log n)).
#[cfg(target_arch = "x86_64")]
fn depth_limit(n: usize) -> u32 {
    2 * (usize::BITS - n.leading_zeros()) + 4
}

#[cfg(target_arch = "x86_64")]
fn par_qsort(v: &mut [u64], grain: usize, depth: u32) {
    if v.len() <= grain.max(avx512::SMALL) || depth == 0 {
        // SAFETY: only called where `avx512::available()`.
        unsafe { avx512::qsort(v, depth) };
        return;
    }
    // SAFETY: as above.
    let Some(k) = (unsafe { avx512::split(v, 127) }) else {
        return; // every key equal: sorted
    };
    let (a, b) = v.split_at_mut(k);
    rayon::join(
        || par_qsort(a, grain, depth - 1),
        || par_qsort(b, grain, depth - 1),
    );
}

// Every function here needs AVX-512 (callers check [`avx512::available`]); bodies are one
// unsafe region of intrinsics and pointer arithmetic, their bounds argued where they are
// made.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_op_in_unsafe_fn)]
mod avx512 {
    use std::arch::x86_64::*;

    /// Pieces this long or shorter are sorted in registers (32 of 8 keys).
    pub(super) const SMALL: usize = 256;
    /// Vectors read from one end at a time by [`partition`]: the choice of end, a branch
    /// that cannot be predicted, is made once for these.
    const UNROLL: usize = 4;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("popcnt")
    }

    /// Sorts `v`; partitions past `depth` go to std's sort.
    #[target_feature(enable = "avx512f,popcnt")]
    pub(super) unsafe fn qsort(mut v: &mut [u64], mut depth: u32) {
        loop {
            if v.len() <= SMALL {
                small(v);
                return;
            }
            if depth == 0 {
                v.sort_unstable();
                return;
            }
            depth -= 1;
            let Some(k) = split(v, 15) else { return };
            // The shorter side first and in a call; the longer in this loop (bounded stack).
            let (a, b) = std::mem::take(&mut v).split_at_mut(k);
            if a.len() < b.len() {
                qsort(a, depth);
                v = b;
            } else {
                qsort(b, depth);
                v = a;
            }
        }
    }

    /// Partitions `v` (longer than [`SMALL`]) around the median of `samples` keys spread
    /// over it: the keys before the returned index are all less than the keys from it, and
    /// neither side is empty. `None` when every key is equal.
    #[target_feature(enable = "avx512f,popcnt")]
    pub(super) unsafe fn split(v: &mut [u64], samples: usize) -> Option<usize> {
        let n = v.len();
        let mut s: Vec<u64> = (0..samples)
            .map(|k| v[(2 * k + 1) * n / (2 * samples)])
            .collect();
        s.sort_unstable();
        let pivot = s[samples / 2];
        let k = partition(v, pivot);
        if k > 0 {
            return Some(k);
        }
        // The pivot is the least key: the keys equal to it go first (one at least, the
        // pivot), and are where they belong.
        if pivot == u64::MAX {
            return None;
        }
        let k = partition(v, pivot + 1);
        (k < n).then_some(k)
    }

    /// Moves the keys of `v` (at least 16 vectors long) less than `pivot` to its front, the
    /// others to its back, in place; their count.
    #[target_feature(enable = "avx512f,popcnt")]
    unsafe fn partition(v: &mut [u64], pivot: u64) -> usize {
        const W: usize = 8 * UNROLL;
        let n = v.len();
        debug_assert!(n >= 2 * W);
        let p = v.as_mut_ptr();
        let pv = _mm512_set1_epi64(pivot as i64);
        // Both ends' first vectors held in registers, and the keys between the front's
        // and a multiple of W (`rest`): from then on the space freed at each end is never
        // less than what is written to it.
        let rest = (n - 2 * W) % W;
        let mut held = [_mm512_setzero_si512(); 3 * UNROLL];
        let mut lanes = [0xffu8; 3 * UNROLL];
        for k in 0..UNROLL {
            held[k] = _mm512_loadu_si512(p.add(8 * k) as *const _);
            held[UNROLL + k] = _mm512_loadu_si512(p.add(n - W + 8 * k) as *const _);
            let m = match rest.saturating_sub(8 * k) {
                0 => 0,
                r if r >= 8 => 0xff,
                r => ((1u32 << r) - 1) as u8,
            };
            lanes[2 * UNROLL + k] = m;
            held[2 * UNROLL + k] = _mm512_maskz_loadu_epi64(m, p.add(W + 8 * k) as *const _);
        }
        let (mut left, mut right) = (W + rest, n - W);
        // Where the next keys less than the pivot go (upward), and the end of where the
        // others go (downward).
        let (mut lo, mut hi) = (0usize, n);
        // The lanes `valid` of `x` to both sides: the front's with a whole vector's store
        // (the lanes past its count are written over later), the back's masked.
        macro_rules! put {
            ($x:expr, $valid:expr) => {{
                let (x, valid): (__m512i, __mmask8) = ($x, $valid);
                let ge = _mm512_mask_cmpge_epu64_mask(valid, x, pv);
                let lt = !ge & valid;
                _mm512_storeu_si512(p.add(lo) as *mut _, _mm512_maskz_compress_epi64(lt, x));
                lo += lt.count_ones() as usize;
                let nge = ge.count_ones();
                hi -= nge as usize;
                let m = ((1u32 << nge) - 1) as u8;
                _mm512_mask_storeu_epi64(
                    p.add(hi) as *mut _,
                    m,
                    _mm512_maskz_compress_epi64(ge, x),
                );
            }};
        }
        while left < right {
            // From the end with less free space: both keep room for W keys.
            let at = if hi - right < left - lo {
                right -= W;
                right
            } else {
                left += W;
                left - W
            };
            let mut xs = [_mm512_setzero_si512(); UNROLL];
            for (k, x) in xs.iter_mut().enumerate() {
                *x = _mm512_loadu_si512(p.add(at + 8 * k) as *const _);
            }
            for x in xs {
                put!(x, 0xff);
            }
        }
        // The partial vectors first: a whole vector's front store needs 8 free lanes, and
        // the last one put has exactly 8.
        for k in (2 * UNROLL..3 * UNROLL).chain(0..2 * UNROLL) {
            put!(held[k], lanes[k]);
        }
        debug_assert_eq!(lo, hi);
        lo
    }

    /// Which lanes of a compare-exchange between lanes `i` and `i ^ j` take the greater
    /// key, in a bitonic stage of blocks of `k` lanes (every other block descending, all
    /// ascending from `k = 8`).
    const fn take_max(j: usize, k: usize) -> u8 {
        let mut m = 0u8;
        let mut i = 0;
        while i < 8 {
            if (i & j != 0) != (k < 8 && i & k != 0) {
                m |= 1 << i;
            }
            i += 1;
        }
        m
    }

    #[inline(always)]
    unsafe fn exchange<const J: i64, const K: usize>(v: __m512i) -> __m512i {
        let partner = _mm512_set_epi64(7 ^ J, 6 ^ J, 5 ^ J, 4 ^ J, 3 ^ J, 2 ^ J, 1 ^ J, J);
        let w = _mm512_permutexvar_epi64(partner, v);
        let (lo, hi) = (_mm512_min_epu64(v, w), _mm512_max_epu64(v, w));
        _mm512_mask_mov_epi64(lo, const { take_max(J as usize, K) }, hi)
    }

    #[inline(always)]
    unsafe fn reverse(v: __m512i) -> __m512i {
        _mm512_permutexvar_epi64(_mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7), v)
    }

    /// A bitonic vector sorted.
    #[inline(always)]
    unsafe fn clean(v: __m512i) -> __m512i {
        exchange::<1, 8>(exchange::<2, 8>(exchange::<4, 8>(v)))
    }

    /// `R` vectors (a power of two) sorted as one sequence: each vector sorted, then runs
    /// of 1, 2, 4... vectors merged pairwise (the second run compared reversed with the
    /// first, then both halves cleaned).
    #[inline(always)]
    unsafe fn sort_vectors<const R: usize>(r: &mut [__m512i; R]) {
        for x in r.iter_mut() {
            *x = clean(exchange::<1, 4>(exchange::<2, 4>(exchange::<1, 2>(*x))));
        }
        let mut w = 1;
        while w < R {
            for s in (0..R).step_by(2 * w) {
                for i in 0..w {
                    let (a, b) = (r[s + i], reverse(r[s + 2 * w - 1 - i]));
                    r[s + i] = _mm512_min_epu64(a, b);
                    r[s + 2 * w - 1 - i] = reverse(_mm512_max_epu64(a, b));
                }
                let mut d = w / 2;
                while d > 0 {
                    for i in (s..s + 2 * w).filter(|i| i & d == 0) {
                        let (a, b) = (r[i], r[i + d]);
                        r[i] = _mm512_min_epu64(a, b);
                        r[i + d] = _mm512_max_epu64(a, b);
                    }
                    d /= 2;
                }
                for x in &mut r[s..s + 2 * w] {
                    *x = clean(*x);
                }
            }
            w *= 2;
        }
    }

    /// `v` (at most 8 R keys) sorted in R vectors, the lanes past its end filled with the
    /// greatest key (they sort last and are not stored).
    #[inline(always)]
    unsafe fn small_in<const R: usize>(v: &mut [u64]) {
        let (n, p) = (v.len(), v.as_mut_ptr());
        let fill = _mm512_set1_epi64(-1);
        let mask = |k: usize| match n.saturating_sub(8 * k) {
            r if r >= 8 => 0xffu8,
            r => ((1u32 << r) - 1) as u8,
        };
        let mut r = [fill; R];
        for (k, x) in r.iter_mut().enumerate() {
            *x = _mm512_mask_loadu_epi64(fill, mask(k), p.add(8 * k) as *const _);
        }
        sort_vectors::<R>(&mut r);
        for (k, x) in r.iter().enumerate() {
            _mm512_mask_storeu_epi64(p.add(8 * k) as *mut _, mask(k), *x);
        }
    }

    /// `v` (at most [`SMALL`] keys) sorted in registers.
    #[target_feature(enable = "avx512f,popcnt")]
    unsafe fn small(v: &mut [u64]) {
        match v.len().div_ceil(8) {
            0 | 1 => small_in::<1>(v),
            2 => small_in::<2>(v),
            3 | 4 => small_in::<4>(v),
            5..=8 => small_in::<8>(v),
            9..=16 => small_in::<16>(v),
            _ => small_in::<32>(v),
        }
    }
}

#[cfg(test)]
mod tests {
    /// Keys of many lengths and shapes (random, few distinct, all equal, sorted, reversed,
    /// at the ends of u64) sorted as std sorts them, on one thread and on several.
    #[test]
    fn sorts_as_std_does() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let lengths = (0..600).chain([1000, 4095, 4096, 4097, 70_000, 300_001]);
        for n in lengths {
            for shape in 0..6 {
                let mut v: Vec<u64> = (0..n)
                    .map(|i| match shape {
                        0 => next(),
                        1 => next() % 5,
                        2 => 7,
                        3 => i as u64 * 3,
                        4 => u64::MAX - i as u64,
                        _ => [0, u64::MAX, 1, u64::MAX - 1][(next() % 4) as usize],
                    })
                    .collect();
                let mut want = v.clone();
                want.sort_unstable();
                let mut w = v.clone();
                if super::sort(&mut v) {
                    assert_eq!(v, want, "{n} keys of shape {shape}");
                }
                if super::par_sort(&mut w) {
                    assert_eq!(w, want, "{n} keys of shape {shape}, in parallel");
                }
            }
        }
    }
}
