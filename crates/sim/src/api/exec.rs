//! `GET /api/v1/namespaces/{ns}/pods/{name}/exec` (a command in a running container) and
//! `.../attach` (the running container's output), over the WebSocket remote-command protocol
//! kubectl 1.30+ and the Python client's `stream()` speak.
//!
//! As kube-apiserver 1.32 serves it (read from upstream, not copied):
//! - Before any upgrade, `pkg/registry/core/pod/strategy.go` (`ExecLocation` -> `streamLocation`,
//!   `validateContainer`) looks the pod up (404), checks the container name (400 `container X is
//!   not valid for pod Y`, or `a container name must be specified for pod Y, choose one of: [..]`)
//!   and that the pod has a node (400 `pod Y does not have a host assigned`). A request that is
//!   not an upgrade gets 400 `Upgrade request required` (`UpgradeAwareHandler`).
//! - A client offering `v5.channel.k8s.io` gets the stream translator
//!   (`staging/src/k8s.io/apiserver/pkg/util/proxy/streamtranslator.go`, v5 only), which
//!   upgrades the WebSocket *first* and reports everything the kubelet says on the error
//!   channel: success as a `Status` with `status: Success`; an exit code as `reason:
//!   NonZeroExitCode` with `details.causes: [{reason: ExitCode, message: "N"}]`
//!   (`codeExitToStatusError`); any other failure (the kubelet's `container not found ("c")` for
//!   a container that is not running, `pkg/kubelet/kubelet_pods.go` `GetExec`, seen through
//!   client-go's SPDY upgrade as `unable to upgrade connection: ...`) as an `InternalError`.
//! - Any other offer is proxied to the kubelet (`pkg/kubelet/cri/streaming/remotecommand`:
//!   `websocket.go` serves v4 and the base64 protocols, `exec.go` writes the exit `Status`), which
//!   refuses a container that is not running before upgrading (500, the error as text).
//! - Channels (`staging/src/k8s.io/apimachinery/pkg/util/remotecommand/constants.go`): 0 stdin,
//!   1 stdout, 2 stderr, 3 error, 4 resize, and on `v5.channel.k8s.io` 255 close (`[255, 0]`:
//!   the client's stdin ended, `staging/src/k8s.io/client-go/tools/remotecommand/v5.go`). The
//!   server first sends an empty message on the lowest output channel the client asked for
//!   (`staging/src/k8s.io/apiserver/pkg/util/proxy/websocket.go`), so the client knows the
//!   streams are up. `base64.channel.k8s.io` / `v4.base64.channel.k8s.io` carry the same
//!   frames as text: the channel as an ASCII digit, then base64.
//!
//! What runs (see docs/sim.md "exec"): in the sim's exec mode (`podline sim` with its exec flag) the command runs as a local
//! process in the container's context (its environment as the kubelet resolves it, its volumes
//! at their `mountPath`s when the sim is root, `workingDir`, `PATH` and `HOSTNAME`); otherwise the pod's `sim.podline.io/exec-<container>` annotation scripts the
//! answer: JSON `{"stdout": "..", "stderr": "..", "exitCode": N}` (all optional).

use std::process::Stdio;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::extract::Request;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::{SinkExt, StreamExt};
use http::StatusCode;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::sync::mpsc;

use podline_sim_core::cluster::Cluster;
use podline_sim_core::kubelet::ContainerContext;

use super::exec_fault::{ExecFault, ExecFaultKind, Verdict};
use super::{AppState, RequestInfo};
use crate::status::ApiError;

/// The annotation prefix that scripts an exec's answer when the sim runs no processes.
pub const SCRIPT_ANNOTATION_PREFIX: &str = "sim.podline.io/exec-";

/// Channel numbers of the remote-command protocol (upstream `remotecommand/constants.go`).
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

/// The protocol of kube-apiserver's stream translator (`v5.channel.k8s.io`).
const V5: &str = "v5.channel.k8s.io";

/// The kubelet's WebSocket protocols the sim serves, client's order deciding (the unversioned
/// binary `channel.k8s.io`, whose error channel is plain text, is not served).
const KUBELET_PROTOCOLS: [&str; 3] = [
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "base64.channel.k8s.io",
];

/// The query of an exec request (`PodExecOptions`).
#[derive(Debug, Default)]
struct ExecParams {
    command: Vec<String>,
    container: Option<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

impl ExecParams {
    fn parse(query: Option<&str>) -> Self {
        let pairs = query
            .filter(|q| !q.is_empty())
            .and_then(|q| format!("/?{q}").parse::<http::Uri>().ok())
            .and_then(|uri| {
                axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
                    .ok()
                    .map(|axum::extract::Query(pairs)| pairs)
            })
            .unwrap_or_default();
        let mut params = ExecParams::default();
        for (key, value) in pairs {
            match key.as_str() {
                "command" => params.command.push(value),
                "container" => params.container = Some(value),
                "stdin" => params.stdin = super::query::go_query_bool(&value),
                "stdout" => params.stdout = super::query::go_query_bool(&value),
                "stderr" => params.stderr = super::query::go_query_bool(&value),
                "tty" => params.tty = super::query::go_query_bool(&value),
                _ => {}
            }
        }
        params
    }
}

/// The scripted answer of `sim.podline.io/exec-<container>`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Script {
    #[serde(default)]
    stdout: String,
    #[serde(default)]
    stderr: String,
    #[serde(default)]
    exit_code: i32,
}

/// Serves `pods/exec` (GET or POST, as the real server routes both).
pub async fn pod_exec(
    state: &AppState,
    info: &RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    serve(state, info, req, false).await
}

/// Serves `pods/attach`: the same checks and protocols as exec (`AttachLocation` shares
/// `streamLocation`), then the container's output from now on, on stdout, until it exits
/// (Success). The sim's containers have no stdin to attach to: stdin frames are ignored.
pub async fn pod_attach(
    state: &AppState,
    info: &RequestInfo,
    req: Request,
) -> Result<Response, ApiError> {
    serve(state, info, req, true).await
}

async fn serve(
    state: &AppState,
    info: &RequestInfo,
    req: Request,
    attach: bool,
) -> Result<Response, ApiError> {
    let params = ExecParams::parse(req.uri().query());
    let pod = state
        .cluster()
        .get_pod(&info.namespace, &info.name)
        .ok_or_else(|| ApiError::not_found("", "pods", &info.name))?;
    let container = validate_container(&pod, params.container.as_deref(), &info.name)?;
    let spec = pod.spec.clone().unwrap_or_default();
    if spec.node_name.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::bad_request(format!(
            "pod {} does not have a host assigned",
            info.name
        )));
    }
    let (mut parts, _body) = req.into_parts();
    let offered: Vec<String> = parts
        .headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .collect();
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    // A v5 offer goes to kube-apiserver's stream translator, which speaks v5 only
    // (`wsstream.IsWebSocketRequestWithStreamCloseProtocol` picks it); anything else is proxied to
    // the kubelet, whose WebSocket server (`pkg/kubelet/cri/streaming/remotecommand/websocket.go`)
    // speaks the v4 and base64 protocols.
    let translated = offered.iter().any(|p| p == V5);
    let protocol = if translated {
        Some(V5.to_owned())
    } else {
        offered
            .iter()
            .find(|p| KUBELET_PROTOCOLS.contains(&p.as_str()))
            .cloned()
    };
    let mut answer = Answer::choose(state, &pod, &container);
    if attach && !matches!(answer, Answer::NotRunning) {
        answer = Answer::Attach(pod.metadata.uid.clone().unwrap_or_default());
    }
    if !translated && matches!(answer, Answer::NotRunning) {
        // The kubelet refuses before upgrading (`streaming.WriteError`: 500, the error as text),
        // and the apiserver's UpgradeAwareHandler passes its answer through.
        return Ok((
            StatusCode::INTERNAL_SERVER_ERROR,
            [(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("container not found (\"{container}\")"),
        )
            .into_response());
    }
    let Some(protocol) = protocol else {
        // golang.org/x/net/websocket answers a failed subprotocol handshake with 403.
        return Ok((StatusCode::FORBIDDEN, Body::empty()).into_response());
    };
    let session = Session {
        base64: protocol.contains("base64"),
        v5: translated,
        params,
        container,
        fault: parts.extensions.remove::<ExecFault>(),
    };
    let cluster = state.cluster().clone();
    Ok(upgrade
        .protocols([protocol])
        .on_upgrade(move |socket| session.run(socket, answer, cluster)))
}

/// kube's `validateContainer` (`pkg/registry/core/pod/strategy.go`): the named container must be
/// one of the pod's containers, init or ephemeral containers; none named picks the only one.
fn validate_container(pod: &Pod, name: Option<&str>, pod_name: &str) -> Result<String, ApiError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    let init: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    let ephemeral: Vec<&str> = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    match name.filter(|n| !n.is_empty()) {
        Some(n) if names.iter().chain(&init).chain(&ephemeral).any(|c| *c == n) => Ok(n.to_owned()),
        Some(n) => Err(ApiError::bad_request(format!(
            "container {n} is not valid for pod {pod_name}"
        ))),
        None if names.len() == 1 => Ok(names[0].to_owned()),
        None if names.is_empty() => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {pod_name}"
        ))),
        None => {
            let mut message = format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                names.join(" ")
            );
            if !init.is_empty() {
                message.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            Err(ApiError::bad_request(message))
        }
    }
}

/// How the exec is answered, decided before the upgrade from the pod as it is now.
enum Answer {
    /// The container is not running: the kubelet's `container not found ("c")`.
    NotRunning,
    /// A local process with this container's context (its hostname, environment and mounts).
    Process(Box<Container>, String, Box<ContainerContext>),
    /// The annotation's script.
    Script(Result<Script, String>),
    /// Neither exec mode nor a script: nothing can run the command.
    Nothing,
    /// `pods/attach`: the running container's output (the log of this pod uid) from now on.
    Attach(String),
}

impl Answer {
    fn choose(state: &AppState, pod: &Pod, container: &str) -> Answer {
        let running = pod.status.as_ref().is_some_and(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
                .chain(s.ephemeral_container_statuses.iter().flatten())
                .any(|cs| {
                    cs.name == container && cs.state.as_ref().is_some_and(|st| st.running.is_some())
                })
        });
        if !running {
            return Answer::NotRunning;
        }
        let key = format!("{SCRIPT_ANNOTATION_PREFIX}{container}");
        if let Some(script) = pod.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
            return Answer::Script(serde_json::from_str(script).map_err(|e| {
                format!(
                    "annotation {key} is not a valid exec script ({e}); expected JSON \
                     {{\"stdout\": \"..\", \"stderr\": \"..\", \"exitCode\": N}}"
                )
            }));
        }
        if state.exec_processes() {
            let spec = pod.spec.clone().unwrap_or_default();
            let found = spec
                .containers
                .into_iter()
                .chain(spec.init_containers.into_iter().flatten())
                .find(|c| c.name == container);
            let hostname = spec
                .hostname
                .or(pod.metadata.name.clone())
                .unwrap_or_default();
            if let Some(c) = found {
                let context =
                    podline_sim_core::kubelet::container_context(state.cluster(), pod, &c);
                return Answer::Process(Box::new(c), hostname, Box::new(context));
            }
        }
        Answer::Nothing
    }
}

/// One upgraded exec stream.
struct Session {
    base64: bool,
    v5: bool,
    params: ExecParams,
    container: String,
    /// A stream fault the fault layer put on this session (`super::exec_fault`).
    fault: Option<ExecFault>,
}

/// The length of the stdout/stderr data a frame carries (0 for any other frame).
fn output_len(msg: &Message) -> usize {
    match msg {
        Message::Binary(b) => match b.split_first() {
            Some((&(STDOUT | STDERR), rest)) => rest.len(),
            _ => 0,
        },
        Message::Text(t) => match t.as_str().as_bytes().split_first() {
            Some((b'1' | b'2', rest)) => rest.len() / 4 * 3,
            _ => 0,
        },
        _ => 0,
    }
}

/// Pause between the last frame sent and a cut, so the client has read it (a reset makes the
/// peer's kernel discard unread data).
const CUT_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// Sends the session's frames from `out_rx` to the client, through `fault` if any. A stalled
/// session keeps the connection open until `client_gone` fires.
async fn write_frames(
    mut sink: futures::stream::SplitSink<WebSocket, Message>,
    mut out_rx: mpsc::Receiver<Message>,
    mut fault: Option<ExecFault>,
    client_gone: std::sync::Arc<tokio::sync::Notify>,
) {
    let mut stalled = false;
    while let Some(msg) = out_rx.recv().await {
        if stalled {
            continue;
        }
        let close = matches!(msg, Message::Close(_));
        let verdict = match fault.as_mut() {
            Some(f) => f.admit(output_len(&msg)),
            None => Verdict::Send,
        };
        let (send, act) = match verdict {
            Verdict::Send => (true, None),
            Verdict::SendThenAct(kind) => (true, Some(kind)),
            Verdict::Act(kind) => (false, Some(kind)),
        };
        if send && (sink.send(msg).await.is_err() || (close && act.is_none())) {
            break;
        }
        match act {
            None => {}
            Some(ExecFaultKind::Stall) => stalled = true,
            Some(ExecFaultKind::EndEarly) => {
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: axum::extract::ws::close_code::NORMAL,
                        reason: "".into(),
                    })))
                    .await;
                break;
            }
            Some(ExecFaultKind::Reset) => {
                let _ = sink.flush().await;
                tokio::time::sleep(CUT_DELAY).await;
                // Without a connection to cut (in process), the socket is just closed.
                let _ = fault.as_ref().map(ExecFault::cut);
                break;
            }
        }
    }
    if stalled {
        client_gone.notified().await;
    }
    let _ = sink.close().await;
}

/// What ended the command: the Status JSON written on the error channel.
fn success_status() -> serde_json::Value {
    serde_json::json!({"metadata": {}, "status": "Success"})
}

/// A non-zero exit code as a `Status`. The kubelet's `ServeExec`
/// (`pkg/kubelet/cri/streaming/remotecommand/exec.go`) wraps the runtime's error (containerd's
/// `error executing command [argv], exit code N`); on v5, streamtranslator.go's
/// `codeExitToStatusError` wraps what client-go's `errorDecoderV4` made of that
/// (`command terminated with exit code N`).
fn exit_status(code: i32, command: &[String], v5: bool) -> serde_json::Value {
    let inner = if v5 {
        format!("command terminated with exit code {code}")
    } else {
        format!(
            "error executing command [{}], exit code {code}",
            command.join(" ")
        )
    };
    serde_json::json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: {inner}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// `apierrors.NewInternalError(err)` as JSON.
fn internal_status(err: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("Internal error occurred: {err}"),
        "reason": "InternalError",
        "details": {"causes": [{"message": err}]},
        "code": 500,
    })
}

impl Session {
    fn frame(&self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            let mut text = String::with_capacity(1 + data.len() * 4 / 3 + 4);
            text.push(char::from(b'0' + channel));
            text.push_str(&BASE64.encode(data));
            Message::Text(text.into())
        } else {
            let mut bytes = Vec::with_capacity(1 + data.len());
            bytes.push(channel);
            bytes.extend_from_slice(data);
            Message::Binary(bytes.into())
        }
    }

    async fn run(self, socket: WebSocket, answer: Answer, cluster: Cluster) {
        let (sink, mut incoming) = socket.split();
        let (out_tx, out_rx) = mpsc::channel::<Message>(64);
        let client_gone = std::sync::Arc::new(tokio::sync::Notify::new());
        let writer = tokio::spawn(write_frames(
            sink,
            out_rx,
            self.fault.clone(),
            client_gone.clone(),
        ));
        let first = if self.params.stdout {
            STDOUT
        } else if self.params.stderr {
            STDERR
        } else {
            ERROR
        };
        let _ = out_tx.send(self.frame(first, &[])).await;
        let (stdin_tx, stdin_rx) = mpsc::channel::<Option<Vec<u8>>>(16);
        let (base64, v5) = (self.base64, self.v5);
        // Fires when the client's side of the socket ends (close or error): the process goes.
        let (gone_tx, gone_rx) = tokio::sync::oneshot::channel::<()>();
        let reader = tokio::spawn(async move {
            let _gone = gone_tx;
            let _notify = NotifyOnDrop(client_gone);
            while let Some(Ok(msg)) = incoming.next().await {
                // x/net/websocket's `Message.Receive` into bytes takes text and binary frames
                // alike (the Python client sends stdin as text frames).
                let raw = match msg {
                    Message::Binary(b) => b.to_vec(),
                    Message::Text(t) => t.as_str().as_bytes().to_vec(),
                    Message::Close(_) => break,
                    _ => continue,
                };
                let data = if base64 {
                    let Some((&ch, rest)) = raw.split_first() else {
                        continue;
                    };
                    let Ok(mut decoded) = BASE64.decode(rest) else {
                        continue;
                    };
                    decoded.insert(0, ch.wrapping_sub(b'0'));
                    decoded
                } else {
                    raw
                };
                match data.split_first() {
                    Some((&CLOSE, [STDIN])) if v5 => {
                        let _ = stdin_tx.send(None).await;
                    }
                    Some((&STDIN, rest)) => {
                        // No receiver: the command does not read stdin (any more).
                        let _ = stdin_tx.send(Some(rest.to_vec())).await;
                    }
                    // Resize (4) and anything else: no terminal to resize.
                    _ => {}
                }
            }
            // The client went away: end stdin (a process reading it sees EOF).
            let _ = stdin_tx.send(None).await;
        });
        let status = match answer {
            Answer::NotRunning => internal_status(&format!(
                "unable to upgrade connection: container not found (\"{}\")",
                self.container
            )),
            Answer::Nothing => internal_status(&format!(
                "error executing command in container: podline sim runs no process for container \
                 \"{}\": start the sim in exec mode, or script the answer with the {}{} annotation",
                self.container, SCRIPT_ANNOTATION_PREFIX, self.container
            )),
            Answer::Script(Err(e)) => {
                internal_status(&format!("error executing command in container: {e}"))
            }
            Answer::Script(Ok(script)) => {
                if self.params.stdout && !script.stdout.is_empty() {
                    let _ = out_tx
                        .send(self.frame(STDOUT, script.stdout.as_bytes()))
                        .await;
                }
                if self.params.stderr && !script.stderr.is_empty() {
                    let channel = if self.params.tty { STDOUT } else { STDERR };
                    let _ = out_tx
                        .send(self.frame(channel, script.stderr.as_bytes()))
                        .await;
                }
                if script.exit_code == 0 {
                    success_status()
                } else {
                    exit_status(script.exit_code, &self.params.command, self.v5)
                }
            }
            Answer::Attach(uid) => {
                let query = podline_sim_core::logs::LogQuery {
                    follow: true,
                    timestamps: false,
                    since_time: None,
                    since_seconds: None,
                    tail_lines: Some(0),
                    limit_bytes: None,
                };
                let mut lines = cluster.logs().stream(&uid, &self.container, query);
                let mut gone = gone_rx;
                loop {
                    tokio::select! {
                        chunk = lines.next() => match chunk {
                            Some(bytes) if self.params.stdout => {
                                let _ = out_tx.send(self.frame(STDOUT, &bytes)).await;
                            }
                            Some(_) => {}
                            None => break,
                        },
                        _ = &mut gone => break,
                    }
                }
                success_status()
            }
            Answer::Process(container, hostname, context) => {
                self.process(&container, &hostname, &context, &out_tx, stdin_rx, gone_rx)
                    .await
            }
        };
        let _ = out_tx
            .send(self.frame(ERROR, status.to_string().as_bytes()))
            .await;
        // A normal closure (1000): clients read it as the end of every stream (a close without
        // a code is an error to gorilla/websocket, kubectl's library).
        let _ = out_tx
            .send(Message::Close(Some(CloseFrame {
                code: axum::extract::ws::close_code::NORMAL,
                reason: "".into(),
            })))
            .await;
        drop(out_tx);
        let _ = writer.await;
        reader.abort();
    }

    /// Runs the command as a child process in `container`'s context and streams it.
    async fn process(
        &self,
        container: &Container,
        hostname: &str,
        context: &ContainerContext,
        out: &mpsc::Sender<Message>,
        stdin_rx: mpsc::Receiver<Option<Vec<u8>>>,
        gone: tokio::sync::oneshot::Receiver<()>,
    ) -> serde_json::Value {
        let Some((program, args)) = self.params.command.split_first() else {
            return internal_status(
                "error executing command in container: the request names no command \
                 (expected at least one `command` query parameter)",
            );
        };
        // In a PID namespace of its own where one can be made (sandbox::pid_namespace_prefix:
        // a command written for a container must not signal the host's processes).
        let wrapper = podline_sim_core::kubelet::sandbox::pid_namespace_prefix()
            .filter(|_| on_path(program))
            .and_then(|prefix| prefix.split_first());
        let mut cmd = match wrapper {
            Some((unshare, flags)) => {
                let mut cmd = Command::new(unshare);
                cmd.args(flags.iter().copied()).arg(program).args(args);
                cmd
            }
            None => {
                let mut cmd = Command::new(program);
                cmd.args(args);
                cmd
            }
        };
        cmd.env_clear()
            .stdin(if self.params.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(if self.params.stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(if self.params.stderr {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .kill_on_drop(true);
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.env("HOSTNAME", hostname);
        // As the exec-mode kubelet resolves them (never logged).
        for (name, value) in &context.env {
            cmd.env(name, value);
        }
        if let Some(dir) = &container.working_dir {
            cmd.current_dir(dir);
        }
        if let Err(e) = podline_sim_core::kubelet::sandbox::isolate(&mut cmd, &context.mounts) {
            return internal_status(&format!(
                "error executing command in container: failed to enter the container's mounts: {e}"
            ));
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                return internal_status(&format!(
                    "error executing command in container: failed to exec in container: \
                     failed to start exec: OCI runtime exec failed: exec failed: unable to start \
                     container process: exec: \"{program}\": {e}: unknown"
                ));
            }
        };
        let stdin = child.stdin.take();
        let feed = tokio::spawn(feed_stdin(stdin, stdin_rx));
        let err_channel = if self.params.tty { STDOUT } else { STDERR };
        let pumps = futures::future::join(
            pump(child.stdout.take(), STDOUT, self, out),
            pump(child.stderr.take(), err_channel, self, out),
        );
        let ran = async { tokio::join!(child.wait(), pumps) };
        let waited = tokio::select! {
            (waited, _) = ran => waited,
            // The client went away: returning drops the child, which kills it (kill_on_drop).
            _ = gone => {
                feed.abort();
                return internal_status("error executing command in container: the client went away");
            }
        };
        feed.abort();
        match waited {
            Ok(status) => {
                let code = status.code().unwrap_or_else(|| {
                    use std::os::unix::process::ExitStatusExt;
                    128 + status.signal().unwrap_or(0)
                });
                if code == 0 {
                    success_status()
                } else {
                    exit_status(code, &self.params.command, self.v5)
                }
            }
            Err(e) => internal_status(&format!("error executing command in container: {e}")),
        }
    }
}

/// Wakes the writer of a stalled session when the reader ends (the client went away).
struct NotifyOnDrop(std::sync::Arc<tokio::sync::Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// Writes the client's stdin frames into the child until the client closes stdin.
async fn feed_stdin(stdin: Option<ChildStdin>, mut rx: mpsc::Receiver<Option<Vec<u8>>>) {
    let Some(mut stdin) = stdin else { return };
    while let Some(Some(chunk)) = rx.recv().await {
        if stdin.write_all(&chunk).await.is_err() {
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

/// Forwards one output pipe of the child to `channel` until EOF.
async fn pump<R: AsyncRead + Unpin>(
    pipe: Option<R>,
    channel: u8,
    session: &Session,
    out: &mpsc::Sender<Message>,
) {
    let Some(mut pipe) = pipe else { return };
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if out.send(session.frame(channel, &buf[..n])).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Whether `program` names a file that exists (a path), or one found on `PATH`: checked before
/// the command is wrapped in `unshare`, so that a missing program still fails to start with the
/// runtime's message rather than as a failed `unshare`.
fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_params_read_repeated_commands_and_go_booleans() {
        let p = ExecParams::parse(Some(
            "command=sh&command=-c&command=echo%20hi&container=main&stdin=true&stdout=1&stderr=false",
        ));
        assert_eq!(p.command, ["sh", "-c", "echo hi"]);
        assert_eq!(p.container.as_deref(), Some("main"));
        assert!(p.stdin && p.stdout && !p.stderr && !p.tty);
    }

    #[test]
    fn exec_exit_status_is_the_translators_non_zero_exit_code_status() {
        let s = exit_status(3, &["sh".into(), "-c".into(), "exit 3".into()], false);
        assert_eq!(
            s["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(s["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(s["details"]["causes"][0]["message"], "3");
    }
}
