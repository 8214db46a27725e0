//! Where input arrays come from. [`probe`] is the only I/O of checking a job: it reads
//! what every `load` holds (a `.npy` header, a CSV's rows and columns, a Zarr array's
//! metadata) before the graph is built, so that building the graph is pure.

use std::path::Path;

use super::*;

/// What one `load` input holds, learnt before the graph is built.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// A `.npy` file (its header only).
    Npy {
        path: String,
        shape: Vec<u64>,
        dtype: DType,
    },
    /// A CSV file of numbers (rows and columns counted, every field checked).
    Csv { path: String, shape: Vec<u64> },
    /// A Zarr v3 array. `in_place` is its path under the job's store root when it lies
    /// there and is encoded as nums-cloud encodes: the functions then read it in place.
    /// `sparse`: not written by nums-cloud (chunks never written are its fill value).
    /// `stamp` identifies the `zarr.json` read, to notice the array being replaced while
    /// a run reads it.
    Zarr {
        store: StoreSpec,
        path: String,
        meta: ArrayMeta,
        in_place: Option<String>,
        sparse: bool,
        stamp: u64,
    },
}

impl Probe {
    pub fn shape(&self) -> &[u64] {
        match self {
            Probe::Npy { shape, .. } | Probe::Csv { shape, .. } => shape,
            Probe::Zarr { meta, .. } => &meta.shape,
        }
    }
}

/// The probes of a job's inputs, by array name.
#[derive(Debug, Clone, Default)]
pub struct Probes(pub HashMap<String, Probe>);

/// Reads what every `load` of the job holds. Errors name the file, line and key.
pub async fn probe(job: &Job) -> Result<Probes, JobError> {
    let mut out = HashMap::new();
    for def in &job.arrays {
        let Source::Load { path } = &def.source else {
            continue;
        };
        let err = |m: String| job.err(def.line, format!("arrays.{}.load", def.name), m);
        let p = probe_one(job, path).await.map_err(err)?;
        out.insert(def.name.clone(), p);
    }
    Ok(Probes(out))
}

async fn probe_one(job: &Job, path: &str) -> Result<Probe, String> {
    let local = !path.starts_with("s3://");
    if local && path.ends_with(".csv") {
        let p = std::path::PathBuf::from(path);
        let shape = tokio::task::spawn_blocking(move || crate::npy::csv_shape(&p))
            .await
            .map_err(|e| e.to_string())??;
        return Ok(Probe::Csv {
            path: path.to_string(),
            shape,
        });
    }
    if local && path.ends_with(".npy") {
        let p = std::path::PathBuf::from(path);
        let h = tokio::task::spawn_blocking(move || crate::npy::read_header(&p))
            .await
            .map_err(|e| e.to_string())??;
        let dtype = h.dtype().map_err(|m| format!("{path}: {m}"))?;
        return Ok(Probe::Npy {
            path: path.to_string(),
            shape: h.shape,
            dtype,
        });
    }
    let (store, apath) = split_zarr_location(path, &job.storage);
    let s = nums_layout::Store::open(&store).map_err(|e| e.to_string())?;
    let opened = nums_layout::StoredArray::open_stamped(&s, &apath).await;
    let (arr, stamp) = match opened {
        Ok(a) => a,
        Err(nums_layout::Error::NotFound { .. }) => {
            // An array of a job whose commit is under way (or was cut short) has no
            // metadata until the commit ends: say so rather than "not found".
            let committing = if local {
                Path::new(path)
                    .parent()
                    .is_some_and(|d| d.join("_commit.json").exists())
            } else {
                let job_dir = apath.rsplit_once('/').map_or("", |(d, _)| d);
                !job_dir.is_empty()
                    && s.head(&format!("{job_dir}/_commit.json"))
                        .await
                        .ok()
                        .flatten()
                        .is_some()
            };
            return Err(if committing {
                format!(
                    "{path}: a run of its job is replacing this array (or that run's commit was \
                     cut short: run the job again, or with --resume, to finish it)"
                )
            } else if local {
                format!("{path} is neither a .npy or .csv file nor a Zarr v3 array (no zarr.json)")
            } else {
                format!("{path}: no Zarr array there (no zarr.json)")
            });
        }
        Err(e) => return Err(e.to_string()),
    };
    let in_place = relative_to(&job.storage, &store, &apath).filter(|_| arr.native);
    Ok(Probe::Zarr {
        store,
        path: apath,
        sparse: !arr.complete,
        meta: arr.meta,
        in_place,
        stamp,
    })
}

/// Splits a Zarr location into its store and the array path in it.
pub fn split_zarr_location(loc: &str, storage: &StoreSpec) -> (StoreSpec, String) {
    if let Some(rest) = loc.strip_prefix("s3://") {
        let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
        (
            StoreSpec {
                url: format!("s3://{bucket}"),
                endpoint: storage.endpoint.clone(),
            },
            path.trim_matches('/').to_string(),
        )
    } else {
        let p = std::path::Path::new(loc);
        let parent = p.parent().unwrap_or(std::path::Path::new("/"));
        let url = url::Url::from_directory_path(parent)
            .map(|u| u.to_string())
            .unwrap_or_default();
        (
            StoreSpec {
                url,
                endpoint: None,
            },
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )
    }
}

/// The path of `path` in `store` relative to the job's store root, if it lies inside it.
pub fn relative_to(job_store: &StoreSpec, store: &StoreSpec, path: &str) -> Option<String> {
    if job_store.endpoint != store.endpoint {
        return None;
    }
    let full = format!(
        "{}/{}",
        store.url.trim_end_matches('/'),
        path.trim_matches('/')
    );
    let root = format!("{}/", job_store.url.trim_end_matches('/'));
    full.strip_prefix(&root)
        .map(str::to_string)
        .filter(|r| !r.is_empty())
}
