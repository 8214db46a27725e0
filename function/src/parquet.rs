//! Parquet inputs: a file's numeric columns as one 2-D array (one column: 1-D). The driver
//! reads the footer only ([`describe`]); each import task fetches the footer and the
//! column chunks of the row groups its block's rows fall in ([`fetch_plan`]) and decodes
//! them here ([`decode`]), so no process holds a whole file. Nulls, nested and
//! non-numeric columns are refused by name: a missing value is never read as a number.

use std::sync::Arc;

use bytes::{Buf, Bytes};
use ndarray::{Array2, ArrayD, IxDyn};
use nums_layout::Elem as _;
use nums_layout::{Block, DType};
use parquet::basic::{LogicalType, Type as Physical};
use parquet::column::reader::{ColumnReader, get_column_reader};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;

/// The bytes at a Parquet file's end: the footer's length (4 bytes) and `PAR1`.
pub const TAIL: u64 = 8;

/// The length of the metadata before the file's last [`TAIL`] bytes.
pub fn metadata_len(tail: &[u8], file: &str) -> Result<u64, String> {
    match tail {
        [a, b, c, d, b'P', b'A', b'R', b'1'] => Ok(u32::from_le_bytes([*a, *b, *c, *d]) as u64),
        [.., b'P', b'A', b'R', b'E'] => Err(format!(
            "{file}: an encrypted Parquet file, which nums-cloud does not read"
        )),
        _ => Err(format!(
            "{file} is not a Parquet file (it does not end with PAR1)"
        )),
    }
}

/// What the driver needs of a Parquet file: its columns, rows and row groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    /// Rows in all row groups.
    pub rows: u64,
    /// The column names, in the file's order.
    pub columns: Vec<String>,
    /// Each column's kind, or why nums-cloud does not read it (a string, a list, ...):
    /// an error only when the array uses the column (`usecols` may leave it out).
    pub kinds: Vec<Result<DType, String>>,
    /// Per row group: its rows and its column chunks' compressed bytes.
    pub row_groups: Vec<(u64, Vec<u64>)>,
}

impl Described {
    /// The dtype NumPy would give the columns `cols` together (bool, int64, float32,
    /// float64), or why one of them cannot be read.
    pub fn dtype(&self, cols: &[usize]) -> Result<DType, String> {
        let kinds = cols
            .iter()
            .map(|&c| self.kinds[c].clone())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(promote(&kinds))
    }
}

fn decode_metadata(metadata: &[u8], file: &str) -> Result<ParquetMetaData, String> {
    ParquetMetaDataReader::decode_metadata(metadata)
        .map_err(|e| format!("{file}: cannot read the Parquet footer: {e}"))
}

/// A column's values kind, or why nums-cloud does not read it.
fn kind(col: &parquet::schema::types::ColumnDescriptor, file: &str) -> Result<DType, String> {
    let name = col.path().string();
    if col.max_rep_level() > 0 {
        return Err(format!(
            "{file}: column {name:?} is a list (nested), which is not a number per row"
        ));
    }
    // An int column's logical type names its width and sign (as pyarrow writes int8 ...
    // uint64); without one, the physical type's (int32, int64).
    let int = |bits: i8, signed: bool| match (bits, signed) {
        (8, true) => DType::Int8,
        (16, true) => DType::Int16,
        (32, true) => DType::Int32,
        (8, false) => DType::UInt8,
        (16, false) => DType::UInt16,
        (32, false) => DType::UInt32,
        (64, false) => DType::UInt64,
        _ => DType::Int64,
    };
    let logical = match col.logical_type_ref() {
        Some(LogicalType::Integer(i)) => Some(int(i.bit_width, i.is_signed)),
        _ => None,
    };
    match col.physical_type() {
        Physical::BOOLEAN => Ok(DType::Bool),
        Physical::INT32 => Ok(logical.unwrap_or(DType::Int32)),
        Physical::INT64 => Ok(logical.unwrap_or(DType::Int64)),
        Physical::FLOAT => Ok(DType::Float32),
        Physical::DOUBLE => Ok(DType::Float64),
        t => Err(format!(
            "{file}: column {name:?} holds {t} values, not numbers; nums-cloud reads bool, int and float columns"
        )),
    }
}

/// NumPy's promotion of the columns' dtypes together (`np.result_type`).
fn promote(kinds: &[DType]) -> DType {
    kinds
        .iter()
        .copied()
        .reduce(DType::promote)
        .unwrap_or(DType::Float64)
}

/// The columns, rows and row groups of a Parquet file from its metadata bytes.
pub fn describe(metadata: &[u8], file: &str) -> Result<Described, String> {
    let meta = decode_metadata(metadata, file)?;
    let schema = meta.file_metadata().schema_descr();
    let kinds: Vec<_> = schema.columns().iter().map(|c| kind(c, file)).collect();
    if kinds.is_empty() {
        return Err(format!("{file}: a Parquet file with no columns"));
    }
    let row_groups: Vec<(u64, Vec<u64>)> = meta
        .row_groups()
        .iter()
        .map(|rg| {
            let sizes = rg.columns().iter().map(|c| c.byte_range().1).collect();
            (rg.num_rows().max(0) as u64, sizes)
        })
        .collect();
    let rows = row_groups.iter().map(|(r, _)| r).sum();
    if rows == 0 {
        return Err(format!("{file}: a Parquet file with no rows"));
    }
    Ok(Described {
        rows,
        columns: schema.columns().iter().map(|c| c.path().string()).collect(),
        kinds,
        row_groups,
    })
}

/// One column chunk a block needs: row group, column, its byte range in the file.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Chunk {
    rg: usize,
    col: usize,
    start: u64,
    len: u64,
}

/// The column chunks (row group by row group, columns in the order given) holding rows
/// `r0..r1` of the file's columns `cols`.
fn chunks(meta: &ParquetMetaData, rows: (u64, u64), cols: &[usize]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut first = 0;
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let n = rg.num_rows().max(0) as u64;
        if first < rows.1 && first + n > rows.0 {
            for &c in cols {
                let (start, len) = rg.column(c).byte_range();
                out.push(Chunk {
                    rg: g,
                    col: c,
                    start,
                    len,
                });
            }
        }
        first += n;
    }
    out
}

/// The byte ranges an import task fetches after the metadata: the column chunks of rows
/// `rows` and the file's columns `cols`, in the order [`decode`] takes them.
pub fn fetch_plan(
    metadata: &[u8],
    file: &str,
    rows: (u64, u64),
    cols: &[usize],
) -> Result<Vec<std::ops::Range<u64>>, String> {
    let meta = decode_metadata(metadata, file)?;
    check_columns(&meta, cols, file)?;
    Ok(chunks(&meta, rows, cols)
        .into_iter()
        .map(|c| c.start..c.start + c.len)
        .collect())
}

/// A column chunk's bytes where the page reader expects them: at their file offset.
struct At {
    offset: u64,
    bytes: Bytes,
}

impl Length for At {
    fn len(&self) -> u64 {
        self.offset + self.bytes.len() as u64
    }
}

impl ChunkReader for At {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(self
            .get_bytes(start, self.len().saturating_sub(start) as usize)?
            .reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let from = start.checked_sub(self.offset).map(|f| f as usize);
        match from {
            Some(f) if f + length <= self.bytes.len() => Ok(self.bytes.slice(f..f + length)),
            _ => Err(parquet::errors::ParquetError::EOF(format!(
                "bytes {start}..{} outside the column chunk fetched",
                start + length as u64
            ))),
        }
    }
}

/// One column's values of a block, in the column's own kind.
enum Values {
    Bool(Vec<bool>),
    Int(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Reads `want` values of a column after skipping `skip`, refusing nulls by row.
macro_rules! read_column {
    ($r:expr, $skip:expr, $want:expr, $max_def:expr, $first_row:expr, $name:expr, $file:expr) => {{
        let r = &mut $r;
        let skipped = r.skip_records($skip).map_err(|e| e.to_string())?;
        if skipped != $skip {
            return Err(format!("{}: column {:?} ends early", $file, $name));
        }
        let mut values = Vec::with_capacity($want);
        let mut defs: Vec<i16> = Vec::new();
        let mut got = 0;
        while got < $want {
            let (records, _, _) = r
                .read_records(
                    $want - got,
                    ($max_def > 0).then_some(&mut defs),
                    None,
                    &mut values,
                )
                .map_err(|e| format!("{}: column {:?}: {e}", $file, $name))?;
            if records == 0 {
                return Err(format!("{}: column {:?} ends early", $file, $name));
            }
            got += records;
        }
        if let Some(i) = defs.iter().position(|&d| d < $max_def) {
            return Err(format!(
                "{}: column {:?} has a null at row {}; nums-cloud arrays have no missing values",
                $file,
                $name,
                $first_row + i as u64
            ));
        }
        values
    }};
}

/// Refuses a column number the file does not have (the file changed since the job was
/// checked).
fn check_columns(meta: &ParquetMetaData, cols: &[usize], file: &str) -> Result<(), String> {
    let n = meta.file_metadata().schema_descr().num_columns();
    match cols.iter().find(|&&c| c >= n) {
        Some(c) => Err(format!(
            "{file} has {n} columns, no column {c} (it changed since the job was checked)"
        )),
        None => Ok(()),
    }
}

/// Decodes the block of rows `rows` of the file's columns `cols` (side by side, in that
/// order) from the bytes an import task fetched: the metadata (`metadata_len` bytes), then
/// the chunks of [`fetch_plan`]. Its dtype is NumPy's promotion of those columns' kinds.
pub fn decode(
    fetched: &[u8],
    metadata_len: usize,
    file: &str,
    rows: (u64, u64),
    cols: &[usize],
    one_column: bool,
) -> Result<Block, String> {
    let meta = decode_metadata(&fetched[..metadata_len], file)?;
    check_columns(&meta, cols, file)?;
    let schema = meta.file_metadata().schema_descr();
    let mut kinds = Vec::new();
    for &c in cols {
        kinds.push(kind(schema.column(c).as_ref(), file)?);
    }
    let dtype = promote(&kinds);
    let want = (rows.1 - rows.0) as usize;
    let mut columns: Vec<Values> = Vec::new();
    let mut at = metadata_len;
    let plan = chunks(&meta, rows, cols);
    for k in &kinds {
        columns.push(match k {
            DType::Bool => Values::Bool(Vec::with_capacity(want)),
            DType::Float32 => Values::F32(Vec::with_capacity(want)),
            DType::Float64 => Values::F64(Vec::with_capacity(want)),
            _ => Values::Int(Vec::with_capacity(want)),
        });
    }
    let mut first = 0u64; // first row of row group `rg`
    let mut rg_seen = usize::MAX;
    for (k, ch) in plan.iter().enumerate() {
        if ch.rg != rg_seen {
            first = meta.row_groups()[..ch.rg]
                .iter()
                .map(|g| g.num_rows().max(0) as u64)
                .sum();
            rg_seen = ch.rg;
        }
        let rg = &meta.row_groups()[ch.rg];
        let n = rg.num_rows().max(0) as u64;
        let (lo, hi) = (rows.0.max(first), rows.1.min(first + n));
        let (skip, take) = ((lo - first) as usize, (hi - lo) as usize);
        // The page reader wants owned bytes: one copy of the compressed chunk.
        let bytes = Bytes::copy_from_slice(&fetched[at..at + ch.len as usize]);
        at += ch.len as usize;
        let col_meta = rg.column(ch.col);
        let descr = schema.column(ch.col);
        let name = descr.path().string();
        let max_def = descr.max_def_level();
        let pages = SerializedPageReader::new(
            Arc::new(At {
                offset: ch.start,
                bytes,
            }),
            col_meta,
            n as usize,
            None,
        )
        .map_err(|e| format!("{file}: column {name:?}: {e}"))?;
        let reader = get_column_reader(descr.clone(), Box::new(pages));
        // Chunks come row group by row group, each with `cols` in order.
        let out = &mut columns[k % cols.len()];
        match (reader, out) {
            (ColumnReader::BoolColumnReader(mut r), Values::Bool(v)) => {
                v.extend(read_column!(r, skip, take, max_def, lo, name, file))
            }
            // uint32 is stored in int32's bits.
            (ColumnReader::Int32ColumnReader(mut r), Values::Int(v)) => {
                let unsigned = kinds[k % cols.len()] == DType::UInt32;
                v.extend(
                    read_column!(r, skip, take, max_def, lo, name, file)
                        .into_iter()
                        .map(|x| if unsigned { x as u32 as i64 } else { x as i64 }),
                )
            }
            (ColumnReader::Int64ColumnReader(mut r), Values::Int(v)) => {
                v.extend(read_column!(r, skip, take, max_def, lo, name, file))
            }
            (ColumnReader::FloatColumnReader(mut r), Values::F32(v)) => {
                v.extend(read_column!(r, skip, take, max_def, lo, name, file))
            }
            (ColumnReader::DoubleColumnReader(mut r), Values::F64(v)) => {
                v.extend(read_column!(r, skip, take, max_def, lo, name, file))
            }
            _ => {
                return Err(format!(
                    "{file}: column {name:?} changed type between row groups"
                ));
            }
        }
    }
    let width = cols.len();
    let shape: Vec<usize> = if one_column {
        vec![want]
    } else {
        vec![want, width]
    };
    for col in &columns {
        let len = match col {
            Values::Bool(v) => v.len(),
            Values::Int(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        };
        if len != want {
            return Err(format!("{file}: {len} values read for {want} rows"));
        }
    }
    // Columns side by side, each converted to the file's dtype as NumPy promotes (a
    // uint64 column's int64 bits are its values).
    Ok(nums_layout::for_dtype!(dtype, T => {
        let mut a = Array2::<T>::from_elem((want, width), T::ZERO);
        for (j, col) in columns.iter().enumerate() {
            let u64s = kinds[j] == DType::UInt64;
            for i in 0..want {
                a[[i, j]] = match col {
                    Values::Bool(v) => T::from_elem(v[i]),
                    Values::Int(v) if u64s => T::from_elem(v[i] as u64),
                    Values::Int(v) => T::from_elem(v[i]),
                    Values::F32(v) => T::from_elem(v[i]),
                    Values::F64(v) => T::from_elem(v[i]),
                };
            }
        }
        T::wrap(
            ArrayD::from_shape_vec(IxDyn(&shape), a.into_raw_vec_and_offset().0)
                .map_err(|e| e.to_string())?,
        )
    }))
}

/// A Parquet file written as a stream of slabs of rows (1-D: one column; 2-D: one column
/// per array column), each slab one row group: no array is held whole. Columns are
/// required (no nulls) and of the array's dtype: DOUBLE, FLOAT, BOOLEAN, or an INT32 or
/// INT64 with its integer logical type (int8 ... uint64, as pyarrow writes them; Parquet
/// has no complex type); pages snappy-compressed.
pub struct Writer<W: std::io::Write + Send> {
    inner: parquet::file::writer::SerializedFileWriter<W>,
    columns: usize,
}

impl<W: std::io::Write + Send> Writer<W> {
    /// Starts a file of columns named `names`, all of `dtype`.
    pub fn new(out: W, dtype: DType, names: &[String]) -> Result<Writer<W>, String> {
        use parquet::basic::{Compression, Repetition};
        use parquet::schema::types::Type;
        let int = |bits: i8, signed: bool| {
            let p = if bits == 64 {
                Physical::INT64
            } else {
                Physical::INT32
            };
            (
                p,
                Some(LogicalType::Integer(parquet::basic::IntType {
                    bit_width: bits,
                    is_signed: signed,
                })),
            )
        };
        let (physical, logical) = match dtype {
            DType::Float64 => (Physical::DOUBLE, None),
            DType::Float32 => (Physical::FLOAT, None),
            DType::Bool => (Physical::BOOLEAN, None),
            DType::Int64 => (Physical::INT64, None),
            DType::Int8 => int(8, true),
            DType::Int16 => int(16, true),
            DType::Int32 => int(32, true),
            DType::UInt8 => int(8, false),
            DType::UInt16 => int(16, false),
            DType::UInt32 => int(32, false),
            DType::UInt64 => int(64, false),
            DType::Complex64 | DType::Complex128 => {
                return Err(format!(
                    "Parquet has no complex type ({dtype}): write .npy, .csv or Zarr"
                ));
            }
        };
        let fields = names
            .iter()
            .map(|n| {
                Type::primitive_type_builder(n, physical)
                    .with_repetition(Repetition::REQUIRED)
                    .with_logical_type(logical.clone())
                    .build()
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        let schema = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(|e| e.to_string())?;
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let inner = parquet::file::writer::SerializedFileWriter::new(
            out,
            Arc::new(schema),
            Arc::new(props),
        )
        .map_err(|e| e.to_string())?;
        Ok(Writer {
            inner,
            columns: names.len(),
        })
    }

    /// Appends a slab of rows as one row group.
    pub fn write(&mut self, slab: &Block) -> Result<(), String> {
        use parquet::data_type::{BoolType, DoubleType, FloatType, Int32Type, Int64Type};
        let cols = slab.shape().get(1).copied().unwrap_or(1);
        if cols != self.columns {
            return Err(format!(
                "a slab of {cols} columns for a file of {}",
                self.columns
            ));
        }
        let e = |e: parquet::errors::ParquetError| e.to_string();
        let mut rg = self.inner.next_row_group().map_err(e)?;
        for j in 0..cols {
            let mut col = rg
                .next_column()
                .map_err(e)?
                .ok_or("fewer columns than the schema's")?;
            // Column j of the slab (a 1-D slab is its one column).
            macro_rules! values {
                ($a:expr) => {{
                    let a = $a;
                    let v: Vec<_> = if a.ndim() == 1 {
                        a.iter().copied().collect()
                    } else {
                        a.index_axis(ndarray::Axis(1), j).iter().copied().collect()
                    };
                    v
                }};
            }
            match slab {
                Block::F64(a) => col
                    .typed::<DoubleType>()
                    .write_batch(&values!(a), None, None),
                Block::F32(a) => col
                    .typed::<FloatType>()
                    .write_batch(&values!(a), None, None),
                Block::I64(a) => col
                    .typed::<Int64Type>()
                    .write_batch(&values!(a), None, None),
                Block::Bool(a) => col.typed::<BoolType>().write_batch(&values!(a), None, None),
                // Narrower ints as INT32, uint64 as INT64's bits (their logical types say
                // which).
                Block::U64(a) => col.typed::<Int64Type>().write_batch(
                    &values!(a).into_iter().map(|v| v as i64).collect::<Vec<_>>(),
                    None,
                    None,
                ),
                Block::C64(_) | Block::C128(_) => {
                    return Err("Parquet has no complex type".into());
                }
                b => col
                    .typed::<Int32Type>()
                    .write_batch(&values!(b.to_elem::<i32>()), None, None),
            }
            .map_err(e)?;
            col.close().map_err(e)?;
        }
        rg.close().map_err(e)?;
        Ok(())
    }

    /// Writes the footer; returns the output.
    pub fn finish(self) -> Result<W, String> {
        self.inner.into_inner().map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_tail_and_chunk_bounds() {
        assert_eq!(metadata_len(b"\x10\x02\0\0PAR1", "f").unwrap(), 528);
        assert!(
            metadata_len(b"\0\0\0\0PARE", "f")
                .unwrap_err()
                .contains("encrypted")
        );
        assert!(
            metadata_len(b"12345678", "f")
                .unwrap_err()
                .contains("not a Parquet file")
        );
        let at = At {
            offset: 100,
            bytes: Bytes::from_static(b"abcdef"),
        };
        assert_eq!(at.len(), 106);
        assert_eq!(&at.get_bytes(102, 3).unwrap()[..], b"cde");
        assert!(at.get_bytes(99, 2).is_err() && at.get_bytes(104, 3).is_err());
        assert!(
            describe(b"not thrift", "f")
                .unwrap_err()
                .starts_with("f: cannot read")
        );
    }
}
