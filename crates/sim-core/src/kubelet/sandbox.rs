//! Puts an exec-mode process (a container's command, or a `pods/exec` command) into its
//! container's view of the file system: its volumes at their `mountPath`s.
//!
//! When the sim runs as root, each process gets a private mount namespace
//! (`unshare(CLONE_NEWNS)`, then `/` made recursively private so nothing propagates back to the
//! host) in which each of the container's volumes is bind-mounted at its `mountPath` (read-only
//! where the kubelet mounts read-only). Every process of a pod binds the same local directories
//! (`volumes.rs`), so what one container writes into an `emptyDir` the others, and
//! `kubectl exec` into them, see at once. A missing `mountPath` (or its parent) is created on
//! the host first, as an empty directory (or an empty file when the source is a file): the bind
//! mount needs something to cover. The rest of the file system is the host's.
//!
//! Without root (or where even root may not unshare, [`can_mount`]) there is no mount namespace: the process runs with the host's file system and
//! its volumes are not at their `mountPath`s; the kubelet says so in a `VolumesNotMounted`
//! Warning event on the pod. The environment is resolved either way.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

use super::volumes::Mount;

/// The `unshare` invocation that gives an exec'd command a PID namespace (and a `/proc`) of its
/// own, so that it sees and signals only its own processes; `None` where none can be made.
///
/// Why: a command run by `pods/exec` in exec mode is a host process, and commands written for
/// containers assume a container's process view. KubernetesPodOperator's XCom sidecar is stopped
/// with `kill -2 $(pgrep -u $(id -u) -f 'sh')`, which on the host would interrupt every shell
/// of the sim's user (every root shell when the sim runs as root). Inside its own PID namespace
/// it finds only itself. As root the namespace is made directly; without root, where the kernel
/// allows unprivileged user namespaces, inside a user namespace that maps the user to root.
/// Probed once, by running `true` that way.
pub fn pid_namespace_prefix() -> Option<&'static [&'static str]> {
    const AS_ROOT: &[&str] = &[
        "unshare",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        "--",
    ];
    const AS_USER: &[&str] = &[
        "unshare",
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
        "--",
    ];
    static PREFIX: std::sync::OnceLock<Option<&'static [&'static str]>> =
        std::sync::OnceLock::new();
    *PREFIX.get_or_init(|| {
        let candidate = if is_root() { AS_ROOT } else { AS_USER };
        let (program, args) = candidate.split_first()?;
        let works = std::process::Command::new(program)
            .args(args)
            .arg("true")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        works.then_some(candidate)
    })
}

/// Whether this process can make mount namespaces: it runs as root and may call
/// `unshare(CLONE_NEWNS)` (a container without `CAP_SYS_ADMIN` may not, even as root). Probed
/// once, by starting `sh -c true` in a namespace of its own.
pub fn can_mount() -> bool {
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAN.get_or_init(|| is_root() && probe())
}

/// Whether the effective uid is 0 (the 2nd number of `Uid:` in /proc/self/status).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|rest| rest.split_whitespace().nth(1).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

#[allow(unsafe_code)] // `pre_exec`; see the SAFETY note.
fn probe() -> bool {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "true"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let root = CString::from(c"/");
    // SAFETY: as in `isolate`: only unshare(2) and mount(2) on a C string made before the
    // fork, no allocation, no lock.
    unsafe {
        cmd.pre_exec(move || enter_private_namespace(&root));
    }
    cmd.status().is_ok_and(|s| s.success())
}

/// In a forked child: a new mount namespace whose mounts do not propagate to the host.
fn enter_private_namespace(root: &CString) -> io::Result<()> {
    // SAFETY: plain system calls on a valid NUL-terminated string; async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(io::Error::last_os_error());
        }
        let none = std::ptr::null();
        if libc::mount(
            none,
            root.as_ptr(),
            none,
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Arranges for `cmd` to start in a private mount namespace with `mounts` bound in place (see
/// the module docs). Does nothing when there is nothing to mount or [`can_mount`] is false.
#[allow(unsafe_code)] // `pre_exec`; see the SAFETY note.
pub fn isolate(cmd: &mut tokio::process::Command, mounts: &[Mount]) -> io::Result<()> {
    if mounts.is_empty() || !can_mount() {
        return Ok(());
    }
    let mut plan: Vec<(CString, CString, bool)> = Vec::with_capacity(mounts.len());
    for m in mounts {
        if !m.source.exists() {
            // A subPath of a volume that does not exist yet: the kubelet creates it.
            std::fs::create_dir_all(&m.source)?;
        }
        if m.source.is_dir() {
            std::fs::create_dir_all(&m.target)?;
        } else if !m.target.exists() {
            if let Some(parent) = m.target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create(&m.target)?;
        }
        let c = |p: &std::path::Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        };
        plan.push((c(&m.source)?, c(&m.target)?, m.read_only));
    }
    let root = CString::from(c"/");
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: it calls only unshare(2) and mount(2) on C strings made before the
    // fork, allocates nothing, and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            enter_private_namespace(&root)?;
            let none = std::ptr::null();
            for (source, target, read_only) in &plan {
                let flags = libc::MS_BIND | libc::MS_REC;
                if libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    none,
                    flags,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                if *read_only {
                    let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                    if libc::mount(none, target.as_ptr(), none, flags, std::ptr::null()) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        });
    }
    Ok(())
}
