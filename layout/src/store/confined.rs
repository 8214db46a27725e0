//! A local folder store that never follows a symbolic link out of its folder (one concern,
//! as [`super::CountingStore`] has one). object_store's `LocalFileSystem` follows links
//! everywhere: a link inside the store to a folder outside it made `rm --job` delete the
//! files out there, and reads and writes through it reach them too. Here a key whose path
//! leads out of the folder through a link (or into a link that leads nowhere) is refused
//! with [`escapes`]'s reason, and listings walk the folder without following links: what
//! lies behind a link is not in the store.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// Why `file` (a path in the store's folder `root`, both resolved) may not be read or
/// written: the part of it that exists leads out of `root` through a symbolic link, or is
/// a link that leads nowhere. `None` when it stays inside.
pub(crate) fn escapes(root: &std::path::Path, file: &std::path::Path) -> Option<String> {
    let mut at = file;
    // Looks again at a path that changed under the check, a bounded number of times.
    let mut again = 64;
    loop {
        if std::fs::symlink_metadata(at).is_ok() {
            return match std::fs::canonicalize(at) {
                Ok(real) if real.starts_with(root) => None,
                Ok(real) => Some(format!(
                    "leads out of the store through a symbolic link (to {}); nums-cloud never follows one",
                    real.display()
                )),
                // A link that leads nowhere; or a folder removed since it was seen (a
                // prefix deleted beside this write prunes emptied folders, and another
                // write may make it again): look again.
                Err(e) => match std::fs::symlink_metadata(at) {
                    Ok(m) if m.is_symlink() => Some(format!(
                        "{} is a symbolic link that leads nowhere; nums-cloud never follows one",
                        at.display()
                    )),
                    Ok(_) if again == 0 => {
                        Some(format!("{} cannot be resolved: {e}", at.display()))
                    }
                    _ => {
                        again -= 1;
                        continue;
                    }
                },
            };
        }
        match at.parent() {
            Some(p) if p.starts_with(root) => at = p,
            _ => return None,
        }
    }
}

/// `LocalFileSystem` confined to its folder.
#[derive(Debug)]
pub(crate) struct ConfinedFs {
    fs: Arc<LocalFileSystem>,
    /// The store's folder, resolved (as `LocalFileSystem` resolves it).
    root: PathBuf,
}

impl ConfinedFs {
    pub(crate) fn new(fs: Arc<LocalFileSystem>, root: PathBuf) -> ConfinedFs {
        ConfinedFs { fs, root }
    }

    /// The file of `location`, or the error that refuses it.
    fn confine(&self, location: &Path) -> Result<PathBuf> {
        let file = folder_of(&self.root, location)?;
        match escapes(&self.root, &file) {
            None => Ok(file),
            Some(why) => Err(object_store::Error::Generic {
                store: "LocalFileSystem",
                source: format!("{location}: {why}").into(),
            }),
        }
    }
}

/// The folder or file of `location` under `root` (as `LocalFileSystem` maps keys: the
/// parts as URL path segments, percent-decoded).
fn folder_of(root: &std::path::Path, location: &Path) -> Result<PathBuf> {
    let bad = |what: String| object_store::Error::Generic {
        store: "LocalFileSystem",
        source: what.into(),
    };
    let mut url = url::Url::from_directory_path(root)
        .map_err(|_| bad(format!("{} is not an absolute folder", root.display())))?;
    url.path_segments_mut()
        .map_err(|_| bad("not a folder URL".into()))?
        .pop_if_empty()
        .extend(location.parts());
    url.to_file_path()
        .map_err(|_| bad(format!("{location}: not a file path")))
}

/// Every file under `dir` (in `root`), links not followed, as `LocalFileSystem` lists
/// them: keys relative to `root`, staged leftovers of unfinished puts (`name#3`) left out.
fn walk(root: &std::path::Path, dir: &std::path::Path) -> Result<Vec<ObjectMeta>> {
    let base = url::Url::from_directory_path(root).map_err(|_| object_store::Error::Generic {
        store: "LocalFileSystem",
        source: format!("{} is not an absolute folder", root.display()).into(),
    })?;
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .follow_links(false)
        .follow_root_links(false)
    {
        let entry = match entry {
            Ok(e) => e,
            // Gone while listed, or never there: nothing to list.
            Err(e)
                if e.io_error()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) =>
            {
                continue;
            }
            Err(e) => {
                return Err(object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(e),
                });
            }
        };
        if !entry.file_type().is_file() {
            continue; // folders are walked; links are not in the store
        }
        let staged = entry
            .file_name()
            .to_str()
            .and_then(|n| n.rsplit_once('#'))
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if staged {
            continue;
        }
        let Ok(url) = url::Url::from_file_path(entry.path()) else {
            continue;
        };
        let Some(rel) = url.path().strip_prefix(base.path()) else {
            continue;
        };
        let Ok(location) = Path::from_url_path(rel) else {
            continue; // a name object_store cannot key (as its own listing skips)
        };
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        out.push(ObjectMeta {
            location,
            last_modified: meta
                .modified()
                .unwrap_or_else(|_| std::time::SystemTime::now())
                .into(),
            size: meta.len(),
            e_tag: None,
            version: None,
        });
    }
    Ok(out)
}

impl std::fmt::Display for ConfinedFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Confined({})", self.fs)
    }
}

#[async_trait::async_trait]
impl ObjectStore for ConfinedFs {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.confine(location)?;
        self.fs.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.confine(location)?;
        self.fs.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.confine(location)?;
        self.fs.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.confine(location)?;
        self.fs.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let me = ConfinedFs::new(self.fs.clone(), self.root.clone());
        let checked = locations
            .map(move |l| {
                let l = l?;
                me.confine(&l)?;
                Ok(l)
            })
            .boxed();
        self.fs.delete_stream(checked)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let root = self.root.clone();
        let dir = self.confine(&prefix.cloned().unwrap_or_default());
        futures::stream::once(async move {
            let dir = dir?;
            tokio::task::spawn_blocking(move || walk(&root, &dir))
                .await
                .map_err(|e| object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(e),
                })?
        })
        .map_ok(|metas| futures::stream::iter(metas.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let offset = offset.clone();
        self.list(prefix)
            .try_filter(move |m| futures::future::ready(m.location > offset))
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.confine(&prefix.cloned().unwrap_or_default())?;
        self.fs.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.confine(from)?;
        self.confine(to)?;
        self.fs.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.confine(from)?;
        self.confine(to)?;
        self.fs.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::escapes;

    /// A folder removed while a write's path is checked is not a link that leads nowhere
    /// (a session's background deletion pruned `in/` beside a write of a new input under
    /// it, and the write failed with that message).
    #[test]
    fn a_folder_removed_during_the_check_is_not_a_dangling_link() {
        let root = std::env::temp_dir().join(format!("nums-confined-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let dir = root.join("in").join("7");
        let file = dir.join("c").join("0");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::create_dir_all(&dir);
                    let _ = std::fs::remove_dir(&dir);
                    let _ = std::fs::remove_dir(dir.parent().unwrap());
                }
            })
        };
        let mut wrong = None;
        for _ in 0..20_000 {
            if let Some(e) = escapes(&root, &file) {
                wrong = Some(e);
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        churn.join().unwrap();
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(wrong, None);
    }
}
