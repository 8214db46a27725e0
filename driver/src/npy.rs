//! `.npy` files: the header (shape and dtype, read before anything runs), whole-array
//! reads for import and writes for outputs (ndarray-npy does the data).

use std::io::Read;
use std::path::Path;

use ndarray::ArrayD;
use ndarray_npy::{ReadNpyExt, WriteNpyExt};
use nums_layout::{Block, DType};

/// Shape and element type of a `.npy` file, from its header alone.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    pub shape: Vec<u64>,
    pub descr: String,
}

impl NpyHeader {
    /// The dtype the array gets in nums-cloud: bool, float32 and float64 stay; smaller
    /// integers widen to int64.
    pub fn dtype(&self) -> Result<DType, String> {
        if self.descr.starts_with('>') {
            return Err(format!(
                "big-endian .npy dtype {:?} is not supported",
                self.descr
            ));
        }
        let d = self.descr.trim_start_matches(['<', '|', '=']);
        match d {
            "b1" => Ok(DType::Bool),
            "f8" => Ok(DType::Float64),
            "f4" => Ok(DType::Float32),
            "i8" | "i4" | "i2" | "i1" | "u1" | "u2" | "u4" => Ok(DType::Int64),
            _ => Err(format!(
                "unsupported .npy dtype {:?}; supported: float64, float32, int8-64, uint8-32, bool",
                self.descr
            )),
        }
    }
}

pub fn read_header(path: &Path) -> Result<NpyHeader, String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let bad = |m: &str| format!("{} is not a .npy file: {m}", path.display());
    let mut pre = [0u8; 10];
    f.read_exact(&mut pre).map_err(|_| bad("too short"))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad("no magic string"));
    }
    let len = match pre[6] {
        1 => u16::from_le_bytes([pre[8], pre[9]]) as usize,
        2 | 3 => {
            let mut more = [0u8; 2];
            f.read_exact(&mut more).map_err(|_| bad("too short"))?;
            u32::from_le_bytes([pre[8], pre[9], more[0], more[1]]) as usize
        }
        v => return Err(bad(&format!("version {v}"))),
    };
    let mut h = vec![0u8; len];
    f.read_exact(&mut h).map_err(|_| bad("truncated header"))?;
    let h = String::from_utf8_lossy(&h);
    let descr = h
        .split("'descr':")
        .nth(1)
        .and_then(|r| r.split('\'').nth(1))
        .ok_or_else(|| bad("no descr"))?
        .to_string();
    let shape_txt = h
        .split("'shape':")
        .nth(1)
        .and_then(|r| r.split('(').nth(1))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad("no shape"))?;
    let shape = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<u64>()
                .map_err(|_| bad("bad shape"))
        })
        .collect::<Result<_, _>>()?;
    Ok(NpyHeader { shape, descr })
}

/// Reads a whole `.npy` as a block of nums-cloud's dtype.
pub fn read(path: &Path) -> Result<Block, String> {
    let h = read_header(path)?;
    let open =
        || std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()));
    let err = |e: ndarray_npy::ReadNpyError| format!("{}: {e}", path.display());
    let d = h.descr.trim_start_matches(['<', '|', '=']);
    macro_rules! ints {
        ($t:ty) => {
            Block::I64(
                ArrayD::<$t>::read_npy(open()?)
                    .map_err(err)?
                    .mapv(i64::from),
            )
        };
    }
    h.dtype().map_err(|m| format!("{}: {m}", path.display()))?;
    Ok(match d {
        "b1" => Block::Bool(ArrayD::<bool>::read_npy(open()?).map_err(err)?),
        "f8" => Block::F64(ArrayD::<f64>::read_npy(open()?).map_err(err)?),
        "f4" => Block::F32(ArrayD::<f32>::read_npy(open()?).map_err(err)?),
        "i8" => Block::I64(ArrayD::<i64>::read_npy(open()?).map_err(err)?),
        "i4" => ints!(i32),
        "i2" => ints!(i16),
        "i1" => ints!(i8),
        "u4" => ints!(u32),
        "u2" => ints!(u16),
        _ => ints!(u8),
    })
}

/// Walks a CSV file of numbers (comma-separated, no header; `#` starts a comment; blank
/// lines are skipped) one row at a time, checking every field, without holding the file;
/// `row` gets each row's values. Returns (rows, columns).
fn csv_rows(path: &Path, mut row: impl FnMut(&[f64])) -> Result<(u64, usize), String> {
    use std::io::BufRead;
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut cols = None;
    let mut rows = 0u64;
    let mut values = Vec::new();
    for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        values.clear();
        for (c, field) in line.split(',').enumerate() {
            let v: f64 = field.trim().parse().map_err(|_| {
                format!(
                    "{}:{}: column {}: {:?} is not a number",
                    path.display(),
                    n + 1,
                    c + 1,
                    field.trim()
                )
            })?;
            values.push(v);
        }
        match cols {
            None => cols = Some(values.len()),
            Some(k) if k != values.len() => {
                return Err(format!(
                    "{}:{}: {} columns, but the first row has {k}",
                    path.display(),
                    n + 1,
                    values.len()
                ));
            }
            _ => {}
        }
        row(&values);
        rows += 1;
    }
    let cols = cols.ok_or_else(|| format!("{}: no numbers", path.display()))?;
    Ok((rows, cols))
}

/// The shape `np.loadtxt(path, delimiter=",")` gives a CSV file: 2-D, or 1-D when it has
/// one column.
pub fn csv_shape(path: &Path) -> Result<Vec<u64>, String> {
    let (rows, cols) = csv_rows(path, |_| {})?;
    Ok(if cols == 1 {
        vec![rows]
    } else {
        vec![rows, cols as u64]
    })
}

/// Reads a CSV file of numbers as float64 (see [`csv_rows`]), shaped as [`csv_shape`].
pub fn read_csv(path: &Path) -> Result<Block, String> {
    let mut values = Vec::new();
    let (rows, cols) = csv_rows(path, |r| values.extend_from_slice(r))?;
    let shape: Vec<usize> = if cols == 1 {
        vec![rows as usize]
    } else {
        vec![rows as usize, cols]
    };
    Ok(Block::F64(
        ArrayD::from_shape_vec(ndarray::IxDyn(&shape), values).expect("rows x cols"),
    ))
}

pub fn write(path: &Path, block: &Block) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let tmp = path.with_extension("npy.partial");
    let f =
        std::fs::File::create(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    let w = std::io::BufWriter::new(f);
    nums_layout::with_block!(block, a => a.write_npy(w))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A `.npy` file written as a stream of C-order slabs (a partial file renamed by
/// [`NpyWriter::finish`]), so an array need not be in memory whole.
pub struct NpyWriter {
    out: std::io::BufWriter<std::fs::File>,
    tmp: std::path::PathBuf,
    path: std::path::PathBuf,
    left: u64,
}

impl NpyWriter {
    pub fn create(path: &Path, dtype: DType, shape: &[u64]) -> Result<NpyWriter, String> {
        use std::io::Write;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("npy.partial");
        let f = std::fs::File::create(&tmp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        let descr = match dtype {
            DType::Float64 => "<f8",
            DType::Float32 => "<f4",
            DType::Int64 => "<i8",
            DType::Bool => "|b1",
        };
        let dims = match shape {
            [n] => format!("({n},)"),
            s => format!(
                "({})",
                s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
        // Magic (6) + version (2) + length (2) + header + newline: a multiple of 64.
        let total = 10 + header.len() + 1;
        header.push_str(&" ".repeat(total.div_ceil(64) * 64 - total));
        header.push('\n');
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        let err = |e: std::io::Error| format!("cannot write {}: {e}", tmp.display());
        out.write_all(b"\x93NUMPY\x01\x00").map_err(err)?;
        out.write_all(&(header.len() as u16).to_le_bytes())
            .map_err(err)?;
        out.write_all(header.as_bytes()).map_err(err)?;
        Ok(NpyWriter {
            out,
            tmp,
            path: path.to_path_buf(),
            left: shape.iter().product::<u64>(),
        })
    }

    /// Appends a slab's values in C order.
    pub fn write(&mut self, slab: &Block) -> Result<(), String> {
        use std::io::Write;
        let n = slab.shape().iter().product::<usize>() as u64;
        if n > self.left {
            return Err(format!(
                "{}: more values than the shape holds",
                self.path.display()
            ));
        }
        self.left -= n;
        let err = |e: std::io::Error| format!("cannot write {}: {e}", self.tmp.display());
        match slab {
            Block::F64(a) => {
                for v in a.iter() {
                    self.out.write_all(&v.to_le_bytes()).map_err(err)?;
                }
            }
            Block::F32(a) => {
                for v in a.iter() {
                    self.out.write_all(&v.to_le_bytes()).map_err(err)?;
                }
            }
            Block::I64(a) => {
                for v in a.iter() {
                    self.out.write_all(&v.to_le_bytes()).map_err(err)?;
                }
            }
            Block::Bool(a) => {
                for v in a.iter() {
                    self.out.write_all(&[*v as u8]).map_err(err)?;
                }
            }
        }
        Ok(())
    }

    /// Flushes and renames the file into place.
    pub fn finish(mut self) -> Result<(), String> {
        use std::io::Write;
        if self.left != 0 {
            return Err(format!(
                "{}: {} values missing",
                self.path.display(),
                self.left
            ));
        }
        self.out
            .flush()
            .map_err(|e| format!("cannot write {}: {e}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

/// A CSV file of numbers written row by row (comma-separated, no header; floats with the
/// shortest text that reads back to the same value), renamed into place at the end.
pub struct CsvWriter {
    out: std::io::BufWriter<std::fs::File>,
    tmp: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl CsvWriter {
    pub fn create(path: &Path) -> Result<CsvWriter, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = path.with_extension("csv.partial");
        let f = std::fs::File::create(&tmp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        Ok(CsvWriter {
            out: std::io::BufWriter::with_capacity(1 << 20, f),
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Appends a slab of rows (1-D: one value per line; 2-D: one row per line).
    pub fn write(&mut self, slab: &Block) -> Result<(), String> {
        use std::io::Write;
        let cols = slab.shape().get(1).copied().unwrap_or(1).max(1);
        let text: Vec<String> = match slab {
            Block::F64(a) => a.iter().map(|v| format!("{v:?}")).collect(),
            Block::F32(a) => a.iter().map(|v| format!("{v:?}")).collect(),
            Block::I64(a) => a.iter().map(|v| v.to_string()).collect(),
            Block::Bool(a) => a.iter().map(|&v| (v as u8).to_string()).collect(),
        };
        let err = |e: std::io::Error| format!("cannot write {}: {e}", self.tmp.display());
        for row in text.chunks(cols) {
            self.out.write_all(row.join(",").as_bytes()).map_err(err)?;
            self.out.write_all(b"\n").map_err(err)?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<(), String> {
        use std::io::Write;
        self.out
            .flush()
            .map_err(|e| format!("cannot write {}: {e}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}
