//! Arrays in storage: metadata and block grid ([`meta`]), block values ([`block`]),
//! exact scalars ([`scalar`]), the Zarr v3 format of a stored array ([`zarr`]), the object store ([`store`]) and
//! the wire format of a batch of block tasks ([`batch`]) and of its failures
//! ([`failure`]). Knows nothing of scheduling.

pub mod batch;
pub mod block;
pub mod failure;
pub mod meta;
pub mod scalar;
pub mod store;
pub mod zarr;

pub use batch::{
    ArrayRef, Batch, BinaryOp, BlockRef, Kernel, Payload, RandomDist, ReduceOp, Stats, Task,
    UnaryOp,
};
pub use block::Block;
pub use failure::ErrorKind;
pub use meta::{ArrayMeta, DType};
pub use scalar::Scalar;
pub use store::{IoCounters, Store, StoreSpec};
pub use zarr::StoredArray;

/// Everything that can go wrong between a block and its bytes in the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store {url}: {message}")]
    Store { url: String, message: String },
    #[error("{key}: not found in store {url}")]
    NotFound { url: String, key: String },
    #[error("{key}: corrupt or unreadable block: {message}")]
    Corrupt { key: String, message: String },
    #[error("array {path}: {message}")]
    Meta { path: String, message: String },
    #[error("key {key} is outside the job prefix {prefix}")]
    OutsidePrefix { key: String, prefix: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
