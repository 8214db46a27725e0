//! Distinct values and how often each occurs, without a sort
//! ([`Kernel::DistinctCounts`](nums_layout::batch::Kernel::DistinctCounts)): each block
//! hash-counted into a table of at most `cap` values, the tables merged in order. NumPy's
//! `unique` (values, counts) when the data has few distinct values: a label column, a
//! category code. More than `cap` gives up at once (the caller sorts instead).

use ndarray::{ArrayD, IxDyn};
use nums_layout::{Block, DType, Elem, Scalar, for_dtype};
use rayon::prelude::*;

use crate::order::Sortable;

/// A table row: (key, count, bits of the key's first element).
type Row = (u64, i64, u64);

/// Columns of a table block: key, count, bits.
const COLS: usize = 3;

/// Elements a rayon task counts on its own before the counts merge in order: long enough
/// that a merge of two small tables is nothing beside it.
const CHUNK: usize = 1 << 18;

/// A hash count of at most `cap` keys, in the order they first came: open addressing in
/// a table at least twice as large (a few KiB for a few hundred keys: it stays in cache).
struct Counter {
    /// 0: empty; else 1 + the key's row.
    slots: Vec<u32>,
    shift: u32,
    rows: Vec<Row>,
    cap: usize,
}

impl Counter {
    fn new(cap: usize) -> Counter {
        let size = (2 * cap.max(1)).next_power_of_two();
        Counter {
            slots: vec![0; size],
            shift: 64 - size.trailing_zeros(),
            rows: Vec::new(),
            cap,
        }
    }

    /// Adds `count` elements of `key` (its first element's bits `bits`, kept when the key
    /// is new): the key's row, or None when it would be key `cap + 1`.
    #[inline]
    fn add(&mut self, key: u64, count: i64, bits: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        // Fibonacci hashing: the top bits of a multiply spread near keys (small ints,
        // floats that differ in low bits) across the table.
        let mut i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        loop {
            match self.slots[i] {
                0 => {
                    if self.rows.len() == self.cap {
                        return None;
                    }
                    self.rows.push((key, count, bits));
                    self.slots[i] = self.rows.len() as u32;
                    return Some(self.rows.len() - 1);
                }
                s => {
                    let r = s as usize - 1;
                    if self.rows[r].0 == key {
                        self.rows[r].1 += count;
                        return Some(r);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds another count's rows after this one's elements.
    fn merge(&mut self, rows: &[Row]) -> Option<()> {
        for &(k, c, b) in rows {
            self.add(k, c, b)?;
        }
        Some(())
    }
}

/// The rows of `xs` in the order their keys first come, or None past `cap` keys.
fn count_slice<T: Sortable>(xs: &[T], cap: usize) -> Option<Vec<Row>> {
    let mut c = Counter::new(cap);
    let mut last: Option<(u64, usize)> = None;
    for &x in xs {
        let k = x.key();
        match last {
            // A run of one value (sorted data, constant stretches) skips the hash.
            Some((lk, r)) if lk == k => c.rows[r].1 += 1,
            _ => last = Some((k, c.add(k, 1, x.bits())?)),
        }
    }
    Some(c.rows)
}

/// The rows of block `a` (C order), counted on rayon's threads when it is long.
fn count_block<T: Sortable>(a: &ArrayD<T>, cap: usize) -> Option<Vec<Row>> {
    let owned;
    let xs = match a.as_slice() {
        Some(s) => s,
        None => {
            owned = a.iter().copied().collect::<Vec<T>>();
            &owned
        }
    };
    if xs.len() <= CHUNK {
        return count_slice(xs, cap);
    }
    let parts: Vec<Option<Vec<Row>>> = xs.par_chunks(CHUNK).map(|c| count_slice(c, cap)).collect();
    let mut c = Counter::new(cap);
    for p in parts {
        c.merge(&p?)?;
    }
    Some(c.rows)
}

/// The table block of `rows` (None: more than `cap`), sorted by key.
fn table(rows: Option<Vec<Row>>, cap: u64) -> Result<Block, String> {
    let mut t = vec![0i64; (cap as usize + 1) * COLS];
    match rows {
        None => t[0] = -1,
        Some(mut rows) => {
            rows.sort_unstable_by_key(|r| r.0);
            t[0] = rows.len() as i64;
            for (i, (k, c, b)) in rows.into_iter().enumerate() {
                let at = (i + 1) * COLS;
                t[at..at + COLS].copy_from_slice(&[k as i64, c, b as i64]);
            }
        }
    }
    Ok(Block::I64(
        ArrayD::from_shape_vec(IxDyn(&[cap as usize + 1, COLS]), t).map_err(|e| e.to_string())?,
    ))
}

/// See [`nums_layout::batch::Kernel::DistinctCounts`]: the table of the elements of the
/// blocks `inputs`, in order.
pub fn distinct_counts(inputs: &[&Block], cap: u64) -> Result<Block, String> {
    let mut c = Counter::new(cap as usize);
    for x in inputs {
        let rows = for_dtype!(x.dtype(), T => {
            if !T::KEYED {
                return Err(format!("distinct counts of a {} block (complex: sorted instead)", x.dtype()));
            }
            count_block(x.view::<T>().expect("its dtype"), cap as usize)
        });
        if rows.and_then(|r| c.merge(&r)).is_none() {
            return table(None, cap);
        }
    }
    table(Some(c.rows), cap)
}

/// The rows of a table block: None when it overflowed.
fn rows_of(t: &Block) -> Result<Option<Vec<Row>>, String> {
    let t = t.to_i64();
    let (n, cols) = match t.shape() {
        &[n, cols] => (n, cols),
        s => return Err(format!("a distinct-counts table of shape {s:?}")),
    };
    let k = t[[0, 0]];
    if cols != COLS || k >= n as i64 {
        return Err(format!(
            "a distinct-counts table of {k} rows in shape [{n}, {cols}]"
        ));
    }
    if k < 0 {
        return Ok(None);
    }
    Ok(Some(
        (1..=k as usize)
            .map(|i| (t[[i, 0]] as u64, t[[i, 1]], t[[i, 2]] as u64))
            .collect(),
    ))
}

/// See [`nums_layout::batch::Kernel::DistinctMerge`]: the tables `inputs` as one.
pub fn distinct_merge(inputs: &[&Block], cap: u64) -> Result<Block, String> {
    let mut c = Counter::new(cap as usize);
    for t in inputs {
        if rows_of(t)?.and_then(|r| c.merge(&r)).is_none() {
            return table(None, cap);
        }
    }
    table(Some(c.rows), cap)
}

/// The distinct values (as elements of `dtype`, each the first of its key) and their
/// counts a table holds, in NumPy's sort order; None when the table overflowed.
pub fn distinct_entries(t: &Block, dtype: DType) -> Result<Option<Vec<(Scalar, i64)>>, String> {
    let Some(rows) = rows_of(t)? else {
        return Ok(None);
    };
    Ok(Some(for_dtype!(dtype, T => {
        if !T::KEYED {
            return Err(format!("distinct counts of {dtype} values"));
        }
        rows.iter().map(|&(_, c, b)| (<T as Sortable>::from_bits(b).to_scalar(), c)).collect()
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distinct values and counts by sorting (the path `unique` takes otherwise).
    fn by_sort<T: Sortable>(xs: &[T]) -> Vec<(u64, i64, u64)> {
        let mut v: Vec<(u64, usize, T)> = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| (x.key(), i, x))
            .collect();
        v.sort_by_key(|e| (e.0, e.1));
        let mut out: Vec<Row> = Vec::new();
        for (k, _, x) in v {
            match out.last_mut() {
                Some(r) if r.0 == k => r.1 += 1,
                _ => out.push((k, 1, x.bits())),
            }
        }
        out
    }

    fn check<T: Sortable>(blocks: &[Vec<T>], cap: u64) {
        let bs: Vec<Block> = blocks
            .iter()
            .map(|b| T::wrap(ArrayD::from_shape_vec(IxDyn(&[b.len()]), b.clone()).unwrap()))
            .collect();
        let all: Vec<T> = blocks.concat();
        let want = by_sort(&all);
        let refs: Vec<&Block> = bs.iter().collect();
        // One task over every block, and a table per block merged: the same table.
        let one = distinct_counts(&refs, cap).unwrap();
        let parts: Vec<Block> = refs
            .iter()
            .map(|b| distinct_counts(&[b], cap).unwrap())
            .collect();
        let merged = distinct_merge(&parts.iter().collect::<Vec<_>>(), cap).unwrap();
        assert_eq!(one, merged);
        let got = rows_of(&one).unwrap();
        if want.len() as u64 > cap {
            assert_eq!(got, None);
        } else {
            assert_eq!(got, Some(want));
        }
    }

    #[test]
    fn distinct_counts_match_a_sort() {
        // NaNs (payloads differ: the first one's kept), -0.0 before 0.0 and after, inf.
        let odd_nan = f64::from_bits(f64::NAN.to_bits() | 1);
        check(
            &[
                vec![1.0, odd_nan, -0.0, 2.0, f64::NAN],
                vec![0.0, f64::INFINITY, 1.0, -1.0],
                vec![],
                vec![f64::NAN, -0.0],
            ],
            16,
        );
        check(&[vec![0.0f32, -0.0, 3.5, f32::NAN, 3.5]], 4);
        check(&[vec![5i64, -3, i64::MIN, i64::MAX, 5], vec![-3]], 8);
        check(&[vec![u64::MAX, 0, 7, u64::MAX]], 8);
        check(&[vec![true, false, true], vec![true]], 2);
        check(&[vec![-1i8, 127, -128, -1]], 3);
        // Empty, one element, exactly cap, one past cap.
        check::<f64>(&[vec![]], 4);
        check(&[vec![2.5]], 1);
        check(&[vec![1i32, 2, 3, 4]], 4);
        check(&[vec![1i32, 2, 3, 4, 5]], 4);
        // Long blocks (counted in parallel chunks), few and many distinct values.
        let n = 3 * CHUNK + 17;
        let few: Vec<f64> = (0..n).map(|i| ((i * 7919) % 5) as f64 - 2.0).collect();
        check(&[few.clone(), few[..1000].to_vec()], 8);
        let many: Vec<i64> = (0..n as i64).map(|i| (i * 104_729) % 50_000).collect();
        check(&[many], 64);
    }

    #[test]
    fn entries_decode_values_and_counts() {
        let x = Block::F64(
            ArrayD::from_shape_vec(IxDyn(&[5]), vec![2.0, -0.0, f64::NAN, 0.0, 2.0]).unwrap(),
        );
        let t = distinct_counts(&[&x], 8).unwrap();
        let e = distinct_entries(&t, DType::Float64).unwrap().unwrap();
        assert_eq!(e.len(), 3);
        assert!(matches!(e[0], (Scalar::Float(z), 2) if z == 0.0 && z.is_sign_negative()));
        assert_eq!(e[1], (Scalar::Float(2.0), 2));
        assert!(matches!(e[2], (Scalar::Float(v), 1) if v.is_nan()));
        let c = Block::C128(ArrayD::zeros(IxDyn(&[2])));
        assert!(distinct_counts(&[&c], 8).is_err());
    }
}
