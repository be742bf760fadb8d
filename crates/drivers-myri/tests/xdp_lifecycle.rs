//! The XDP program's lifetime and the backend's errors:
//! - a missing interface, an interface without native XDP (`lo`) and a thread without root
//!   privileges each give their error (Display checked), never a panic;
//! - `Auto` falls back to generic XDP where native is missing;
//! - the program detaches when dropped, and on SIGINT in a process that installed
//!   [`stop_on_signals`] (a child process, as a Ctrl-C'd demo would be); detaching after the
//!   interface is gone is not an error;
//! - a process killed with SIGKILL (no cleanup of its own) leaves no program behind: the kernel
//!   detached it with the process's BPF link, and the next attach succeeds;
//! - a process in another pid namespace (`unshare --pid --fork`) cannot take a live process's
//!   program: its attach is `Busy` and the program stays;
//! - a program attached over netlink by someone else, even one named `lro_xsk_<pid>` after a
//!   process that is gone (the names this crate's netlink attachment used to give), makes
//!   attach `Busy`, with the `ip` command that removes it; after that command, attach succeeds.
//!
//! The child processes are this test binary run again with `XDP_LIFECYCLE_CHILD` set. Needs
//! root, `ip` and AF_XDP (and `unshare` for the pid namespace); skips with a printed reason
//! otherwise.
#![cfg(all(target_os = "linux", feature = "xdp"))]

mod xdp_common;

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use drivers_myri::xdp::{
    attached_program, stop_on_signals, AttachedProgram, XdpError, XdpMode, XdpProgram, XskConfig,
    PROGRAM_NAME,
};

const TEST_NAME: &str = "xdp_program_lifecycle";

/// Child process modes: attach to `XDP_LIFECYCLE_IF` in `XDP_LIFECYCLE_NS`, print `attached`,
/// then either wait to be killed (`hold`) or wait for SIGINT and detach (`sigint`); or try to
/// attach once, print the outcome with the child's own process id and exit (`take`).
fn child(mode: &str) {
    let ns = std::env::var("XDP_LIFECYCLE_NS").expect("namespace");
    let ifname = std::env::var("XDP_LIFECYCLE_IF").expect("interface");
    xdp_common::enter(&ns).expect("setns");
    if mode == "take" {
        let pid = std::process::id();
        match XdpProgram::attach(&ifname, XdpMode::Native) {
            Ok(xdp) => println!("\nresult pid {pid} attached {}", xdp.prog_id()),
            Err(XdpError::Busy { prog_id, .. }) => println!("\nresult pid {pid} busy {prog_id}"),
            Err(e) => println!("\nresult pid {pid} error {e}"),
        }
        std::process::exit(0);
    }
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

/// The child process in `mode`: this test binary run again, after `wrapper` (a command that
/// runs it, such as `unshare`) if not empty.
fn child_command(wrapper: &[&str], mode: &str, ns: &str, ifname: &str) -> Command {
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = match wrapper {
        [] => Command::new(&exe),
        [program, args @ ..] => {
            let mut c = Command::new(program);
            c.args(args).arg(&exe);
            c
        }
    };
    cmd.args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env("XDP_LIFECYCLE_CHILD", mode)
        .env("XDP_LIFECYCLE_NS", ns)
        .env("XDP_LIFECYCLE_IF", ifname)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// Starts a child in `mode` and waits for its `attached <id>` line.
/// A child process killed and reaped when dropped, so a failing assertion does not leave it
/// holding a BPF link (and the test's namespace) behind.
struct Reaped(Child);

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        // Both fail harmlessly once the test has killed and reaped the child itself.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(
    mode: &str,
    ns: &str,
    ifname: &str,
) -> (Reaped, u32, BufReader<std::process::ChildStdout>) {
    let mut child = Reaped(
        child_command(&[], mode, ns, ifname)
            .spawn()
            .expect("spawn the child"),
    );
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
    // Names no interface can have (16 bytes and more, or with a slash, a space or a NUL) are
    // refused before the kernel is asked: it would read "lo\0x" as "lo".
    for name in ["lo23456789abcdef", "lo\0x", "lo/x", "lo x", ""] {
        let err = in_ns(ns, || attached_program(name)).expect_err(name);
        assert!(
            matches!(err, XdpError::NoSuchInterface(_)),
            "{name:?}: {err:?}"
        );
    }

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

    // Auto takes native XDP where the driver has it (veth).
    let mode = in_ns(ns, || {
        XdpProgram::attach(ifname, XdpMode::Auto)
            .expect("attach")
            .mode()
    });
    assert_eq!(mode, XdpMode::Native);

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

/// Waits up to five seconds for `ifname` in `ns` to have no program; what it has then.
fn wait_detached(ns: &str, ifname: &str) -> Option<AttachedProgram> {
    let start = Instant::now();
    loop {
        let now = in_ns(ns, || attached_program(ifname).expect("query"));
        if now.is_none() || start.elapsed() > Duration::from_secs(5) {
            return now;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A process killed with SIGKILL runs no cleanup, yet leaves no program: the kernel closes its
/// descriptors, the BPF link among them, and the link's program goes with it.
#[test]
fn a_killed_process_leaves_no_program() {
    let Some(net) = xdp_common::setup("k", 1) else {
        return;
    };
    let (ns, ifname) = (net.ns_a.as_str(), net.if_a.as_str());
    let (mut child, child_prog, _out) = spawn_child("hold", ns, ifname);

    // Attached, held by a link, and refused to anyone else while the child lives.
    let attached = in_ns(ns, || attached_program(ifname).expect("query")).expect("attached");
    assert_eq!(attached.prog_id, child_prog);
    assert!(attached.link.is_some(), "held by a BPF link: {attached:?}");
    let err = in_ns(ns, || XdpProgram::attach(ifname, XdpMode::Native)).expect_err("busy");
    match &err {
        XdpError::Busy { prog_id, link, .. } => {
            assert_eq!(*prog_id, child_prog);
            assert_eq!(*link, attached.link);
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    assert!(err.to_string().contains("BPF link"), "{err}");
    println!("live holder: {err}");

    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    assert_eq!(
        wait_detached(ns, ifname),
        None,
        "the killed process's program is gone"
    );
    in_ns(ns, || {
        let xdp = XdpProgram::attach(ifname, XdpMode::Native).expect("attach after the kill");
        assert_eq!(
            attached_program(ifname).expect("query").map(|p| p.prog_id),
            Some(xdp.prog_id())
        );
        xdp.detach().expect("detach");
        assert_eq!(attached_program(ifname).expect("query"), None);
    });
    println!("SIGKILL: program {child_prog} detached by the kernel; attach succeeds again");
}

/// A process in another pid namespace that shares the network namespace (a host-network
/// container) cannot tell whether the holder of a program is alive from its pid, and must not
/// need to: its attach is refused and the holder keeps its program.
#[test]
fn another_pid_namespace_cannot_take_a_live_program() {
    if let Some(reason) = lro_testkit::sys::tool_missing("unshare", "--version", "(util-linux)")
        .or_else(|| {
            xdp_common::run(&["unshare", "--pid", "--fork", "true"])
                .err()
                .map(|e| format!("no pid namespace of our own: {e}"))
        })
    {
        lro_testkit::sys::skip(&reason);
        return;
    }
    let Some(net) = xdp_common::setup("p", 1) else {
        return;
    };
    let (ns, ifname) = (net.ns_a.as_str(), net.if_a.as_str());
    let (mut holder, holder_prog, _out) = spawn_child("hold", ns, ifname);

    let mut taker = Reaped(
        child_command(
            &["unshare", "--pid", "--fork", "--kill-child"],
            "take",
            ns,
            ifname,
        )
        .spawn()
        .expect("spawn unshare"),
    );
    let mut out = String::new();
    taker
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("the taker's output");
    let status = taker.wait().expect("reap unshare");
    let result = out
        .lines()
        .find_map(|l| l.strip_prefix("result "))
        .unwrap_or_else(|| {
            let _ = holder.kill();
            panic!("no result from the taker ({status:?}): {out:?}")
        });
    println!("taker in a new pid namespace: {result}");
    // Pid 1: it really ran in a pid namespace of its own.
    let expected = format!("pid 1 busy {holder_prog}");
    let still = in_ns(ns, || attached_program(ifname).expect("query")).map(|p| p.prog_id);
    let alive = holder.try_wait().expect("holder status").is_none();
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(result, expected, "the taker's attach is refused");
    assert_eq!(still, Some(holder_prog), "the holder's program stays");
    assert!(alive, "the holder was alive throughout");
    assert_eq!(wait_detached(ns, ifname), None, "gone with its holder");
}

/// Loads `return XDP_PASS;` named `name`: a program as someone else would attach.
fn load_pass_program(name: &str) -> OwnedFd {
    /// `union bpf_attr` for `BPF_PROG_LOAD`, up to the program's name.
    #[repr(C)]
    struct ProgLoad {
        prog_type: u32,
        insn_cnt: u32,
        insns: u64,
        license: u64,
        log_level: u32,
        log_size: u32,
        log_buf: u64,
        kern_version: u32,
        prog_flags: u32,
        prog_name: [u8; 16],
    }
    // r0 = XDP_PASS (BPF_ALU64 | BPF_MOV | BPF_K, imm 2); exit (BPF_JMP | BPF_EXIT).
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0, 0, 0, 2, 0, 0, 0]),
        u64::from_le_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]),
    ];
    let license = b"MIT\0";
    let mut prog_name = [0u8; 16];
    prog_name[..name.len().min(15)].copy_from_slice(&name.as_bytes()[..name.len().min(15)]);
    let mut attr = ProgLoad {
        prog_type: 6, // BPF_PROG_TYPE_XDP
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name,
    };
    // SAFETY: BPF_PROG_LOAD (5) with a valid, writable prefix of `union bpf_attr` and its
    // size; `insns` and `license` outlive the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            5,
            &mut attr as *mut ProgLoad,
            std::mem::size_of::<ProgLoad>() as u32,
        )
    };
    assert!(
        fd >= 0,
        "load the pass program: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `fd` is the descriptor the kernel just created for this process; nothing else
    // owns it.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// Attaches `prog` to `ifname` over netlink (`IFLA_XDP`) with `flags`, as `ip link set dev IF
/// xdp ...` does, in the calling thread's network namespace.
fn attach_over_netlink(ifname: &str, prog: &OwnedFd, flags: u32) -> Result<(), String> {
    use rtnetlink::packet_route::link::{LinkAttribute, LinkXdp};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| e.to_string())?;
        let task = tokio::spawn(conn);
        let msg = rtnetlink::LinkUnspec::new_with_name(ifname)
            .append_extra_attribute(LinkAttribute::Xdp(vec![
                LinkXdp::Fd(prog.as_raw_fd()),
                LinkXdp::Flags(flags),
            ]))
            .build();
        let r = handle.link().set(msg).execute().await;
        task.abort();
        r.map_err(|e| e.to_string())
    })
}

/// A program attached over netlink by someone else stays attached after its process is gone,
/// whatever its name: attach refuses it with the command that removes it, and succeeds once it
/// has been removed.
#[test]
fn a_netlink_program_makes_attach_busy() {
    let Some(net) = xdp_common::setup("n", 1) else {
        return;
    };
    let (ns, ifname) = (net.ns_a.as_str(), net.if_a.as_str());
    // A process id that is no longer in use: the name this crate once gave its programs, for
    // a process that is gone.
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let gone_pid = gone.id();
    gone.wait().expect("reap true");
    let name = format!("lro_xsk_{gone_pid}");

    for (mode, flags, off) in [
        (XdpMode::Native, 1u32 << 2, "xdp"),         // XDP_FLAGS_DRV_MODE
        (XdpMode::Generic, 1u32 << 1, "xdpgeneric"), // XDP_FLAGS_SKB_MODE
    ] {
        let prog_id = in_ns(ns, || {
            let prog = load_pass_program(&name);
            attach_over_netlink(ifname, &prog, flags).expect("attach over netlink");
            // The program stays with the interface when its descriptor closes.
            drop(prog);
            let attached = attached_program(ifname).expect("query").expect("attached");
            assert_eq!(attached.mode, mode);
            assert_eq!(attached.name.as_deref(), Some(name.as_str()));
            assert_eq!(attached.link, None, "not held by a link: {attached:?}");
            attached.prog_id
        });
        for asked in [XdpMode::Auto, XdpMode::Native, XdpMode::Generic] {
            let err =
                in_ns(ns, || XdpProgram::attach(ifname, asked)).expect_err("a program is there");
            match &err {
                XdpError::Busy {
                    prog_id: id,
                    name: n,
                    mode: m,
                    link,
                    ..
                } => {
                    assert_eq!(
                        (*id, n.as_deref(), *m, *link),
                        (prog_id, Some(name.as_str()), mode, None)
                    );
                }
                other => panic!("expected Busy, got {other:?}"),
            }
            let command = format!("ip link set dev {ifname} {off} off");
            assert!(err.to_string().contains(&command), "{err}");
            if asked == XdpMode::Auto {
                println!("netlink program, {mode}: {err}");
            }
        }
        assert_eq!(
            in_ns(ns, || attached_program(ifname).expect("query")).map(|p| p.prog_id),
            Some(prog_id),
            "still attached"
        );
        // The command the error names removes it.
        xdp_common::run(&["ip", "-n", ns, "link", "set", "dev", ifname, off, "off"])
            .expect("ip link set ... off");
        assert_eq!(in_ns(ns, || attached_program(ifname).expect("query")), None);
        in_ns(ns, || {
            let xdp = XdpProgram::attach(ifname, mode).expect("attach once it is removed");
            xdp.detach().expect("detach");
        });
    }
}

/// A queue removed from the XSKMAP ([`XdpProgram::unregister`]) sends its frames on to the
/// kernel's stack: its socket receives nothing more, though it stays open.
#[test]
fn an_unregistered_queue_leaves_its_frames_to_the_kernel() {
    let Some(net) = xdp_common::setup("u", 1) else {
        return;
    };
    let kernel_mac = xdp_common::mac_of(&net.ns_b, &net.if_b).expect("MAC");
    let frames = vec![xdp_common::arp_request(kernel_mac, [198, 18, 0, 1]); 4];
    let send = || {
        let (ns_b, if_b, frames) = (net.ns_b.clone(), net.if_b.clone(), frames.clone());
        thread::spawn(move || xdp_common::inject(&ns_b, &if_b, &frames, Duration::ZERO))
            .join()
            .expect("injector")
            .expect("inject")
    };
    let (before, after) = in_ns(&net.ns_a, || {
        let xdp = XdpProgram::attach(&net.if_a, XdpMode::Native).expect("attach");
        let (mut rx, _tx) = xdp
            .socket(0, &XskConfig::default())
            .expect("socket")
            .split();
        // Waits up to a second for `n` frames; how many came.
        let mut take = |n: usize| {
            let start = Instant::now();
            let mut got = 0;
            while got < n && start.elapsed() < Duration::from_secs(1) {
                let _ = rx.wait(Some(Duration::from_millis(10)));
                got += xdp_common::drain(&mut rx);
            }
            got
        };
        assert_eq!(send(), 4);
        let before = take(4);
        xdp.unregister(0).expect("unregister");
        assert_eq!(send(), 4);
        let after = take(1);
        (before, after)
    });
    assert_eq!(
        (before, after),
        (4, 0),
        "frames at the socket before and after"
    );
}
