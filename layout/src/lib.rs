//! Arrays in storage: metadata and block grid ([`meta`]), block values ([`block`]),
//! exact scalars ([`scalar`]), the Zarr v3 format of a stored array ([`zarr`]), the object store ([`store`]), the
//! memory tier of decoded blocks in front of it ([`tier`]) and
//! the wire format of a batch of block tasks ([`batch`]) and of its failures
//! ([`failure`]). Knows nothing of scheduling.

pub mod batch;
pub mod block;
pub mod failure;
pub mod meta;
pub mod num;
pub mod scalar;
pub mod store;
pub mod tier;
pub mod zarr;

pub use batch::{
    ArrayRef, Batch, BinaryOp, BlockRef, Kernel, Payload, RandomDist, ReduceOp, Stats, Task,
    UnaryOp,
};
pub use block::{Block, C64, C128, Elem};
pub use failure::ErrorKind;
pub use meta::{ArrayMeta, DType};
pub use scalar::Scalar;
pub use store::{IoCounters, Store, StoreSpec};
pub use zarr::{Foreign, StoredArray};

/// Everything that can go wrong between a block and its bytes in the store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A store could not be opened (bad URL, scheme or endpoint) or a request to it failed
    /// (after the retries of [`store::retry_budget`]).
    #[error("store {url}: {message}")]
    Store {
        /// The store, as [`StoreSpec`]'s `Display` writes it (URL, and endpoint if any).
        url: String,
        /// What failed; for a request, prefixed with the key it was for.
        message: String,
    },
    /// A write found the store's disk full (or a quota reached): another try within the
    /// store's retry budget would fail the same way, so it is said at once.
    #[error("store {url}: {message} (the disk is full: free space, then run again)")]
    StoreFull {
        /// The store, as [`StoreSpec`]'s `Display` writes it.
        url: String,
        /// What failed, prefixed with the key it was for.
        message: String,
    },
    /// No object at a key that had to exist (a block, a `zarr.json`); readers that allow
    /// absence ([`Store::get_opt`], [`Store::head`]) give `None` instead.
    #[error("{key}: not found in store {url}")]
    NotFound {
        /// The store, as [`StoreSpec`]'s `Display` writes it.
        url: String,
        /// The missing object's key, relative to the store root.
        key: String,
    },
    /// A chunk's bytes do not decode (zstd checksum, size), or a block handed to
    /// [`StoredArray::encode`] does not have its array's block shape and dtype.
    #[error("{key}: corrupt or unreadable block: {message}")]
    Corrupt {
        /// The chunk's key, relative to the store root.
        key: String,
        /// Why it does not decode or encode.
        message: String,
    },
    /// An array's `zarr.json` does not parse, or describes an array nums-cloud cannot use
    /// (Zarr v2, an unsupported data type).
    #[error("array {path}: {message}")]
    Meta {
        /// The array's path, relative to the store root.
        path: String,
        /// What is wrong with its metadata.
        message: String,
    },
    /// A batch names an array (or a stored batch key) outside its job prefix, or would
    /// write a read-only input (see [`Batch::check_confined`]); the function also gives it
    /// for a store other than the one it is allowed (`NUMS_ALLOWED_STORE`).
    #[error("key {key} is outside the job prefix {prefix}")]
    OutsidePrefix {
        /// The array path or key refused (or the store, for a store not allowed).
        key: String,
        /// The job prefix it had to lie under (or the allowed store's URL).
        prefix: String,
    },
}

/// This crate's `Result`: its error is [`Error`] unless another is named.
pub type Result<T, E = Error> = std::result::Result<T, E>;
