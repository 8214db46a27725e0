//! `.npy` and CSV files: the `.npy` header and the CSV row index (read before anything
//! runs; the functions import the data), whole `.npy` reads (the API) and the streamed
//! writes of outputs.

use std::path::Path;

use nums_layout::{Block, DType, Scalar};

/// Shape and element type of a `.npy` file, from its header alone.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyHeader {
    pub shape: Vec<u64>,
    pub descr: String,
    /// Elements in Fortran (column-major) order.
    pub fortran: bool,
    /// Where the data starts.
    pub offset: u64,
}

impl NpyHeader {
    /// The array's dtype: any of the thirteen, little-endian or byte-sized.
    pub fn dtype(&self) -> Result<DType, String> {
        if self.descr.starts_with('>') {
            return Err(format!(
                "big-endian .npy dtype {:?} is not supported",
                self.descr
            ));
        }
        DType::parse(&self.descr).ok_or_else(|| {
            format!(
                "unsupported .npy dtype {:?}; supported: {}",
                self.descr,
                DType::supported()
            )
        })
    }

    /// Bytes of one element (8 where the dtype is not one nums-cloud reads: such a file
    /// is refused by [`NpyHeader::dtype`]).
    pub fn item_size(&self) -> u64 {
        self.dtype().map_or(8, |d| d.size() as u64)
    }

    /// Bytes of the whole file.
    pub fn file_size(&self) -> u64 {
        self.offset + self.shape.iter().product::<u64>() * self.item_size()
    }
}

/// The header of a `.npy` file from its first bytes (at least the whole header); where
/// the header is longer than `head`, the error says `needs N bytes`.
pub(crate) fn parse_header(head: &[u8]) -> Result<NpyHeader, String> {
    if head.len() < 10 {
        return Err("too short".into());
    }
    if &head[..6] != b"\x93NUMPY" {
        return Err("no magic string".into());
    }
    let (len, start) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as usize, 10),
        2 | 3 if head.len() >= 12 => (
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
            12,
        ),
        2 | 3 => return Err("too short".into()),
        v => return Err(format!("version {v}")),
    };
    if head.len() < start + len {
        return Err(format!("needs {} bytes", start + len));
    }
    let h = String::from_utf8_lossy(&head[start..start + len]);
    let descr = h
        .split("'descr':")
        .nth(1)
        .and_then(|r| r.split('\'').nth(1))
        .ok_or("no descr")?
        .to_string();
    let fortran = h
        .split("'fortran_order':")
        .nth(1)
        .map(|r| r.trim_start().starts_with("True"))
        .ok_or("no fortran_order")?;
    let shape_txt = h
        .split("'shape':")
        .nth(1)
        .and_then(|r| r.split('(').nth(1))
        .and_then(|r| r.split(')').next())
        .ok_or("no shape")?;
    let shape = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<u64>()
                .map_err(|_| "bad shape".to_string())
        })
        .collect::<Result<_, _>>()?;
    Ok(NpyHeader {
        shape,
        descr,
        fortran,
        offset: (start + len) as u64,
    })
}

/// The partial file an output file `path` (`.npy`, `.csv`) is written to before it is
/// renamed into place: `path` with `.partial` added.
pub(crate) fn partial_path(path: &Path) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".partial");
    p.into()
}

/// A partial file, removed unless it was renamed into place: a write that fails (a full
/// disk) or is interrupted (its future dropped, as Ctrl-C drops a run's) leaves nothing
/// behind. One a killed process left is removed by the next writer of the path, which
/// holds the output's lease (`crate::runs::OutputLease`).
struct Partial {
    tmp: std::path::PathBuf,
    renamed: bool,
}

impl Partial {
    /// Creates the partial file of `path` (and the folder it goes in).
    fn create(path: &Path) -> Result<(Partial, std::fs::File), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let tmp = partial_path(path);
        let f = std::fs::File::create(&tmp)
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        Ok((
            Partial {
                tmp,
                renamed: false,
            },
            f,
        ))
    }

    /// Renames the partial file to `path`.
    fn rename(&mut self, path: &Path) -> Result<(), String> {
        std::fs::rename(&self.tmp, path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.renamed = true;
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// The partial file of a `.npy` output the functions write block by block
/// ([`crate::export::FileOutput`]): made whole (header, then the values' length, a sparse
/// file) before they write, renamed into place by [`BlockFile::finish`], removed when
/// dropped unfinished (a failed run's), left by a killed one for `--resume`.
pub(crate) struct BlockFile {
    tmp: Partial,
    identity: u32,
}

impl BlockFile {
    /// Makes the partial file of `path`: `header` and `len` bytes in all. With `reuse`,
    /// one already there with that header and length is kept as it is (a resumed run's).
    pub(crate) fn open(
        path: &Path,
        header: &[u8],
        len: u64,
        reuse: bool,
    ) -> Result<BlockFile, String> {
        use std::io::{Read, Write};
        let tmp = partial_path(path);
        // Without a birth time, a file cannot be told from a new one at the same inode:
        // never reused then.
        let kept = reuse
            && born(&tmp).is_some()
            && std::fs::metadata(&tmp).is_ok_and(|m| m.is_file() && m.len() == len)
            && std::fs::File::open(&tmp).is_ok_and(|mut f| {
                let mut head = vec![0; header.len()];
                f.read_exact(&mut head).is_ok() && head == header
            });
        let tmp = if kept {
            Partial {
                tmp,
                renamed: false,
            }
        } else {
            // A new file (a new inode and birth time): blocks written to an old one are
            // never taken for this one's.
            let _ = std::fs::remove_file(&tmp);
            let (p, mut f) = Partial::create(path)?;
            let fail = |e: std::io::Error| format!("cannot write {}: {e}", p.tmp.display());
            f.write_all(header).map_err(fail)?;
            f.set_len(len).map_err(fail)?;
            p
        };
        let identity = identity(&tmp.tmp)?;
        Ok(BlockFile { tmp, identity })
    }

    /// The partial file.
    pub(crate) fn path(&self) -> &Path {
        &self.tmp.tmp
    }

    /// What tells this file from any other made at its path: its inode and birth time.
    pub(crate) fn identity(&self) -> u32 {
        self.identity
    }

    /// Renames the file into place at `path`.
    pub(crate) fn finish(mut self, path: &Path) -> Result<(), String> {
        self.tmp.rename(path)
    }
}

fn identity(path: &Path) -> Result<u32, String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut key = m.dev().to_le_bytes().to_vec();
    key.extend_from_slice(&m.ino().to_le_bytes());
    // No birth time: this file's own (it is never reused), from the clock and process.
    let born = born(path).unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.map_or(0, |d| d.as_nanos()) ^ ((std::process::id() as u128) << 64)
    });
    key.extend_from_slice(&born.to_le_bytes());
    // Compared only between a run and its resume (a hash that changed with the toolchain
    // between them only makes the blocks be written again).
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    Ok(h.finish() as u32)
}

/// When the file at `path` was made, in nanoseconds, where the file system says.
fn born(path: &Path) -> Option<u128> {
    let t = std::fs::metadata(path).ok()?.created().ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos())
}

/// A `.npy` file written as a stream of C-order slabs (a partial file renamed by
/// [`NpyWriter::finish`]), so an array need not be in memory whole.
pub(crate) struct NpyWriter {
    // Dropped in this order: the file is closed before an unfinished one is removed.
    out: std::io::BufWriter<std::fs::File>,
    tmp: Partial,
    path: std::path::PathBuf,
    left: u64,
}

/// The header of a C-order `.npy` file (format 1.0) of `dtype` and `shape`, padded so
/// that the data starts at a multiple of 64 bytes.
pub(crate) fn header(dtype: DType, shape: &[u64]) -> Vec<u8> {
    let descr = dtype.descr();
    let dims = match shape {
        [n] => format!("({n},)"),
        s => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut text = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    // Magic (6) + version (2) + length (2) + header + newline: a multiple of 64.
    let total = 10 + text.len() + 1;
    text.push_str(&" ".repeat(total.div_ceil(64) * 64 - total));
    text.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

impl NpyWriter {
    pub(crate) fn create(path: &Path, dtype: DType, shape: &[u64]) -> Result<NpyWriter, String> {
        use std::io::Write;
        let (tmp, f) = Partial::create(path)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        out.write_all(&header(dtype, shape))
            .map_err(|e| format!("cannot write {}: {e}", tmp.tmp.display()))?;
        Ok(NpyWriter {
            out,
            tmp,
            path: path.to_path_buf(),
            left: shape.iter().product::<u64>(),
        })
    }

    /// Appends a slab's values in C order.
    pub(crate) fn write(&mut self, slab: &Block) -> Result<(), String> {
        use std::io::Write;
        let n = slab.shape().iter().product::<usize>() as u64;
        if n > self.left {
            return Err(format!(
                "{}: more values than the shape holds",
                self.path.display()
            ));
        }
        self.left -= n;
        self.out
            .write_all(&slab.le_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.tmp.tmp.display()))?;
        Ok(())
    }

    /// Flushes and renames the file into place.
    pub(crate) fn finish(mut self) -> Result<(), String> {
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
            .map_err(|e| format!("cannot write {}: {e}", self.tmp.tmp.display()))?;
        self.tmp.rename(&self.path)
    }
}

/// A CSV file of numbers written row by row (comma-separated, no header; floats with the
/// shortest text that reads back to the same value), renamed into place at the end.
pub(crate) struct CsvWriter {
    // Dropped in this order: the file is closed before an unfinished one is removed.
    out: std::io::BufWriter<std::fs::File>,
    tmp: Partial,
    path: std::path::PathBuf,
}

impl CsvWriter {
    /// Starts the file, with a `header` line of column names if given (each quoted where
    /// it holds a comma or a quote, as pandas writes them).
    pub(crate) fn create(path: &Path, header: Option<&[String]>) -> Result<CsvWriter, String> {
        use std::io::Write;
        let (tmp, f) = Partial::create(path)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        if let Some(names) = header {
            let quoted: Vec<String> = names
                .iter()
                .map(|n| {
                    if n.contains([',', '"', '\n', '\r']) {
                        format!("\"{}\"", n.replace('"', "\"\""))
                    } else {
                        n.clone()
                    }
                })
                .collect();
            writeln!(out, "{}", quoted.join(","))
                .map_err(|e| format!("cannot write {}: {e}", tmp.tmp.display()))?;
        }
        Ok(CsvWriter {
            out,
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Appends a slab of rows (1-D: one value per line; 2-D: one row per line), each value
    /// formatted straight into the buffered file (a slab's text is never held whole).
    pub(crate) fn write(&mut self, slab: &Block) -> Result<(), String> {
        use std::io::Write;
        let cols = slab.shape().get(1).copied().unwrap_or(1).max(1);
        let out = &mut self.out;
        let mut put = |i: usize, v: std::fmt::Arguments<'_>| -> std::io::Result<()> {
            out.write_fmt(v)?;
            out.write_all(if (i + 1).is_multiple_of(cols) {
                b"\n"
            } else {
                b","
            })
        };
        // Floats with the shortest text that reads back (float32's own), complex in
        // Python's syntax (`1.5-2.0j`, as `complex()` and the CSV import read it), bools
        // as 0 and 1, ints exactly.
        let r = match slab {
            Block::F32(a) => a
                .iter()
                .enumerate()
                .try_for_each(|(i, v)| put(i, format_args!("{v:?}"))),
            Block::C64(a) => a.iter().enumerate().try_for_each(|(i, z)| {
                let sign = if z.im.is_sign_negative() { "" } else { "+" };
                put(i, format_args!("{:?}{sign}{:?}j", z.re, z.im))
            }),
            b => nums_layout::with_block!(b, a => a.iter().enumerate().try_for_each(|(i, v)| {
                match nums_layout::Elem::to_scalar(*v) {
                    Scalar::Bool(b) => put(i, format_args!("{}", b as u8)),
                    Scalar::Int(x) => put(i, format_args!("{x}")),
                    Scalar::UInt(x) => put(i, format_args!("{x}")),
                    Scalar::Float(x) => put(i, format_args!("{x:?}")),
                    Scalar::Complex(re, im) => {
                        let sign = if im.is_sign_negative() { "" } else { "+" };
                        put(i, format_args!("{re:?}{sign}{im:?}j"))
                    }
                }
            })),
        };
        r.map_err(|e| format!("cannot write {}: {e}", self.tmp.tmp.display()))
    }

    pub(crate) fn finish(mut self) -> Result<(), String> {
        use std::io::Write;
        self.out
            .flush()
            .map_err(|e| format!("cannot write {}: {e}", self.tmp.tmp.display()))?;
        self.tmp.rename(&self.path)
    }
}

/// A Parquet file written row group by row group (`nums_function::parquet::Writer`),
/// renamed into place at the end.
pub(crate) struct ParquetWriter {
    // Dropped in this order: the file is closed before an unfinished one is removed.
    w: nums_function::parquet::Writer<std::io::BufWriter<std::fs::File>>,
    tmp: Partial,
    path: std::path::PathBuf,
}

impl ParquetWriter {
    pub(crate) fn create(
        path: &Path,
        dtype: DType,
        names: &[String],
    ) -> Result<ParquetWriter, String> {
        let (tmp, f) = Partial::create(path)?;
        let w = nums_function::parquet::Writer::new(
            std::io::BufWriter::with_capacity(1 << 20, f),
            dtype,
            names,
        )
        .map_err(|e| format!("cannot write {}: {e}", tmp.tmp.display()))?;
        Ok(ParquetWriter {
            w,
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// Appends a slab of rows as one row group.
    pub(crate) fn write(&mut self, slab: &Block) -> Result<(), String> {
        self.w
            .write(slab)
            .map_err(|e| format!("cannot write {}: {e}", self.tmp.tmp.display()))
    }

    /// Writes the footer, flushes and renames the file into place.
    pub(crate) fn finish(mut self) -> Result<(), String> {
        use std::io::Write;
        let cannot = |e: String| format!("cannot write {}: {e}", self.tmp.tmp.display());
        let mut out = self.w.finish().map_err(cannot)?;
        out.flush().map_err(|e| cannot(e.to_string()))?;
        drop(out);
        self.tmp.rename(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_parses_order_and_offset() {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let h = "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 2), }";
        f.extend_from_slice(&(h.len() as u16).to_le_bytes());
        f.extend_from_slice(h.as_bytes());
        let p = parse_header(&f).unwrap();
        assert_eq!(
            (p.shape, p.fortran, p.offset),
            (vec![3, 2], true, 10 + h.len() as u64)
        );
        assert!(parse_header(&f[..20]).unwrap_err().starts_with("needs "));
    }
}
