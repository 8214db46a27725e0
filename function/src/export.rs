//! Export kernels: a part of a `.npy` file on S3 written by the functions as one part of a
//! multipart upload the driver started and completes ([`Kernel::ExportNpyPart`]).

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
