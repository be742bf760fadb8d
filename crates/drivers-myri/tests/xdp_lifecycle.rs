//! The XDP program's lifetime and the backend's errors:
//! - a missing interface, an interface without native XDP (`lo`) and a thread without root
//!   privileges each give their error (Display checked), never a panic;
//! - `Auto` falls back to generic XDP where native is missing;
//! - the program detaches when dropped, and on SIGINT in a process that installed
//!   [`stop_on_signals`] (a child process, as a Ctrl-C'd demo would be); detaching after the
//!   interface is gone is not an error.
//!
//! The child processes are this test binary run again with `XDP_LIFECYCLE_CHILD` set. Needs
//! root, `ip` and AF_XDP; skips with a printed reason otherwise.
#![cfg(all(target_os = "linux", feature = "xdp"))]

mod xdp_common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use drivers_myri::xdp::{
    attached_program, stop_on_signals, XdpError, XdpMode, XdpProgram, PROGRAM_NAME,
};

const TEST_NAME: &str = "xdp_program_lifecycle";

/// Child process modes: attach to `XDP_LIFECYCLE_IF` in `XDP_LIFECYCLE_NS`, print `attached`,
/// then either wait to be killed (`hold`) or wait for SIGINT and detach (`sigint`).
fn child(mode: &str) {
    let ns = std::env::var("XDP_LIFECYCLE_NS").expect("namespace");
    let ifname = std::env::var("XDP_LIFECYCLE_IF").expect("interface");
    xdp_common::enter(&ns).expect("setns");
    let stop = stop_on_signals().expect("signal handler");
    let xdp = XdpProgram::attach(&ifname, XdpMode::Native).expect("child attach");
    println!("attached {}", xdp.prog_id());
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if mode == "sigint" && stop.load(Ordering::SeqCst) {
            drop(xdp);
            println!("detached");
            std::process::exit(0);
        }
        thread::sleep(Duration::from_millis(10));
    }
    std::process::exit(3);
}

/// Starts a child in `mode` and waits for its `attached <id>` line.
fn spawn_child(
    mode: &str,
    ns: &str,
    ifname: &str,
) -> (Child, u32, BufReader<std::process::ChildStdout>) {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env("XDP_LIFECYCLE_CHILD", mode)
        .env("XDP_LIFECYCLE_NS", ns)
        .env("XDP_LIFECYCLE_IF", ifname)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let start = Instant::now();
    // libtest prints "test <name> ... " without a newline first.
    while !line.contains("attached ") {
        line.clear();
        if out.read_line(&mut line).expect("child stdout") == 0
            || start.elapsed() > Duration::from_secs(20)
        {
            let _ = child.kill();
            panic!("child ({mode}) did not attach");
        }
    }
    let id = line
        .split("attached ")
        .nth(1)
        .and_then(|rest| rest.trim().parse().ok())
        .expect("program id");
    (child, id, out)
}

/// Runs `f` on a thread in namespace `ns`.
fn in_ns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    thread::scope(|s| {
        s.spawn(|| {
            xdp_common::enter(ns).expect("setns");
            f()
        })
        .join()
        .expect("namespace thread")
    })
}

#[test]
fn xdp_program_lifecycle() {
    if let Ok(mode) = std::env::var("XDP_LIFECYCLE_CHILD") {
        child(&mode);
        return;
    }
    let Some(net) = xdp_common::setup("l", 1) else {
        return;
    };
    let (ns, ifname) = (net.ns_a.as_str(), net.if_a.as_str());

    // A missing interface.
    let err =
        in_ns(ns, || XdpProgram::attach("xdpnosuch0", XdpMode::Auto)).expect_err("no interface");
    assert!(matches!(err, XdpError::NoSuchInterface(_)), "{err:?}");
    println!("missing interface: {err}");
    assert!(err.to_string().contains("xdpnosuch0"));

    // No native XDP on the loopback device; Auto falls back to generic.
    let err =
        in_ns(ns, || XdpProgram::attach("lo", XdpMode::Native)).expect_err("lo has no native XDP");
    assert!(matches!(err, XdpError::ModeUnsupported { .. }), "{err:?}");
    println!("no native XDP: {err}");
    let mode = in_ns(ns, || {
        let xdp = XdpProgram::attach("lo", XdpMode::Auto).expect("generic XDP on lo");
        let attached = attached_program("lo").expect("query").expect("attached");
        assert_eq!(attached.prog_id, xdp.prog_id());
        assert_eq!(attached.mode, XdpMode::Generic);
        assert_eq!(attached.name.as_deref(), Some(PROGRAM_NAME));
        assert!(attached.link.is_some(), "held by a BPF link: {attached:?}");
        let mode = xdp.mode();
        xdp.detach().expect("detach");
        assert_eq!(attached_program("lo").expect("query"), None, "detached");
        mode
    });
    assert_eq!(mode, XdpMode::Generic);

    // Without root: a thread whose credentials dropped to nobody (setresuid on this thread
    // only, the raw syscall) may look the interface up but not create the map.
    let err = in_ns(ns, || {
        // SAFETY: the raw setresuid syscall changes the credentials of the calling thread
        // only (glibc's wrapper would change every thread's); this thread ends after the
        // attempt.
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(rc, 0, "setresuid");
        XdpProgram::attach(ifname, XdpMode::Native)
    })
    .expect_err("unprivileged attach");
    assert!(matches!(err, XdpError::Permission { .. }), "{err:?}");
    println!("without root: {err}");
    assert!(err.to_string().contains("root"));

    // Detached on drop.
    in_ns(ns, || {
        let xdp = XdpProgram::attach(ifname, XdpMode::Native).expect("attach");
        assert_eq!(xdp.mode(), XdpMode::Native);
        let id = xdp.prog_id();
        assert_eq!(
            attached_program(ifname).expect("query").map(|p| p.prog_id),
            Some(id)
        );
        drop(xdp);
        assert_eq!(
            attached_program(ifname).expect("query"),
            None,
            "detached on drop"
        );
    });

    // Detached on SIGINT by a process that installed the stop handler.
    let (mut child, _, mut out) = spawn_child("sigint", ns, ifname);
    // SAFETY: kill(2) on the child we spawned and still own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let status = child.wait().expect("child exit");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    assert!(
        status.success() && rest.contains("detached"),
        "{status:?} {rest:?}"
    );
    assert_eq!(
        in_ns(ns, || attached_program(ifname).expect("query")),
        None,
        "detached on SIGINT"
    );
    println!("SIGINT: the child detached and exited");

    // Detaching after the interface is gone is not an error: its program went with it.
    in_ns(ns, || {
        let xdp = XdpProgram::attach(ifname, XdpMode::Native).expect("attach");
        xdp_common::run(&["ip", "link", "del", ifname]).expect("delete the veth pair");
        xdp.detach().expect("detach from a deleted interface");
    });
}
