//! Import kernels: blocks read from files that are not Zarr arrays (`.npy`, `.csv`), local
//! or in a bucket. The driver only reads headers (and a CSV's row index); each task fetches
//! the bytes of its own block with ranged reads and decodes them here, so no process ever
//! holds a whole input.

use ndarray::{ArrayD, IxDyn};
use nums_layout::Elem as _;
use nums_layout::batch::Kernel;
use nums_layout::meta::ArrayMeta;
use nums_layout::{Block, IoCounters, Store};
use std::sync::Arc;

/// How many ranged reads of one block are in flight.
const RANGE_CONCURRENCY: usize = 16;

/// A Zarr import's source array and the chunks its block overlaps, by grid index
/// (`None`: never written, so the fill value).
pub type ZarrChunks = (
    nums_layout::StoredArray,
    Vec<(Vec<u64>, Option<bytes::Bytes>)>,
);

/// The raw bytes one import task needs, fetched from the kernel's source (for a Zarr
/// import, its chunks instead).
pub struct Fetched(pub bytes::Bytes, pub Option<ZarrChunks>);

impl Fetched {
    /// Bytes read from the store.
    pub fn len(&self) -> u64 {
        let chunks = self.1.iter().flat_map(|(_, c)| c);
        self.0.len() as u64
            + chunks
                .flat_map(|(_, b)| b)
                .map(|b| b.len() as u64)
                .sum::<u64>()
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The source chunks (grid indices) the block at `origin` of `shape` overlaps.
fn overlapped(src: &ArrayMeta, origin: &[u64], shape: &[usize]) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for d in 0..origin.len() {
        let c = src.block[d].max(1);
        let (lo, hi) = (origin[d] / c, (origin[d] + shape[d] as u64 - 1) / c);
        out = out
            .into_iter()
            .flat_map(|p| {
                (lo..=hi).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

/// Whether `kernel` reads a file (and so must fetch before it runs).
pub fn is_import(kernel: &Kernel) -> bool {
    kernel.reads_file()
}

/// Bytes of the file of an import kernel: for `.npy`, the block's elements in the file's
/// order (one ranged read per contiguous run); for CSV, its byte range.
pub async fn fetch(
    kernel: &Kernel,
    out: &ArrayMeta,
    index: &[u64],
    counters: &Arc<IoCounters>,
) -> Result<Fetched, String> {
    use futures::{StreamExt, TryStreamExt};
    match kernel {
        Kernel::ImportNpy {
            source,
            key,
            offset,
            shape,
            descr,
            fortran,
        } => {
            let store = Store::open_counted(source, counters).map_err(|e| e.to_string())?;
            let item = npy_dtype(descr)?.size() as u64;
            let (origin, bshape) = (out.block_origin(index), out.block_shape(index));
            let bshape: Vec<u64> = bshape.iter().map(|&s| s as u64).collect();
            let (fshape, origin, bshape) = if *fortran {
                // A Fortran-order array is the C-order array of the reversed shape.
                let r = |v: &[u64]| v.iter().rev().copied().collect::<Vec<u64>>();
                (r(shape), r(&origin), r(&bshape))
            } else {
                (shape.clone(), origin, bshape)
            };
            let ranges: Vec<std::ops::Range<u64>> = runs(&fshape, &origin, &bshape)
                .map(|(start, len)| offset + start * item..offset + (start + len) * item)
                .collect();
            let parts: Vec<bytes::Bytes> = futures::stream::iter(ranges)
                .map(|r| {
                    let (store, key) = (&store, key.as_str());
                    async move { store.get_range(key, r).await.map_err(|e| e.to_string()) }
                })
                .buffered(RANGE_CONCURRENCY)
                .try_collect()
                .await?;
            Ok(Fetched(
                if parts.len() == 1 {
                    parts.into_iter().next().expect("one part")
                } else {
                    parts.concat().into()
                },
                None,
            ))
        }
        Kernel::ImportCsv {
            source,
            key,
            start,
            end,
            ..
        } => {
            let store = Store::open_counted(source, counters).map_err(|e| e.to_string())?;
            let b = store
                .get_range(key, *start..*end)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Fetched(b, None))
        }
        Kernel::ImportParquet {
            source,
            key,
            metadata: (at, len),
            columns,
            ..
        } => {
            let store = Store::open_counted(source, counters).map_err(|e| e.to_string())?;
            let file = file_name(source, key);
            let meta = store
                .get_range(key, *at..at + len)
                .await
                .map_err(|e| e.to_string())?;
            let (rows, cols) = parquet_span(out, index, columns);
            let ranges = crate::parquet::fetch_plan(&meta, &file, rows, &cols)?;
            let mut parts: Vec<bytes::Bytes> = vec![meta];
            parts.extend(
                futures::stream::iter(ranges)
                    .map(|r| {
                        let (store, key) = (&store, key.as_str());
                        async move { store.get_range(key, r).await.map_err(|e| e.to_string()) }
                    })
                    .buffered(RANGE_CONCURRENCY)
                    .try_collect::<Vec<_>>()
                    .await?,
            );
            Ok(Fetched(parts.concat().into(), None))
        }
        Kernel::ImportZarr { source, path, .. } => {
            let store = Store::open_counted(source, counters).map_err(|e| e.to_string())?;
            let src = nums_layout::StoredArray::open(&store, path)
                .await
                .map_err(|e| e.to_string())?;
            let (origin, shape) = (out.block_origin(index), out.block_shape(index));
            if src.meta.shape != out.shape {
                return Err(format!(
                    "{path}: the array is {:?} now, {:?} when the job was checked (it was replaced)",
                    src.meta.shape, out.shape
                ));
            }
            let chunks = futures::stream::iter(overlapped(&src.meta, &origin, &shape))
                .map(|idx| {
                    let (store, key) = (&store, src.block_key(&idx));
                    async move {
                        let b = store.get_opt(&key).await.map_err(|e| e.to_string())?;
                        Ok::<_, String>((idx, b))
                    }
                })
                .buffered(RANGE_CONCURRENCY)
                .try_collect()
                .await?;
            Ok(Fetched(bytes::Bytes::new(), Some((src, chunks))))
        }
        _ => Err("not an import kernel".into()),
    }
}

/// Bytes of the file a CSV count reads at a time, into one buffer: the whole 64 MiB of a
/// task's pieces read into a fresh buffer took 4x the count itself (the buffer's pages
/// faulted in and zeroed, then the copy).
pub const COUNT_CHUNK: usize = 1 << 20;

/// A [`Kernel::CsvCount`]'s block: its pieces counted as the file's bytes stream through
/// one buffer of [`COUNT_CHUNK`] (from the byte before the first piece to the line start
/// after the last, read past the last piece 64 KiB at first, then twice as much each time).
pub async fn count_csv(
    kernel: &Kernel,
    out: &ArrayMeta,
    index: &[u64],
    counters: &Arc<IoCounters>,
) -> Result<Block, String> {
    let Kernel::CsvCount {
        source,
        key,
        size,
        piece,
        pieces,
        delimiter,
    } = kernel
    else {
        return Err("not a CSV count".into());
    };
    let store = Store::open_counted(source, counters).map_err(|e| e.to_string())?;
    let file = file_name(source, key);
    let mut counter = crate::csv_index::PieceCounter::new(*size, *piece, *pieces, *delimiter);
    let (mut from, mut upto) = (counter.at(), (pieces.1 * piece).min(*size));
    let mut past = 64u64 << 10;
    while !counter.done() && from < *size {
        upto = (upto.max(from) + past).min(*size);
        let (c, got) = store
            .read_range_with(key, from..upto, COUNT_CHUNK, counter, |c, b| c.feed(b))
            .await
            .map_err(|e| format!("cannot read {file}: {e}"))?;
        counter = c;
        if got < upto - from && !counter.done() {
            return Err(format!(
                "{file}: shorter than the {size} bytes it had when the job was checked (it changed)"
            ));
        }
        (from, past) = (upto, past * 2);
    }
    let flat: Vec<i64> = counter.finish().concat();
    Ok(Block::I64(
        ArrayD::from_shape_vec(IxDyn(&out.block_shape(index)), flat).map_err(|e| e.to_string())?,
    ))
}

/// The rows of block `index` of a Parquet import's output, and the file's columns it
/// holds (of `columns`, the file's columns the array keeps in order).
fn parquet_span(out: &ArrayMeta, index: &[u64], columns: &[u64]) -> ((u64, u64), Vec<usize>) {
    let (origin, shape) = (out.block_origin(index), out.block_shape(index));
    let rows = (origin[0], origin[0] + shape[0] as u64);
    let (c0, c1) = if out.ndim() == 2 {
        (origin[1] as usize, origin[1] as usize + shape[1])
    } else {
        (0, 1)
    };
    let cols = columns[c0.min(columns.len())..c1.min(columns.len())]
        .iter()
        .map(|&c| c as usize)
        .collect();
    (rows, cols)
}

/// The contiguous runs (first flat element, length) of block `bshape` at `origin` of a
/// C-order array of shape `shape`, in C order: the trailing axes the block spans whole
/// are one run with the first axis it splits.
fn runs<'a>(
    shape: &'a [u64],
    origin: &'a [u64],
    bshape: &'a [u64],
) -> impl Iterator<Item = (u64, u64)> + 'a {
    let nd = shape.len();
    // Axis k: the last axis the block does not span whole (0 if it spans all).
    let mut k = nd.saturating_sub(1);
    while k > 0 && bshape[k] == shape[k] {
        k -= 1;
    }
    let inner: u64 = shape[(k + 1).min(nd)..].iter().product();
    let len = if nd == 0 { 1 } else { bshape[k] * inner };
    let outer: Vec<u64> = bshape[..k].to_vec();
    let count: u64 = outer.iter().product();
    (0..count).map(move |t| {
        // Index of run `t` among the axes before k, then its flat position.
        let mut rest = t;
        let mut idx = vec![0u64; k];
        for d in (0..k).rev() {
            idx[d] = rest % outer[d];
            rest /= outer[d];
        }
        let mut flat = 0u64;
        for d in 0..nd {
            let i = if d < k { origin[d] + idx[d] } else { origin[d] };
            flat = flat * shape[d] + i;
        }
        (flat, len)
    })
}

/// The dtype of a `.npy` descr (little-endian or one byte: `<f8`, `|u1`, `<c16`).
fn npy_dtype(descr: &str) -> Result<nums_layout::DType, String> {
    nums_layout::DType::parse(descr).ok_or_else(|| format!("unsupported .npy dtype {descr:?}"))
}

/// The job's name of the array an import task writes (imports are kept under
/// `<job>/.../<name>`): the part of its block key before `/c/`. `None` for other kernels.
pub fn array_of(import: bool, block_key: &str) -> Option<&str> {
    let path = block_key.rsplit_once("/c/")?.0;
    import.then(|| path.rsplit('/').next()).flatten()
}

/// The file an import reads, as the job names it: a local path or an `s3://` URL.
pub fn file_name(source: &nums_layout::StoreSpec, key: &str) -> String {
    match source.url.strip_prefix("file://") {
        Some(dir) => format!("{}/{key}", dir.trim_end_matches('/')),
        None => format!("{}/{key}", source.url.trim_end_matches('/')),
    }
}

/// Decodes what [`fetch`] read into the output block (in the output's dtype).
pub fn decode(
    kernel: &Kernel,
    fetched: &Fetched,
    out: &ArrayMeta,
    index: &[u64],
) -> Result<Block, String> {
    let bytes = &fetched.0[..];
    let shape = out.block_shape(index);
    match kernel {
        Kernel::ImportNpy {
            descr,
            fortran,
            key,
            ..
        } => {
            let n: usize = shape.iter().product();
            let dtype = npy_dtype(descr)?;
            if bytes.len() != n * dtype.size() {
                return Err(format!(
                    "{key}: read {} bytes for a block of {n} elements of {descr}",
                    bytes.len()
                ));
            }
            // The block's elements in the file's order: C order of the (reversed, for a
            // Fortran-order file) block shape.
            let file_shape: Vec<usize> = if *fortran {
                shape.iter().rev().copied().collect()
            } else {
                shape.clone()
            };
            let block = Block::from_le_bytes(dtype, &file_shape, bytes).expect("size checked");
            let block = if *fortran {
                nums_layout::map_block!(block, a => a.reversed_axes().as_standard_layout().into_owned())
            } else {
                block
            };
            Ok(block.cast(out.dtype))
        }
        Kernel::ImportCsv {
            source,
            key,
            line,
            skip,
            columns,
            usecols,
            delimiter,
            dtypes,
            ..
        } => {
            let rows = shape.first().copied().unwrap_or(1);
            let file = file_name(source, key);
            let at = CsvAt {
                line: *line,
                skip: *skip,
            };
            // Parsed as the output's dtype, as NumPy's loadtxt parses (see `CsvField`).
            Ok(nums_layout::for_dtype!(out.dtype, T => T::wrap(
                ArrayD::from_shape_vec(
                    IxDyn(&shape),
                    parse_csv_typed::<T>(bytes, &file, at, rows, *columns, usecols, dtypes, *delimiter)?,
                )
                .map_err(|e| e.to_string())?,
            )))
        }
        Kernel::ImportParquet {
            source,
            key,
            metadata: (_, len),
            columns,
            ..
        } => {
            let (rows, cols) = parquet_span(out, index, columns);
            let file = file_name(source, key);
            let block =
                crate::parquet::decode(bytes, *len as usize, &file, rows, &cols, out.ndim() == 1)?;
            Ok(block.cast(out.dtype))
        }
        Kernel::ImportZarr { .. } => {
            let Some((src, chunks)) = &fetched.1 else {
                return Err("a Zarr import without its chunks".into());
            };
            let origin = out.block_origin(index);
            let mut block = Block::zeros(src.meta.dtype, &shape);
            for (idx, bytes) in chunks {
                let chunk = src.decode(idx, bytes.clone()).map_err(|e| e.to_string())?;
                // The part of the chunk inside the block, in each one's coordinates.
                let c0 = src.meta.block_origin(idx);
                let cs = src.meta.block_shape(idx);
                let (mut in_block, mut in_chunk) = (Vec::new(), Vec::new());
                for d in 0..shape.len() {
                    let lo = origin[d].max(c0[d]);
                    let hi = (origin[d] + shape[d] as u64).min(c0[d] + cs[d] as u64);
                    let r =
                        |o: u64| ndarray::SliceInfoElem::from((lo - o) as isize..(hi - o) as isize);
                    in_block.push(r(origin[d]));
                    in_chunk.push(r(c0[d]));
                }
                fn place<T: Clone>(
                    b: &mut ArrayD<T>,
                    c: Option<&ArrayD<T>>,
                    in_block: &[ndarray::SliceInfoElem],
                    in_chunk: &[ndarray::SliceInfoElem],
                ) -> bool {
                    let Some(c) = c else { return false };
                    b.slice_mut(in_block).assign(&c.slice(in_chunk));
                    true
                }
                let same = nums_layout::with_block!(&mut block, b => place(b, chunk.view(), &in_block, &in_chunk));
                if !same {
                    return Err(format!("{}: a chunk of another dtype", src.path));
                }
            }
            Ok(block.cast(out.dtype))
        }
        _ => Err("not an import kernel".into()),
    }
}

/// A CSV field parsed as NumPy's `loadtxt` parses it for a dtype: an int dtype takes
/// integers in its range only ("1.0" and "300" for int8 are refused), bool takes 0 and 1,
/// a float dtype any decimal (float32 rounded once), complex Python's complex syntax
/// (`1+2j`, `(1-2.5e-3j)`, `2j`, `nan+infj`, or a real number).
pub trait CsvField: Sized {
    /// The value of a (trimmed) field, or `None` where it is not one of this type.
    fn parse(s: &str) -> Option<Self>;
    /// [`CsvField::parse`] of a field's bytes (not UTF-8: not a value).
    fn parse_bytes(b: &[u8]) -> Option<Self> {
        std::str::from_utf8(b).ok().and_then(Self::parse)
    }
    /// What a field must be, for the error: "an integer in int8's range".
    fn what() -> String;
}

macro_rules! csv_int {
    ($($t:ty),*) => {$(
        impl CsvField for $t {
            fn parse(s: &str) -> Option<$t> {
                s.strip_prefix('+').unwrap_or(s).parse().ok()
            }
            fn what() -> String {
                format!(
                    "an integer (the array's dtype is {})",
                    <$t as nums_layout::Elem>::DTYPE
                )
            }
        }
    )*};
}
csv_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A field that says its value is missing, as pandas' `read_csv` reads it by default (an
/// empty field, `NA`, `null`, `N/A`, ...): NaN in a float column, as pandas and NumPy's
/// `genfromtxt` make it.
pub fn is_missing(b: &[u8]) -> bool {
    const MISSING: &[&[u8]] = &[
        b"",
        b"NA",
        b"N/A",
        b"n/a",
        b"NULL",
        b"null",
        b"None",
        b"<NA>",
        b"#N/A",
        b"#N/A N/A",
        b"#NA",
        b"-1.#IND",
        b"-1.#QNAN",
        b"1.#IND",
        b"1.#QNAN",
    ];
    MISSING.contains(&b)
}

macro_rules! csv_float {
    ($($t:ty),*) => {$(
        impl CsvField for $t {
            fn parse(s: &str) -> Option<$t> {
                Self::parse_bytes(s.as_bytes())
            }
            fn parse_bytes(b: &[u8]) -> Option<$t> {
                fast_float2::parse(b)
                    .ok()
                    .or_else(|| is_missing(b).then_some(<$t>::NAN))
            }
            fn what() -> String {
                "a number".into()
            }
        }
    )*};
}
csv_float!(f32, f64);

impl CsvField for bool {
    fn parse(s: &str) -> Option<bool> {
        match s.parse::<i64>().ok()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn what() -> String {
        "0 or 1 (the array's dtype is bool)".into()
    }
}

/// Python's `complex(s)`: `[(]re[+-]imj[)]`, `imj`, `re`; `j` alone is 1j.
pub fn parse_complex(s: &str) -> Option<nums_layout::C128> {
    let s = s.trim();
    let s = match s.strip_prefix('(') {
        Some(inner) => inner.strip_suffix(')')?.trim(),
        None => s,
    };
    let num = |t: &str| -> Option<f64> {
        match t {
            "" | "+" => Some(1.0),
            "-" => Some(-1.0),
            t => t.parse().ok(),
        }
    };
    let Some(body) = s.strip_suffix(['j', 'J']) else {
        return Some(nums_layout::C128::new(s.parse().ok()?, 0.0));
    };
    // The sign that starts the imaginary part: the last + or - not at the start and not
    // an exponent's.
    let b = body.as_bytes();
    let split = (1..b.len())
        .rev()
        .find(|&i| matches!(b[i], b'+' | b'-') && !matches!(b[i - 1], b'e' | b'E'));
    Some(match split {
        Some(i) => nums_layout::C128::new(body[..i].parse().ok()?, num(&body[i..])?),
        None => nums_layout::C128::new(0.0, num(body)?),
    })
}

macro_rules! csv_complex {
    ($($t:ty),*) => {$(
        impl CsvField for $t {
            fn parse(s: &str) -> Option<$t> {
                parse_complex(s).map(<$t as nums_layout::Elem>::from_elem)
            }
            fn what() -> String {
                "a complex number (Python's syntax, such as 1+2j)".into()
            }
        }
    )*};
}
csv_complex!(nums_layout::C64, nums_layout::C128);

/// Where a task's text starts: its first line's number in the file (from 1), and the data
/// rows to pass over before the block's.
#[derive(Debug, Clone, Copy)]
pub struct CsvAt {
    /// The line of the text's first byte.
    pub line: u64,
    /// Data rows to pass over.
    pub skip: u64,
}

/// Text at least this long is parsed by several threads (each a run of whole lines).
const CSV_PARALLEL_FROM: usize = 4 << 20;

/// Parses fields `keep` (0-based, in that order) of `rows` data rows of `columns` fields
/// each from `text` (which starts at `at.line` of file `key`), after passing over
/// `at.skip` data rows, as `T` (f64, f32 or i64: an int64 column exactly), straight into
/// the block's row-major values. A data row is a line with something before its `#`
/// comment (as [`crate::csv_index::CsvScanner`] counts them); fields are split at
/// `delimiter` and trimmed of ASCII whitespace, so `\r\n` line ends are taken; a quoted
/// field is not a number. Errors name the file, line and column. Large text is cut at
/// line starts and parsed on rayon's threads, each piece into its own rows of the block:
/// the same values and the same first error as one pass.
pub fn parse_csv<T: CsvField + nums_layout::Elem + Default>(
    text: &[u8],
    key: &str,
    at: CsvAt,
    rows: usize,
    columns: u64,
    keep: &[u64],
    delimiter: u8,
) -> Result<Vec<T>, String> {
    parse_csv_typed(text, key, at, rows, columns, keep, &[], delimiter)
}

/// [`parse_csv`], the kept fields of column `k` parsed as `dtypes[k]` (pandas'
/// `dtype={...}`: an int column refuses 0.5 and a missing value) and cast to `T`; empty
/// `dtypes`: every field as `T`.
#[allow(clippy::too_many_arguments)]
pub fn parse_csv_typed<T: CsvField + nums_layout::Elem + Default>(
    text: &[u8],
    key: &str,
    at: CsvAt,
    rows: usize,
    columns: u64,
    keep: &[u64],
    dtypes: &[nums_layout::DType],
    delimiter: u8,
) -> Result<Vec<T>, String> {
    let threads = rayon::current_num_threads();
    let pieces = if threads < 2 || text.len() < CSV_PARALLEL_FROM {
        1
    } else {
        (threads * 4).min(text.len() / (1 << 20))
    };
    parse_csv_pieces(
        text,
        key,
        at,
        rows,
        columns,
        (keep, dtypes),
        delimiter,
        pieces,
    )
}

/// [`parse_csv`] of `text` cut into about `n` pieces.
#[allow(clippy::too_many_arguments)]
fn parse_csv_pieces<T: CsvField + nums_layout::Elem + Default>(
    text: &[u8],
    key: &str,
    at: CsvAt,
    rows: usize,
    columns: u64,
    (keep, dtypes): (&[u64], &[nums_layout::DType]),
    delimiter: u8,
    n: usize,
) -> Result<Vec<T>, String> {
    let width = keep.len();
    let mut values = vec![T::default(); rows * width];
    let fmt = CsvFormat {
        key,
        columns: columns as usize,
        keep,
        dtypes,
        delimiter,
    };
    if n < 2 || width == 0 {
        let got = fmt.parse_rows(text, at.line, at.skip, rows, &mut values)?;
        return fmt.enough(got, rows, at.line).map(|()| values);
    }
    // Pieces cut after a newline, then each piece's data rows and lines counted, so that
    // each knows the block rows it holds and the line it starts at.
    let mut cuts = vec![0];
    for k in 1..n {
        let from = (text.len() * k / n).max(*cuts.last().expect("one"));
        let cut = memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |p| from + p + 1);
        cuts.push(cut);
    }
    cuts.push(text.len());
    cuts.dedup();
    use rayon::prelude::*;
    let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &text[w[0]..w[1]]).collect();
    let counts: Vec<(u64, u64)> = pieces
        .par_iter()
        .map(|p| count_rows(p, delimiter))
        .collect();
    // Each piece: its first line, the data rows to pass over in it, and its share of the
    // block's values.
    let (mut line, mut row) = (at.line, 0u64);
    let mut rest = &mut values[..];
    let mut work = Vec::with_capacity(pieces.len());
    for (p, &(data_rows, lines)) in pieces.iter().zip(&counts) {
        let skip = at.skip.saturating_sub(row);
        let first = row.max(at.skip);
        let last = (row + data_rows).min(at.skip + rows as u64).max(first);
        let want = ((last - first) as usize).min(rest.len() / width);
        let (mine, after) = std::mem::take(&mut rest).split_at_mut(want * width);
        rest = after;
        work.push((*p, line, skip, want, mine));
        line += lines;
        row += data_rows;
    }
    let got: Vec<Result<usize, String>> = work
        .into_par_iter()
        .map(|(p, line, skip, want, out)| {
            if want == 0 {
                return Ok(0);
            }
            fmt.parse_rows(p, line, skip, want, out)
        })
        .collect();
    // The first error in the file's order, as one pass meets it.
    let mut total = 0;
    for g in got {
        total += g?;
    }
    fmt.enough(total, rows, at.line).map(|()| values)
}

/// Data rows and lines of a piece of text cut after a newline (a last line without one
/// counts as a line).
pub(crate) fn count_rows(text: &[u8], delimiter: u8) -> (u64, u64) {
    let (mut rows, mut lines, mut from) = (0, 0, 0);
    while from < text.len() {
        let end = memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |p| from + p);
        rows += crate::csv_index::row_data(&text[from..end], delimiter).is_some() as u64;
        lines += 1;
        from = end + 1;
    }
    (rows, lines)
}

/// What a CSV task parses: the file (for errors), its fields per row, those it keeps and
/// its delimiter.
struct CsvFormat<'a> {
    key: &'a str,
    columns: usize,
    keep: &'a [u64],
    /// Each kept column's own dtype (empty: the block's).
    dtypes: &'a [nums_layout::DType],
    delimiter: u8,
}

impl CsvFormat<'_> {
    /// Parses up to `want` data rows of `text` (from line `line`) into `out`, row after
    /// row, after passing over `skip` of them; returns the rows parsed (fewer where the
    /// text ends first).
    fn parse_rows<T: CsvField + nums_layout::Elem>(
        &self,
        text: &[u8],
        mut line: u64,
        mut skip: u64,
        want: usize,
        out: &mut [T],
    ) -> Result<usize, String> {
        let width = self.keep.len();
        // Where each field of the row starts and ends (reused, row after row).
        let mut bounds: Vec<(usize, usize)> = Vec::with_capacity(self.columns + 1);
        let (mut got, mut from) = (0usize, 0usize);
        // Every kept field in order, all of them: the usual case, parsed as split.
        let all = self.keep.len() == self.columns
            && self.keep.iter().enumerate().all(|(i, &c)| c == i as u64);
        while got < want && from < text.len() {
            let end = memchr::memchr(b'\n', &text[from..]).map_or(text.len(), |p| from + p);
            let raw = &text[from..end];
            from = end + 1;
            let at = line;
            line += 1;
            // A comment ends the row where it starts.
            let Some(data) = crate::csv_index::row_data(raw, self.delimiter) else {
                continue;
            };
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let row = &mut out[got * width..(got + 1) * width];
            if all {
                let mut k = 0;
                for f in data.split(|&b| b == self.delimiter) {
                    if k < width {
                        match self.field(f, at, k, k) {
                            Ok(v) => row[k] = v,
                            // A row of other columns says so first.
                            Err(e) => return Err(self.columns_of(data, at).err().unwrap_or(e)),
                        }
                    }
                    k += 1;
                }
                if k != self.columns {
                    return Err(self.wrong_columns(at, k));
                }
            } else {
                bounds.clear();
                let mut s = 0;
                for d in memchr::memchr_iter(self.delimiter, data) {
                    bounds.push((s, d));
                    s = d + 1;
                }
                bounds.push((s, data.len()));
                if bounds.len() != self.columns {
                    return Err(self.wrong_columns(at, bounds.len()));
                }
                for (k, (v, &c)) in row.iter_mut().zip(self.keep).enumerate() {
                    let (a, b) = bounds[c as usize];
                    *v = self.field(&data[a..b], at, c as usize, k)?;
                }
            }
            got += 1;
        }
        Ok(got)
    }

    /// Field `c` (0-based) of the row at `line`, the block's column `k`, trimmed, as `T`
    /// (parsed as its column's own dtype first, where it has one).
    fn field<T: CsvField + nums_layout::Elem>(
        &self,
        f: &[u8],
        line: u64,
        c: usize,
        k: usize,
    ) -> Result<T, String> {
        let f = f.trim_ascii();
        let own = self.dtypes.get(k).copied().filter(|&d| d != T::DTYPE);
        let v = match own {
            None => T::parse_bytes(f),
            Some(d) => nums_layout::for_dtype!(d, U => U::parse_bytes(f).map(T::from_elem)),
        };
        v.ok_or_else(|| {
            let what = match own {
                None => T::what(),
                Some(d) => nums_layout::for_dtype!(d, U => U::what())
                    .replace("the array's dtype", "its column's dtype"),
            };
            // (Only a column without NaN refuses a missing value.)
            let missing = match is_missing(f) {
                true => ", and a missing value is NaN only in a float column",
                false => "",
            };
            format!(
                "{}:{line}: column {}: {:?} is not {}{missing}",
                self.key,
                c + 1,
                String::from_utf8_lossy(f),
                what
            )
        })
    }

    /// Whether the row at `line` (its text before any comment) has the file's columns.
    fn columns_of(&self, data: &[u8], line: u64) -> Result<(), String> {
        let n = memchr::memchr_iter(self.delimiter, data).count() + 1;
        if n != self.columns {
            return Err(self.wrong_columns(line, n));
        }
        Ok(())
    }

    fn wrong_columns(&self, line: u64, n: usize) -> String {
        format!(
            "{}:{line}: {n} columns, but the first row has {}",
            self.key, self.columns
        )
    }

    /// Whether `got` rows are the `rows` the task expected from line `line`.
    fn enough(&self, got: usize, rows: usize, line: u64) -> Result<(), String> {
        if got < rows {
            return Err(format!(
                "{}: {got} rows where {rows} were expected from line {line}: the file changed since the job was checked",
                self.key
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CSV count's task on a `file://` store (the file streamed through the buffer, read
    /// past its last piece until a line starts) gives the rows of its pieces as counted
    /// from the bytes at once, for pieces cut mid-line and lines longer than a piece; a file
    /// shorter than the size the job saw is an error naming it.
    #[tokio::test]
    async fn a_csv_count_streams_its_pieces_from_the_store() {
        let dir = std::env::temp_dir().join(format!("nums-count-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = Vec::new();
        for i in 0..40_000u64 {
            text.extend_from_slice(format!("{i},{}\r\n", i * 7 % 1000).as_bytes());
            if i % 9_000 == 5 {
                text.extend_from_slice(&[b'9'; 200_000]); // a line longer than a piece
                text.extend_from_slice(b",1\n# note\n\n");
            }
        }
        text.extend_from_slice(b"1,2"); // no final newline
        std::fs::write(dir.join("d.csv"), &text).unwrap();
        let size = text.len() as u64;
        let source = nums_layout::StoreSpec {
            url: format!("file://{}", dir.display()),
            endpoint: None,
        };
        let piece = 100_000u64;
        let n = size.div_ceil(piece);
        let counters = Arc::new(IoCounters::default());
        for (i0, i1) in [(0, 3), (1, 4), (3, n - 1), (n - 2, n), (0, n)] {
            let kernel = |size| Kernel::CsvCount {
                source: source.clone(),
                key: "d.csv".into(),
                size,
                piece,
                pieces: (i0, i1),
                delimiter: b',',
            };
            let per = crate::csv_index::PIECE_ROW;
            let out = ArrayMeta::new(
                vec![i1 - i0, per],
                vec![i1 - i0, per],
                nums_layout::DType::Int64,
            );
            let got = count_csv(&kernel(size), &out, &[0, 0], &counters)
                .await
                .unwrap();
            let at = (i0 * piece).saturating_sub(1);
            let want = crate::csv_index::count_pieces(
                &text[at as usize..],
                at,
                size,
                piece,
                (i0, i1),
                b',',
            );
            let Block::I64(got) = got else {
                panic!("not int64")
            };
            assert_eq!(
                got.iter().copied().collect::<Vec<i64>>(),
                want.concat(),
                "{i0}..{i1}"
            );
            // The file as the job saw it was longer: it changed.
            let e = count_csv(&kernel(size + 10), &out, &[0, 0], &counters).await;
            if i1 == n {
                let e = e.unwrap_err();
                assert!(
                    e.contains("d.csv: shorter than the") && e.contains("(it changed)"),
                    "{e}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn runs_cover_blocks_in_c_order() {
        // Rows only: one run.
        let r: Vec<_> = runs(&[10, 4], &[2, 0], &[3, 4]).collect();
        assert_eq!(r, [(8, 12)]);
        // Columns split: one run per row.
        let r: Vec<_> = runs(&[10, 4], &[2, 1], &[2, 2]).collect();
        assert_eq!(r, [(9, 2), (13, 2)]);
        // 3-D, middle axis split.
        let r: Vec<_> = runs(&[2, 3, 4], &[0, 1, 0], &[2, 2, 4]).collect();
        assert_eq!(r, [(4, 8), (16, 8)]);
        let r: Vec<_> = runs(&[], &[], &[]).collect();
        assert_eq!(r, [(0, 1)]);
    }

    #[test]
    fn csv_rows_comments_crlf_and_errors() {
        let text = b"# head\r\n1, 2\r\n\r\n  # only\r\n3,4 # tail\r\n5,6\r\n";
        let v = parse_csv::<f64>(
            text,
            "f.csv",
            CsvAt { line: 1, skip: 1 },
            2,
            2,
            &[0, 1],
            b',',
        )
        .unwrap();
        assert_eq!(v, [3.0, 4.0, 5.0, 6.0]);
        let e = parse_csv::<f64>(
            b"1,2\n3,x\n",
            "f.csv",
            CsvAt { line: 10, skip: 0 },
            2,
            2,
            &[0, 1],
            b',',
        )
        .unwrap_err();
        assert_eq!(e, "f.csv:11: column 2: \"x\" is not a number");
        let e = parse_csv::<f64>(
            b"1,2\n\n\"3\",4\n",
            "f.csv",
            CsvAt { line: 1, skip: 0 },
            2,
            2,
            &[0, 1],
            b',',
        )
        .unwrap_err();
        assert!(e.starts_with("f.csv:3: column 1:"), "{e}");
        let e = parse_csv::<f64>(
            b"1,2\n3\n",
            "f.csv",
            CsvAt { line: 1, skip: 0 },
            2,
            2,
            &[0, 1],
            b',',
        )
        .unwrap_err();
        assert!(e.starts_with("f.csv:2: 1 columns"), "{e}");
        let e = parse_csv::<f64>(
            b"1,2\n",
            "f.csv",
            CsvAt { line: 1, skip: 0 },
            2,
            2,
            &[0, 1],
            b',',
        )
        .unwrap_err();
        assert!(e.contains("1 rows where 2"), "{e}");
        // Some fields, in another order and with another delimiter; int64 exactly.
        let text = b"9007199254740993;x;-2\n4;y;5\n";
        let at = CsvAt { line: 1, skip: 0 };
        let v = parse_csv::<i64>(text, "f.csv", at, 2, 3, &[2, 0], b';').unwrap();
        assert_eq!(v, [-2, 9007199254740993, 5, 4]);
        let e = parse_csv::<i64>(b"1.5;2;3\n", "f.csv", at, 1, 3, &[0], b';').unwrap_err();
        assert!(e.contains("\"1.5\" is not an integer"), "{e}");
        // A row of other columns says so before its fields are parsed.
        let e = parse_csv::<f64>(b"1,2\nx,4,5\n", "f.csv", at, 2, 2, &[0, 1], b',');
        assert_eq!(
            e.unwrap_err(),
            "f.csv:2: 3 columns, but the first row has 2"
        );
        // A line of delimiters is a row of empty fields, not a blank line: missing values,
        // NaN in floats as pandas reads them; an error in ints, which have no NaN.
        let v = parse_csv::<f64>(b"1\t2\n\tNA\n3\t4\n", "f.csv", at, 3, 2, &[0, 1], b'\t');
        let v = v.unwrap();
        assert_eq!((v[0], v[1], v[4], v[5]), (1.0, 2.0, 3.0, 4.0));
        assert!(v[2].is_nan() && v[3].is_nan());
        let e = parse_csv::<i64>(b"1\t2\n\t\n3\t4\n", "f.csv", at, 3, 2, &[0, 1], b'\t');
        assert!(
            e.unwrap_err()
                .ends_with("a missing value is NaN only in a float column")
        );
    }

    /// A column of its own dtype (pandas' `dtype={...}`) parses as that dtype, then takes
    /// the block's: an int column exactly, refusing 0.5 and a missing value.
    #[test]
    fn csv_columns_of_their_own_dtype_parse_as_it() {
        use nums_layout::DType::{Float32, Int64};
        let at = CsvAt { line: 1, skip: 0 };
        // An int64 column in a float64 block: its values exactly, 0.5 refused.
        let text = b"1,0.1\n-3,2.5\n";
        let v = parse_csv_typed::<f64>(text, "f.csv", at, 2, 2, &[0, 1], &[Int64, Float32], b',');
        assert_eq!(v.unwrap(), [1.0, 0.1f32 as f64, -3.0, 2.5]);
        let e = parse_csv_typed::<f64>(
            b"0.5,1\n",
            "f.csv",
            at,
            1,
            2,
            &[1, 0],
            &[Float32, Int64],
            b',',
        );
        assert_eq!(
            e.unwrap_err(),
            "f.csv:1: column 1: \"0.5\" is not an integer (its column's dtype is int64)"
        );
        let e = parse_csv_typed::<f64>(b",1\n", "f.csv", at, 1, 2, &[0, 1], &[Int64], b',');
        assert!(
            e.unwrap_err()
                .contains("a missing value is NaN only in a float column")
        );
    }

    /// A float field is what `str::parse` makes of it (NumPy's loadtxt takes the same
    /// text, `inf`, `nan` and `1e5` among it), to the bit, and refused where it refuses
    /// but for the missing values (NaN).
    #[test]
    fn csv_floats_are_str_parse() {
        let mut cases: Vec<String> = [
            "",
            "+",
            "-",
            ".",
            "e",
            "e5",
            "1e",
            "1e+",
            "1.",
            ".5",
            "-.5",
            "+1",
            "++1",
            "1_0",
            "0x10",
            "1d5",
            "nan",
            "NaN",
            "-nan",
            "+nan",
            "nan(1)",
            "inf",
            "-Inf",
            "infinity",
            "INFINITY",
            "infinit",
            "1e309",
            "-1e309",
            "1e-400",
            "4.9e-324",
            "-0",
            "00001",
            "1e0000000000000000000001",
            "12345678901234567890123456789",
            "9007199254740993",
            "1.7976931348623159e308",
            "2.159283251769500422e-01",
            "1E5",
            "5.e3",
            ".e3",
            "1ee5",
            "1.#INF",
            "\u{661}",
            "1 ",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut x = 12345u64;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (alphabet, mut y) = (b"0123456789.eE+-nNaAiIfF", x);
            let s = (0..x % 12)
                .map(|_| {
                    y = (y / 7) ^ (y << 3);
                    alphabet[(y % alphabet.len() as u64) as usize] as char
                })
                .collect();
            cases.push(s);
        }
        let bits64 = |v: Option<f64>| {
            v.map(|v| {
                if v.is_nan() {
                    (1, v.is_sign_negative() as u64)
                } else {
                    (0, v.to_bits())
                }
            })
        };
        let bits32 = |v: Option<f32>| {
            v.map(|v| {
                if v.is_nan() {
                    (1, v.is_sign_negative() as u32)
                } else {
                    (0, v.to_bits())
                }
            })
        };
        let missing = |c: &String| is_missing(c.as_bytes()).then_some(f64::NAN);
        let missing32 = |c: &String| is_missing(c.as_bytes()).then_some(f32::NAN);
        for c in &cases {
            assert_eq!(
                bits64(f64::parse_bytes(c.as_bytes())),
                bits64(c.parse().ok().or(missing(c))),
                "{c:?}"
            );
            assert_eq!(
                bits32(f32::parse_bytes(c.as_bytes())),
                bits32(c.parse().ok().or(missing32(c))),
                "{c:?}"
            );
        }
    }

    /// Text cut into pieces parsed on several threads gives what one pass gives: the
    /// values of any rows of the text, and the first error among them (errors in rows
    /// outside them are another block's).
    #[test]
    fn csv_pieces_parse_as_one_pass() {
        let mut text = b"# head\r\n".to_vec();
        for i in 0..3000 {
            let row = format!(" {i}.5 ,{}e-3, -{i}\r\n", i * 7);
            text.extend_from_slice(row.as_bytes());
            if i % 97 == 0 {
                text.extend_from_slice(b"\n  # gap\n\r\n");
            }
            if i % 501 == 0 {
                text.extend_from_slice(format!("{i},{i} # note\n").as_bytes());
            }
        }
        text.extend_from_slice(b"1,2,3"); // no final newline
        let at = |line, skip| CsvAt { line, skip };
        let rows_of = |keep: &[u64], r0: u64, n: usize, pieces: usize| {
            parse_csv_pieces::<f64>(&text, "f.csv", at(7, r0), n, 3, (keep, &[]), b',', pieces)
        };
        for keep in [&[0u64, 1, 2][..], &[2, 0], &[1]] {
            for (r0, n) in [(0, 3000), (0, 1), (1500, 1500), (2999, 1), (10, 900)] {
                let one = rows_of(keep, r0, n, 1);
                for pieces in [2, 3, 7, 64] {
                    assert_eq!(
                        rows_of(keep, r0, n, pieces),
                        one,
                        "{keep:?} {r0} {n} {pieces}"
                    );
                }
            }
        }
        // Data rows 2..503 are i = 1..501 (row 1 is the 2-field row after i = 0), i on
        // line 12 + i + 3 gaps' lines per 97; row 503, the 2-field row after i = 501, on
        // line 529.
        let one = rows_of(&[0, 1, 2], 400, 200, 1);
        assert_eq!(
            one.clone().unwrap_err(),
            "f.csv:529: 2 columns, but the first row has 3"
        );
        for pieces in [2, 5, 64] {
            assert_eq!(rows_of(&[0, 1, 2], 400, 200, pieces), one);
            // Bad rows before and after the block's rows are not its errors.
            let v = rows_of(&[0, 1, 2], 2, 501, pieces).unwrap();
            assert_eq!((v.len(), v[0], v[3 * 500 + 2]), (1503, 1.5, -501.0));
        }
        // Too few rows.
        let e = parse_csv_pieces::<f64>(b"1\n2\n", "f.csv", at(1, 1), 2, 1, (&[0], &[]), b',', 2);
        assert_eq!(
            e.unwrap_err(),
            "f.csv: 1 rows where 2 were expected from line 1: the file changed since the job was checked"
        );
    }
}
