//! `podline sim --ground-truth-out FILE`: the ground-truth ledger (what `GET /_sim/ground-truth`
//! answers) copied to a file at start, every `--ground-truth-interval` and once more on shutdown,
//! so people testing their own tools against the sim can audit them after it stopped. Each copy
//! replaces the file atomically (a temporary file in the same directory, synced, then renamed):
//! a reader sees the previous whole ledger or the new one, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use podline_sim::Sim;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Copies the ledger to its file while the sim runs.
pub struct LedgerWriter {
    sim: Sim,
    path: PathBuf,
    stop: CancellationToken,
    periodic: JoinHandle<()>,
}

impl LedgerWriter {
    /// Writes the ledger once (so a path that can't be written fails at start, naming the file),
    /// then again every `every`.
    pub async fn start(sim: Sim, path: PathBuf, every: Duration) -> anyhow::Result<Self> {
        write_ledger(&sim, &path).await?;
        let stop = CancellationToken::new();
        let periodic = tokio::spawn(periodic(sim.clone(), path.clone(), every, stop.clone()));
        Ok(Self {
            sim,
            path,
            stop,
            periodic,
        })
    }

    /// Stops the periodic copies and writes the last one: call it after the sim shut down, so
    /// the file holds everything the sim ever recorded.
    pub async fn finish(self) -> anyhow::Result<()> {
        self.stop.cancel();
        let _ = self.periodic.await;
        write_ledger(&self.sim, &self.path).await
    }
}

async fn periodic(sim: Sim, path: PathBuf, every: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match write_ledger(&sim, &path).await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!(file = %path.display(), "the ground-truth file is written again");
            }
            Ok(()) => {}
            // Said once per failing spell, not at every tick.
            Err(err) if !failing => {
                failing = true;
                tracing::warn!(
                    error = format!("{err:#}"),
                    "cannot update the ground-truth file"
                );
            }
            Err(_) => {}
        }
    }
}

/// Writes the sim's ledger to `path` atomically.
async fn write_ledger(sim: &Sim, path: &Path) -> anyhow::Result<()> {
    let json = sim
        .ground_truth_json()
        .await
        .context("cannot read the ground-truth ledger")?;
    let target = path.to_path_buf();
    tokio::task::spawn_blocking(move || replace_file(&target, &json))
        .await
        .context("the ground-truth writer panicked")?
        .with_context(|| format!("cannot write the ground-truth file {}", path.display()))
}

/// Replaces `path` with `bytes`: written to a temporary file beside it, synced, then renamed
/// over it (rename is atomic within a directory).
fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = dir.join(temp_name);
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_holds_the_new_bytes_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ledger.json");
        replace_file(&path, b"{\"pods\":[]}").expect("first");
        replace_file(&path, b"{\"pods\":[1]}").expect("second");
        assert_eq!(std::fs::read(&path).expect("read"), b"{\"pods\":[1]}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("ledger.json")]);
    }

    #[test]
    fn a_path_in_a_missing_directory_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("missing").join("ledger.json");
        assert!(replace_file(&path, b"{}").is_err());
    }
}
