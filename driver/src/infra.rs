//! `--infra terraform-output.json`: the deployment that `infra/` made, as
//! `terraform output -json` prints it. It supplies what a job file leaves out: the Lambda
//! function (and `backend = "lambda"`), the storage URL, the function's memory (what
//! batches are planned to fit), and the region.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};

use crate::job::{Backend, Defaults};

/// A deployment's outputs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Infra {
    pub file: PathBuf,
    pub function_name: String,
    /// `s3://bucket/prefix`.
    pub storage_url: String,
    pub region: Option<String>,
    /// The AWS profile it was deployed with (`~/.aws/config`), when the outputs say it.
    pub profile: Option<String>,
    /// The function's memory, when the outputs say it.
    pub memory_mb: Option<u64>,
    /// The function's reserved concurrency, when the outputs say it (and it is reserved).
    pub reserved_concurrency: Option<u64>,
}

impl Infra {
    pub(crate) fn load(path: &Path) -> anyhow::Result<Infra> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("{}: cannot read: {e}", path.display()))?;
        Infra::parse(path, &text)
    }

    /// Takes `{"key": {"value": ...}}` (terraform output -json) or `{"key": "..."}`.
    pub(crate) fn parse(path: &Path, text: &str) -> anyhow::Result<Infra> {
        let file = path.display();
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            anyhow!("{file}: not JSON ({e}); make it with `terraform output -json > {file}`")
        })?;
        if !v.is_object() {
            bail!("{file}: expected the object that `terraform output -json` prints");
        }
        let memory_mb = match v.get("memory_mb").map(|x| x.get("value").unwrap_or(x)) {
            None => None,
            Some(m) => Some(
                m.as_u64()
                    .or_else(|| m.as_str().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| anyhow!("{file}: memory_mb: expected a number, found {m}"))
                    .and_then(|m| {
                        let s = crate::config::Setting::MemoryMb;
                        s.check(i64::try_from(m).unwrap_or(i64::MAX))
                            .map_err(|r| anyhow!("{file}: memory_mb: {r}"))
                    })?,
            ),
        };
        // Terraform's -1 (or null) is "no reservation": the job file's or default workers.
        let reserved_concurrency = match v
            .get("reserved_concurrency")
            .map(|x| x.get("value").unwrap_or(x))
        {
            None | Some(serde_json::Value::Null) => None,
            Some(r) => match r
                .as_i64()
                .or_else(|| r.as_str().and_then(|s| s.parse().ok()))
            {
                Some(n) if n < 0 => None,
                Some(n) if n >= 1 => Some(n as u64),
                _ => bail!(
                    "{file}: reserved_concurrency: expected a positive number or -1, found {r}"
                ),
            },
        };
        let get = |key: &str| -> anyhow::Result<Option<String>> {
            let Some(x) = v.get(key) else {
                return Ok(None);
            };
            let x = x.get("value").unwrap_or(x);
            match x.as_str() {
                Some(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
                _ => bail!("{file}: {key}: expected a non-empty string, found {x}"),
            }
        };
        let function_name = get("function_name")?.ok_or_else(|| {
            anyhow!("{file}: no function_name output (is this the output of infra/examples/basic?)")
        })?;
        let storage_url = match (get("storage_url")?, get("bucket")?) {
            (Some(u), _) => u,
            (None, Some(b)) => format!("s3://{b}"),
            (None, None) => bail!("{file}: neither a storage_url nor a bucket output"),
        };
        if !storage_url.starts_with("s3://") {
            bail!("{file}: storage_url: {storage_url:?} is not an s3:// URL");
        }
        Ok(Infra {
            file: path.to_path_buf(),
            function_name,
            storage_url,
            region: get("region")?,
            profile: get("profile")?,
            memory_mb,
            reserved_concurrency,
        })
    }

    /// The job-file defaults this deployment stands for.
    pub(crate) fn defaults(&self) -> Defaults {
        Defaults {
            backend: Backend::Lambda,
            function: self.function_name.clone(),
            storage_url: self.storage_url.clone(),
            memory_mb: self.memory_mb.unwrap_or(Defaults::default().memory_mb),
            // As many workers as the function may run at once (Lambda throttles the rest).
            workers: self
                .reserved_concurrency
                .map(|r| r.min(*crate::config::Setting::Workers.range().end())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Job;

    const OUT: &str = r#"{
      "bucket": {"sensitive": false, "type": "string", "value": "nums-b"},
      "function_name": {"sensitive": false, "type": "string", "value": "nums-fn"},
      "region": {"sensitive": false, "type": "string", "value": "eu-west-1"},
      "profile": {"sensitive": false, "type": "string", "value": "research"},
      "storage_url": {"sensitive": false, "type": "string", "value": "s3://nums-b/jobs"},
      "memory_mb": {"sensitive": false, "type": "number", "value": 3008},
      "reserved_concurrency": {"sensitive": false, "type": "number", "value": 64}
    }"#;

    #[test]
    fn reads_terraform_output_json() {
        let i = Infra::parse(Path::new("tf.json"), OUT).unwrap();
        assert_eq!(i.function_name, "nums-fn");
        assert_eq!(i.storage_url, "s3://nums-b/jobs");
        assert_eq!(i.region.as_deref(), Some("eu-west-1"));
        assert_eq!(i.profile.as_deref(), Some("research"));
        assert_eq!(i.memory_mb, Some(3008));
        // Plain strings and a bucket alone do too.
        let i = Infra::parse(
            Path::new("tf.json"),
            r#"{"function_name": "f", "bucket": "b"}"#,
        )
        .unwrap();
        assert_eq!((i.storage_url.as_str(), i.region), ("s3://b", None));
    }

    #[test]
    fn errors_name_the_file_and_key() {
        let e = Infra::parse(Path::new("tf.json"), r#"{"bucket": {"value": "b"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tf.json") && e.contains("function_name"), "{e}");
        let e = Infra::parse(Path::new("tf.json"), r#"{"function_name": {"value": ""}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tf.json: function_name"), "{e}");
        let e = Infra::parse(Path::new("tf.json"), r#"{"function_name": "f"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("storage_url") && e.contains("bucket"), "{e}");
        let e = Infra::parse(
            Path::new("tf.json"),
            r#"{"function_name": "f", "bucket": "b", "memory_mb": {"value": 64}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("tf.json: memory_mb"), "{e}");
        let e = Infra::parse(Path::new("tf.json"), "[1]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("tf.json"), "{e}");
        let e = Infra::parse(Path::new("tf.json"), "not json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("terraform output -json"), "{e}");
    }

    /// The deployment fills what the job file leaves out; what it sets wins.
    #[test]
    fn job_file_wins_over_infra() {
        let d = Infra::parse(Path::new("tf.json"), OUT).unwrap().defaults();
        let bare = "[arrays]\nx = { zeros = [2] }\n";
        let j = Job::parse_with(Path::new("/tmp/j/job.toml"), bare, &d).unwrap();
        assert_eq!(j.compute.backend, Backend::Lambda);
        assert_eq!(j.compute.function, "nums-fn");
        assert_eq!(j.storage.url, "s3://nums-b/jobs");
        assert_eq!(j.compute.memory_mb, 3008);
        // As many workers as the deployment reserved; -1 (unreserved) leaves the default.
        assert_eq!(j.compute.workers, 64);
        let unreserved = OUT.replace("\"value\": 64", "\"value\": -1");
        let d2 = Infra::parse(Path::new("tf.json"), &unreserved)
            .unwrap()
            .defaults();
        let j2 = Job::parse_with(Path::new("/tmp/j/job.toml"), bare, &d2).unwrap();
        assert_eq!(j2.compute.workers, 2);
        let e = Infra::parse(
            Path::new("tf.json"),
            &OUT.replace("\"value\": 64", "\"value\": 0"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("tf.json: reserved_concurrency"), "{e}");
        let set = "[storage]\nurl = \"file://d\"\n[compute]\nbackend = \"local\"\nfunction = \"mine\"\nworkers = 3\n[arrays]\nx = { zeros = [2] }\n";
        let j = Job::parse_with(Path::new("/tmp/j/job.toml"), set, &d).unwrap();
        assert_eq!(j.compute.backend, Backend::Local);
        assert_eq!(j.compute.workers, 3);
        assert_eq!(j.compute.function, "mine");
        assert_eq!(j.storage.url, "file:///tmp/j/d/");
    }
}
