//! A store password never reaches any output: every channel of `record`, `ui`, `runs`, `pods`
//! and `show` (stdout, stderr at trace level, error texts, `--help`, the UI's pages and JSON) is
//! searched for a marker password given in both PostgreSQL forms (`user:PASSWORD@` and
//! `?password=`). The PostgreSQL server at 127.0.0.1:5432 trusts local connections, so a
//! password in the URL is accepted (and ignored) and the success paths run for real; a missing
//! database makes the open fail for the error paths.
//!
//! Also here, the other read-side hardening of the same pass: readers never create a store
//! (`runs --db typo.db`), read a file they may not write, and name the true cause when SQLite
//! cannot create its `-shm` file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ui/support.rs"]
#[allow(dead_code)]
mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use podline_store::{Batch, StoreOp};
use podline_testkit::db::{Backend, TestDb};
use podline_testkit::{kubeconfig_file, start_sim, test_config};
use support::{BIN, UiServer, get, running_pod};

/// The password every test hides; it must appear in no output at all.
const MARKER: &str = "Zq9MarkerPw";

/// The two ways a PostgreSQL URL carries a password, for a passwordless `url`.
fn with_password(url: &str) -> [String; 2] {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    [
        format!("{scheme}://{user}:{MARKER}@{host}"),
        format!("{url}?sslmode=disable&password={MARKER}"),
    ]
}

fn podline(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("PODLINE_DB")
        .env_remove("RUST_LOG")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::null());
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[track_caller]
fn assert_hidden(what: &str, output: &str) {
    assert!(
        !output.contains(MARKER),
        "the password reached the output of {what}:\n{output}"
    );
}

/// A fresh PostgreSQL store holding one pod (`default/train-1` of run `r1`).
async fn postgres_with_a_pod() -> Option<TestDb> {
    let db = TestDb::fresh(Backend::Postgres).await?;
    db.store
        .apply(&Batch::new(vec![StoreOp::Upsert(running_pod(
            "uid-1", "train-1", "r1",
        ))]))
        .await
        .unwrap();
    Some(db)
}

#[test]
fn help_of_every_subcommand_should_hide_credentials_from_the_environment() {
    let db = format!("postgres://app:{MARKER}@db/podline?password={MARKER}");
    for sub in [
        None,
        Some("record"),
        Some("runs"),
        Some("pods"),
        Some("show"),
        Some("ui"),
        Some("sim"),
        Some("run"),
        Some("demo"),
    ] {
        let mut args: Vec<&str> = sub.into_iter().collect();
        args.push("--help");
        let out = podline(&args)
            .env("PODLINE_DB", &db)
            .env("PODLINE_SIM_TOKEN", MARKER)
            .output()
            .unwrap();
        let output = text(&out);
        assert!(out.status.success(), "{args:?}: {output}");
        assert_hidden(&format!("podline {args:?}"), &output);
    }
    // The variable is still documented, just not its value.
    let out = podline(&["runs", "--help"])
        .env("PODLINE_DB", &db)
        .output()
        .unwrap();
    assert!(text(&out).contains("[env: PODLINE_DB]"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn queries_on_postgres_should_never_print_the_password_at_any_log_level() {
    let Some(db) = postgres_with_a_pod().await else {
        return;
    };
    for url in with_password(&db.url) {
        for (verbosity, rust_log) in [("-vvv", None), ("-v", Some("trace"))] {
            for args in [
                vec!["runs"],
                vec!["pods", "-o", "wide"],
                vec!["pods", "-o", "json"],
                vec!["show", "train-1"],
                vec!["show", "no-such-pod"],
            ] {
                let mut cmd = podline(&args);
                cmd.arg(verbosity).args(["--db", &url]);
                if let Some(level) = rust_log {
                    cmd.env("RUST_LOG", level);
                }
                let out = cmd.output().unwrap();
                let output = text(&out);
                assert_hidden(&format!("{args:?} {verbosity} {rust_log:?}"), &output);
                if args[1..] != ["no-such-pod"] {
                    assert!(out.status.success(), "{args:?}: {output}");
                    assert!(
                        output.contains("train-1") || output.contains("r1"),
                        "{output}"
                    );
                }
            }
            // The same through the environment, as deploy/base passes it (from a Secret).
            let out = podline(&["pods", verbosity])
                .env("PODLINE_DB", &url)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out));
            assert_hidden("pods with PODLINE_DB", &text(&out));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_opens_should_hide_the_password_and_say_each_cause_once() {
    let Some(db) = TestDb::fresh(Backend::Postgres).await else {
        return;
    };
    let missing_db = format!("{}_missing", db.url);
    let socket = "postgres://app@%2Fnonexistent%2Fpodline-socket/podline".to_owned();
    let mut targets: Vec<String> = with_password(&missing_db).into();
    targets.extend(with_password(&socket));
    targets.extend([
        format!("postgres://app@db/podline?sslpassword={MARKER}"),
        format!("postgres://app@db/podline?Password={MARKER}"),
        format!("postgres://app@db/podline?password={MARKER}&{MARKER}"),
        format!("host=db user=app password={MARKER} dbname=podline"),
        format!("mysql://app:{MARKER}@db/podline"),
    ]);
    for url in &targets {
        for args in [
            vec!["runs"],
            vec!["pods"],
            vec!["show", "x"],
            vec!["ui", "--listen", "127.0.0.1:0"],
            // No cluster here: it fails on the target or the kubeconfig, showing neither secret.
            vec!["record", "--listen", "127.0.0.1:0"],
        ] {
            let out = podline(&args).args(["-vvv", "--db", url]).output().unwrap();
            let output = text(&out);
            assert!(!out.status.success(), "{args:?} {url}: {output}");
            assert_hidden(&format!("{args:?} failing"), &output);
            assert!(output.contains("error:"), "{output}");
        }
    }
    // Each cause once: the driver prints its cause in its message and returns it as source.
    let [userinfo, _] = with_password(&socket);
    let out = podline(&["runs", "--db", &userinfo]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("app:***@"),
        "the target is shown redacted: {stderr}"
    );
    let [_, query] = with_password(&missing_db);
    let out = podline(&["pods", "--db", &query]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("does not exist").count(), 1, "{stderr}");
    assert!(stderr.contains("password=***"), "{stderr}");
}

/// Reads `child`'s stderr on a thread, sending each line.
fn lines(stream: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread")]
async fn record_should_log_the_target_redacted_and_fail_without_the_password() {
    let Some(db) = TestDb::fresh(Backend::Postgres).await else {
        return;
    };
    let sim = start_sim(test_config()).await;
    let kubeconfig = kubeconfig_file(&sim);
    for url in with_password(&db.url) {
        // Default level: the start line names the store, redacted.
        for verbosity in [None, Some("-vvv")] {
            let mut child = Command::new(BIN)
                .args(["record", "--listen", "127.0.0.1:0", "--db", &url])
                .args(verbosity)
                .env_remove("PODLINE_DB")
                .env_remove("RUST_LOG")
                .env("KUBECONFIG", kubeconfig.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stderr = lines(child.stderr.take().unwrap());
            let stdout = lines(child.stdout.take().unwrap());
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut seen = String::new();
            let mut started = false;
            while Instant::now() < deadline {
                match stderr.recv_timeout(Duration::from_millis(100)) {
                    Ok(line) => {
                        started |= line.contains("recording pods");
                        seen.push_str(&line);
                        seen.push('\n');
                        if started {
                            break;
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            // Let it record a little (the pod watch and its writes log at -vvv), then stop it.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let _ = child.kill();
            let _ = child.wait();
            seen.extend(stderr.try_iter().map(|l| l + "\n"));
            seen.extend(stdout.try_iter().map(|l| l + "\n"));
            assert!(started, "record did not start within 30 s:\n{seen}");
            assert_hidden(&format!("record {verbosity:?}"), &seen);
            let start = seen.lines().find(|l| l.contains("recording pods")).unwrap();
            assert!(start.contains("***"), "{start}");
        }
    }
    // The error path: the database does not exist.
    for url in with_password(&format!("{}_missing", db.url)) {
        let out = Command::new(BIN)
            .args(["record", "-vvv", "--listen", "127.0.0.1:0", "--db", &url])
            .env_remove("PODLINE_DB")
            .env("KUBECONFIG", kubeconfig.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let output = text(&out);
        assert!(!out.status.success(), "{output}");
        assert!(output.contains("cannot open the store"), "{output}");
        assert_hidden("record failing", &output);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ui_should_never_show_the_password() {
    let Some(db) = postgres_with_a_pod().await else {
        return;
    };
    for url in with_password(&db.url) {
        let ui = UiServer::start_with(Path::new(&url), &["--listen", "127.0.0.1:0", "-vvv"]);
        assert!(ui.first_line.contains("***"), "{}", ui.first_line);
        let mut seen = ui.first_line.clone();
        for path in [
            "/",
            "/runs/default/r1",
            "/pods/uid-1",
            "/failures",
            "/nope",
            "/api/runs",
            "/api/runs/default/r1",
            "/api/pods",
            "/api/pods/uid-1",
            "/api/pods?limit=nonsense",
            "/api/failures",
            "/api/counts",
            "/api/changes",
        ] {
            let answer = get(&format!("{}{path}", ui.url)).await;
            seen.push_str(&answer.body);
            for (name, value) in &answer.headers {
                seen.push_str(&format!("{name}: {value:?}\n"));
            }
        }
        assert!(seen.contains("train-1"), "{seen}");
        // The store goes away: the error pages and the log must not show the URL either.
        db.allow_connections(false).await;
        let (page_url, api_url) = (format!("{}/", ui.url), format!("{}/api/runs", ui.url));
        let (page, api) = tokio::join!(get(&page_url), get(&api_url));
        for answer in [page, api] {
            assert!(answer.status >= 500, "{}", answer.body);
            seen.push_str(&answer.body);
        }
        db.allow_connections(true).await;
        let mut ui = ui;
        let mut stderr = ui.stderr.take().unwrap();
        drop(ui); // kills it, so its stderr ends
        let mut logs = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut logs).unwrap();
        seen.push_str(&logs);
        assert_hidden("podline ui", &seen);
    }
}

// --- Readers never write -------------------------------------------------------------------

#[test]
fn queries_should_refuse_a_missing_sqlite_file_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.db");
    for args in [vec!["runs"], vec!["pods"], vec!["show", "x"]] {
        let out = podline(&args).arg("--db").arg(&typo).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&*typo.to_string_lossy()) && stderr.contains("does not exist"),
            "{stderr}"
        );
        assert!(stderr.contains("podline record --db"), "{stderr}");
        assert!(!typo.exists(), "{args:?} created the store");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

/// Whether this process is root, where file modes do not stop writes.
fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// `podline ARGS` as a user the file modes apply to: `nobody` when the tests run as root.
fn unprivileged(args: &[&str]) -> Command {
    let mut cmd = podline(args);
    if is_root() {
        use std::os::unix::process::CommandExt as _;
        cmd.uid(65534).gid(65534);
    }
    cmd
}

/// A migrated SQLite store with one pod, checkpointed so that no -wal/-shm file is left, in a
/// directory anyone may enter; the file and directory are world-readable.
async fn sqlite_store_in(dir: &Path) -> std::path::PathBuf {
    use podline_store::StoreWrite as _;
    use std::os::unix::fs::PermissionsExt as _;
    let db = dir.join("p.db");
    let store = podline_store::SqlStore::connect(
        &podline_store::DbTarget::parse(&db.to_string_lossy()).unwrap(),
        &podline_store::PoolSettings::default(),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    store
        .apply(&Batch::new(vec![StoreOp::Upsert(running_pod(
            "uid-1", "train-1", "r1",
        ))]))
        .await
        .unwrap();
    // Closing the last connection checkpoints the WAL and removes -wal and -shm.
    store.close().await;
    for suffix in ["-wal", "-shm"] {
        let mut side = db.clone().into_os_string();
        side.push(suffix);
        assert!(!Path::new(&side).exists(), "{side:?} is left after close");
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    db
}

#[tokio::test]
async fn queries_should_read_a_store_they_may_not_write_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_store_in(dir.path()).await;
    let started = Instant::now();
    let out = unprivileged(&["pods", "--db", &db.to_string_lossy()])
        .output()
        .unwrap();
    let output = text(&out);
    assert!(out.status.success(), "{output}");
    assert!(output.contains("train-1"), "{output}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}: {output}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_ui_in_a_read_only_directory_should_name_the_shm_file_not_the_schema() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_store_in(dir.path()).await;
    // The directory is read-only for the (unprivileged) reader: SQLite cannot create p.db-shm.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = unprivileged(&[
        "ui",
        "--listen",
        "127.0.0.1:0",
        "--db",
        &db.to_string_lossy(),
    ])
    .output()
    .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("schema version"), "{stderr}");
    assert!(
        stderr.contains("p.db-shm") && stderr.contains("not writable"),
        "{stderr}"
    );
    assert!(stderr.contains("make the directory writable"), "{stderr}");
}

/// A read-only bind mount of a directory, unmounted on drop.
struct ReadOnlyMount {
    path: std::path::PathBuf,
}

impl ReadOnlyMount {
    /// `None` (said loudly) where this process may not mount (not root, no CAP_SYS_ADMIN).
    fn of(source: &Path, target: &Path) -> Option<ReadOnlyMount> {
        let run = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .output()
                .is_ok_and(|out| out.status.success())
        };
        let (src, dst) = (source.to_str().unwrap(), target.to_str().unwrap());
        if !run(&["--bind", src, dst]) {
            eprintln!("\n*** cannot bind-mount here: the read-only mount case is SKIPPED ***\n");
            return None;
        }
        let mount = ReadOnlyMount {
            path: target.to_owned(),
        };
        assert!(
            run(&["-o", "remount,bind,ro", dst]),
            "cannot remount {dst} read-only"
        );
        Some(mount)
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

#[tokio::test]
async fn readers_on_a_read_only_mount_should_fail_at_once_naming_the_shm_file() {
    let source = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    sqlite_store_in(source.path()).await;
    let Some(mount) = ReadOnlyMount::of(source.path(), target.path()) else {
        return;
    };
    let db = mount.path.join("p.db");
    assert!(
        std::fs::File::create(mount.path.join("probe")).is_err(),
        "the mount is writable"
    );
    // A read-write open here (what `runs` did) retried for 10 s and then blamed a pool timeout.
    for args in [
        vec!["runs"],
        vec!["pods"],
        vec!["show", "train-1"],
        vec!["ui", "--listen", "127.0.0.1:0"],
    ] {
        let started = Instant::now();
        let out = podline(&args).arg("--db").arg(&db).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?} took {:?}: {stderr}",
            started.elapsed()
        );
        assert!(
            stderr.contains("p.db-shm") && stderr.contains("not writable"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("schema version"), "{stderr}");
    }
}
