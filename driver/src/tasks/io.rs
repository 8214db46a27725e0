//! Block work of the import kernels (a block read from a `.npy`, CSV, Parquet or foreign
//! Zarr input: which bytes of the file each task fetches), and of the export to a `.npy`
//! file on S3 (each task one part of the multipart upload) or to a local one (each task a
//! block written into its place).

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (g, n, idx) = (cx.g, cx.n, cx.idx);
    match &n.op {
        NodeOp::ImportZarr { store, path, src } => {
            // The source chunks the block overlaps, decoded, for the projection.
            let (origin, shape) = (n.meta.block_origin(idx), n.meta.block_shape(idx));
            let chunks: u64 = (0..origin.len())
                .map(|d| {
                    let c = src.block[d].max(1);
                    (origin[d] + shape[d] as u64 - 1) / c - origin[d] / c + 1
                })
                .product();
            let chunk: u64 = src.block.iter().product::<u64>() * src.dtype.size() as u64;
            cx.one(
                Kernel::ImportZarr {
                    source: store.clone(),
                    path: path.clone(),
                    scratch: chunks * chunk,
                },
                vec![],
            )
        }
        NodeOp::ImportNpy {
            source,
            key,
            header,
        } => cx.one(
            Kernel::ImportNpy {
                source: source.clone(),
                key: key.clone(),
                offset: header.offset,
                shape: header.shape.clone(),
                descr: header.descr.clone(),
                fortran: header.fortran,
            },
            vec![],
        ),
        NodeOp::ImportCsv {
            source,
            key,
            index,
            delimiter,
            usecols,
            dtypes,
        } => {
            // The block's rows, found from the index; a block splitting the columns
            // parses only its own.
            let own = match n.meta.ndim() {
                2 => {
                    let c0 = n.meta.block_origin(idx)[1] as usize;
                    c0..c0 + n.meta.block_shape(idx)[1]
                }
                _ => 0..usecols.len(),
            };
            let cols = usecols[own.clone()].to_vec();
            let dtypes = dtypes.get(own).map_or_else(Vec::new, <[_]>::to_vec);
            let r0 = n.meta.block_origin(idx)[0];
            let r1 = r0 + n.meta.block_shape(idx)[0] as u64;
            let (start, end, line, skip) = index.span(r0, r1);
            cx.one(
                Kernel::ImportCsv {
                    source: source.clone(),
                    key: key.clone(),
                    start,
                    end,
                    line,
                    skip,
                    columns: index.columns,
                    usecols: cols,
                    delimiter: *delimiter,
                    dtypes,
                },
                vec![],
            )
        }
        NodeOp::ImportParquet {
            source,
            key,
            metadata,
            columns,
            row_groups,
        } => {
            // The column chunks of the row groups the block's rows fall in.
            let (origin, shape) = (n.meta.block_origin(idx), n.meta.block_shape(idx));
            let (r0, r1) = (origin[0], origin[0] + shape[0] as u64);
            let (c0, c1) = match n.meta.ndim() {
                2 => (origin[1] as usize, origin[1] as usize + shape[1]),
                _ => (0, 1),
            };
            let mut first = 0;
            let mut fetch = 0;
            for (rows, sizes) in row_groups.iter() {
                if first < r1 && first + rows > r0 {
                    fetch += columns[c0..c1]
                        .iter()
                        .map(|&c| sizes[c as usize])
                        .sum::<u64>();
                }
                first += rows;
            }
            cx.one(
                Kernel::ImportParquet {
                    source: source.clone(),
                    key: key.clone(),
                    metadata: *metadata,
                    columns: columns.clone(),
                    fetch,
                },
                vec![],
            )
        }
        NodeOp::ExportNpy {
            x,
            dest,
            key,
            upload,
            header,
        } => {
            let mut src = vec![0; cx.meta(*x).ndim()];
            src[0] = idx[0];
            let input = cx.b(*x, &src);
            cx.one(
                Kernel::ExportNpyPart {
                    dest: dest.clone(),
                    key: key.clone(),
                    upload: upload.clone(),
                    part: idx[0] as usize,
                    header: if idx[0] == 0 { header.clone() } else { vec![] },
                    bytes: input.nbytes(g),
                },
                vec![input],
            )
        }
        NodeOp::ExportNpyFile { x, path, offset } => {
            let m = cx.meta(*x);
            let input = cx.b(*x, idx);
            cx.one(
                Kernel::ExportNpyBlock {
                    path: path.clone(),
                    offset: *offset,
                    shape: m.shape.clone(),
                    origin: m.block_origin(idx),
                    bytes: input.nbytes(g),
                },
                vec![input],
            )
        }
        NodeOp::ExportZarr {
            x,
            dest,
            path,
            offset,
        } => {
            let input = cx.b(*x, idx);
            cx.one(
                Kernel::ExportZarrChunk {
                    dest: dest.clone(),
                    path: path.clone(),
                    chunk: idx.iter().zip(offset).map(|(i, o)| i + o).collect(),
                    bytes: input.nbytes(g),
                },
                vec![input],
            )
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
