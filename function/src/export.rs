//! Export kernels: a part of a `.npy` file on S3 written by the functions as one part of a
//! multipart upload the driver started and completes ([`Kernel::ExportNpyPart`]); a block
//! of a local `.npy` file written into its place by a function on the driver's machine
//! ([`Kernel::ExportNpyBlock`]).

use std::sync::Arc;

use ndarray::ArrayD;
use nums_layout::batch::{ETAG_BYTES, Kernel};
use nums_layout::{Block, IoCounters, Store};

/// Uploads the part; returns its ETag as the kernel's output block. The bytes sent are
/// counted as this invocation's writes.
pub async fn put_part(
    kernel: &Kernel,
    input: Arc<Block>,
    counters: &IoCounters,
) -> Result<Block, String> {
    let Kernel::ExportNpyPart {
        dest,
        key,
        upload,
        part,
        header,
        bytes,
    } = kernel
    else {
        return Err(format!("not an export kernel: {kernel:?}"));
    };
    let head = header.clone();
    let payload = tokio::task::spawn_blocking(move || {
        let mut out = head;
        out.extend_from_slice(&input.le_bytes());
        out
    })
    .await
    .map_err(|e| format!("export: {e}"))?;
    if payload.len() as u64 != header.len() as u64 + bytes {
        return Err(format!(
            "{key}: part {part} has {} bytes; the plan says {}",
            payload.len(),
            header.len() as u64 + bytes
        ));
    }
    let n = payload.len() as u64;
    let store = Store::open(dest).map_err(|e| e.to_string())?;
    let etag = store
        .put_part(key, upload, *part, payload.into())
        .await
        .map_err(|e| e.to_string())?;
    counters.count_put(n);
    etag_block(&etag)
}

/// Encodes the input as chunk `chunk` of the Zarr array the kernel names (its own codecs,
/// as its metadata says) and puts it at that chunk's key; returns the bytes put as a
/// one-element int64 block, counted as this invocation's writes. The input must be the
/// whole chunk (the part inside the array, for a chunk at its end).
pub async fn put_zarr_chunk(
    kernel: &Kernel,
    input: Arc<Block>,
    counters: &IoCounters,
) -> Result<Block, String> {
    let Kernel::ExportZarrChunk {
        dest, path, chunk, ..
    } = kernel
    else {
        return Err(format!("not a Zarr export kernel: {kernel:?}"));
    };
    let arr =
        nums_layout::StoredArray::from_json(path, &dest.metadata).map_err(|e| e.to_string())?;
    let (a, idx) = (arr.clone(), chunk.clone());
    let bytes = tokio::task::spawn_blocking(move || a.encode(&idx, &input))
        .await
        .map_err(|e| format!("export: {e}"))?
        .map_err(|e| e.to_string())?;
    let n = bytes.len() as u64;
    let store = Store::open(&dest.store).map_err(|e| e.to_string())?;
    store
        .put(&arr.block_key(chunk), bytes)
        .await
        .map_err(|e| e.to_string())?;
    counters.count_put(n);
    Ok(Block::I64(
        ArrayD::from_shape_vec(vec![1; chunk.len()], vec![n as i64]).expect("shape"),
    ))
}

/// Writes the input block into its place in the partial `.npy` file the kernel names;
/// returns the bytes written as a one-element int64 block. The file must exist (the
/// driver made it, header and full length) and be named `*.partial`: a batch never makes
/// or grows a file, and writes nothing but a run's partial output.
pub fn write_block(kernel: &Kernel, input: &Block) -> Result<Block, String> {
    use std::os::unix::fs::FileExt;
    let Kernel::ExportNpyBlock {
        path,
        offset,
        shape,
        origin,
        ..
    } = kernel
    else {
        return Err(format!("not an export kernel: {kernel:?}"));
    };
    let file = std::path::Path::new(path);
    if !file.is_absolute() || file.extension().is_none_or(|e| e != "partial") {
        return Err(format!("{path}: not a partial output file"));
    }
    let block: Vec<u64> = input.shape().iter().map(|&n| n as u64).collect();
    let size = input.dtype().size() as u64;
    let runs = runs(shape, origin, &block).ok_or_else(|| {
        format!("{path}: a block of shape {block:?} at {origin:?} is outside the array's {shape:?}")
    })?;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .map_err(|e| format!("cannot write {path}: {e}"))?;
    let end = offset + shape.iter().product::<u64>() * size;
    let len = f
        .metadata()
        .map_err(|e| format!("cannot write {path}: {e}"))?
        .len();
    if len != end {
        return Err(format!("{path}: {len} bytes; the output's file has {end}"));
    }
    let bytes = input.le_bytes();
    let run_bytes = (runs.len * size) as usize;
    for (i, at) in runs.starts.iter().enumerate() {
        let chunk = &bytes[i * run_bytes..(i + 1) * run_bytes];
        f.write_all_at(chunk, offset + at * size)
            .map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    Ok(Block::I64(
        ArrayD::from_shape_vec(vec![1; shape.len()], vec![bytes.len() as i64]).expect("shape"),
    ))
}

/// Where a block's values go in its array's C-order values: runs of `len` elements, one
/// per index of the block's leading axes (the trailing axes it spans whole, and the axis
/// before them, make one run), each starting at the element `starts` gives. `None` when
/// the block is not inside the array.
struct Runs {
    len: u64,
    starts: Vec<u64>,
}

fn runs(shape: &[u64], origin: &[u64], block: &[u64]) -> Option<Runs> {
    let nd = shape.len();
    if origin.len() != nd || block.len() != nd || (0..nd).any(|d| origin[d] + block[d] > shape[d]) {
        return None;
    }
    // Axis k: the last axis the block does not span whole, or the first if it spans all.
    let k = (0..nd).rev().find(|&d| block[d] != shape[d]).unwrap_or(0);
    let strides: Vec<u64> = (0..nd).map(|d| shape[d + 1..].iter().product()).collect();
    let len = if nd == 0 {
        1
    } else {
        block[k..].iter().product()
    };
    let outer: Vec<u64> = block[..k].to_vec();
    let count: u64 = outer.iter().product();
    let mut starts = Vec::with_capacity(count as usize);
    let mut i = vec![0u64; k];
    for _ in 0..count {
        let at: u64 = (0..k).map(|d| (origin[d] + i[d]) * strides[d]).sum::<u64>()
            + origin.get(k).map_or(0, |o| o * strides[k]);
        starts.push(at);
        for d in (0..k).rev() {
            i[d] += 1;
            if i[d] < outer[d] {
                break;
            }
            i[d] = 0;
        }
    }
    Some(Runs { len, starts })
}

/// An ETag as a [1, ETAG_BYTES] int64 block, one byte per element, zero-padded.
fn etag_block(etag: &str) -> Result<Block, String> {
    if etag.len() > ETAG_BYTES || etag.contains('\0') {
        return Err(format!("an ETag of {} bytes: {etag:?}", etag.len()));
    }
    let mut v = vec![0i64; ETAG_BYTES];
    for (d, b) in v.iter_mut().zip(etag.bytes()) {
        *d = b as i64;
    }
    Ok(Block::I64(
        ArrayD::from_shape_vec(vec![1, ETAG_BYTES], v).expect("shape"),
    ))
}

/// The ETag a [`put_part`] output block holds.
pub fn etag_of(b: &Block) -> Result<String, String> {
    let Block::I64(a) = b else {
        return Err("an ETag block is int64".into());
    };
    let bytes: Vec<u8> = a
        .iter()
        .take_while(|&&v| v != 0)
        .map(|&v| v as u8)
        .collect();
    String::from_utf8(bytes).map_err(|e| format!("an ETag block: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_written_where_c_order_puts_its_values() {
        // A 4 x 6 array in blocks of 2 x 3 (runs of 3, one per row), a 4 x 6 x 2 one in
        // blocks of 2 x 6 x 2 (one run: the block spans the trailing axes).
        let r = runs(&[4, 6], &[2, 3], &[2, 3]).unwrap();
        assert_eq!((r.len, r.starts), (3, vec![15, 21]));
        let r = runs(&[4, 6, 2], &[2, 0, 0], &[2, 6, 2]).unwrap();
        assert_eq!((r.len, r.starts), (24, vec![24]));
        let r = runs(&[5], &[4], &[1]).unwrap();
        assert_eq!((r.len, r.starts), (1, vec![4]));
        assert!(runs(&[4, 6], &[3, 3], &[2, 3]).is_none());

        // Every block of a 5 x 7 array (blocks 2 x 3, edges smaller) written into a file
        // reads back as the array.
        let dir = std::env::temp_dir().join(format!("nums-export-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.npy.partial");
        let (offset, shape) = (16u64, vec![5u64, 7]);
        std::fs::write(&path, vec![0xffu8; 16 + 35 * 8]).unwrap();
        let whole = ndarray::Array2::from_shape_fn((5, 7), |(i, j)| (i * 7 + j) as f64);
        for (r0, c0) in [
            (0, 0),
            (0, 3),
            (0, 6),
            (2, 0),
            (2, 3),
            (2, 6),
            (4, 0),
            (4, 3),
            (4, 6),
        ] {
            let b = whole
                .slice(ndarray::s![r0..(r0 + 2).min(5), c0..(c0 + 3).min(7)])
                .to_owned();
            let k = Kernel::ExportNpyBlock {
                path: path.to_string_lossy().into_owned(),
                offset,
                shape: shape.clone(),
                origin: vec![r0 as u64, c0 as u64],
                bytes: (b.len() * 8) as u64,
            };
            let n = b.len();
            let out = write_block(&k, &Block::F64(b.into_dyn())).unwrap();
            assert_eq!(
                out.to_i64().iter().copied().collect::<Vec<_>>(),
                vec![n as i64 * 8]
            );
        }
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..16], &[0xffu8; 16]);
        let got = Block::from_le_bytes(nums_layout::DType::Float64, &[5, 7], &bytes[16..]).unwrap();
        assert_eq!(got, Block::F64(whole.into_dyn()));
        // Not a partial file, or a file of another length: refused, nothing written.
        let k = |p: &std::path::Path| Kernel::ExportNpyBlock {
            path: p.to_string_lossy().into_owned(),
            offset,
            shape: vec![6, 7],
            origin: vec![0, 0],
            bytes: 8,
        };
        let one = Block::F64(ndarray::ArrayD::zeros(vec![1, 1]));
        assert!(
            write_block(&k(&dir.join("a.npy")), &one)
                .unwrap_err()
                .contains("not a partial")
        );
        assert!(write_block(&k(&path), &one).unwrap_err().contains("bytes"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn etags_round_trip_through_blocks_and_values_are_little_endian_c_order() {
        let e = "\"9b2cf535f27731c974343645a3985328\"";
        assert_eq!(etag_of(&etag_block(e).unwrap()).unwrap(), e);
        assert!(etag_block(&"x".repeat(ETAG_BYTES + 1)).is_err());
        let a = ndarray::arr2(&[[1.5f64, -2.0], [3.0, 4.25]]).into_dyn();
        let t = Block::F64(a.t().to_owned().into_dyn()); // another memory order
        let mut out = b"H".to_vec();
        out.extend_from_slice(&t.le_bytes());
        let want: Vec<u8> = std::iter::once(b'H')
            .chain(
                [1.5f64, 3.0, -2.0, 4.25]
                    .iter()
                    .flat_map(|v| v.to_le_bytes()),
            )
            .collect();
        assert_eq!(out, want);
    }
}
