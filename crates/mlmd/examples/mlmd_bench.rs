//! Pods/s recorded into the real MLMD through `tests/mlmd_server.py`, by the
//! KFP writer alone (no Kubernetes): each pod is seen Running, then Succeeded
//! with one output; every other pod consumes the previous one's output.
//!
//! `cargo run --release -p podline-mlmd --example mlmd_bench -- [PODS]`
//! (needs `pip install -r crates/mlmd/tests/requirements.txt`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use podline_mlmd::kfp::fixture::{Step, component_spec};
use podline_mlmd::kfp::{KfpWriter, classify};
use podline_mlmd::{MlmdClient, MlmdClientConfig};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pods: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let dir = tempfile::tempdir()?;
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mlmd_server.py");
    let mut child = Command::new("python3")
        .arg(server)
        .arg("--db")
        .arg(dir.path().join("bench.db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
    let port: u16 = line.trim().trim_start_matches("LISTENING ").parse()?;
    let client = MlmdClient::new(&MlmdClientConfig::new("127.0.0.1", port))?;
    let writer = KfpWriter::new(client.clone(), 10_000, 10_000);
    let start = Instant::now();
    for i in 0..pods {
        let wf = format!("wf-{}", i / 10);
        let mut step = Step::new("default", &wf, &format!("s{i}"));
        step.component_spec = Some(component_spec("Step", &[("out", "Dataset")]));
        if i % 10 != 0 {
            let prev = Step::new("default", &wf, &format!("s{}", i - 1));
            step.inputs = vec![("in".into(), prev.key("out"))];
        }
        step.outputs_on_pod = Some(vec![("out".into(), step.key("out"))]);
        let mut pod =
            classify(&step.pod(Some(&format!("uid-{i}")))).map_err(|s| format!("{s:?}"))?;
        pod.phase = "Running".into();
        writer.record(&pod, false).await?;
        pod.phase = "Succeeded".into();
        writer.record(&pod, false).await?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{pods} pods in {secs:.2} s: {:.0} pods/s, {:.2} MLMD calls and {:.2} write transactions per pod",
        pods as f64 / secs,
        client.calls() as f64 / pods as f64,
        client.writes() as f64 / pods as f64
    );
    let _ = child.kill();
    Ok(())
}
