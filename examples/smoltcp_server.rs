//! A smoltcp TCP server behind a TAP device, receiving through the drivers-myri ring and the
//! coalescer, and a kernel TCP client to feed it: watch how many frames smoltcp processes for
//! the frames the ring received.
//!
//! The chain: kernel TCP client -> TAP device -> simulated MAC writing into the DMA ring (page
//! frags) -> `lro_core` coalescer (Lro policy) -> smoltcp `Interface` -> TCP socket on 198.18.0.2.
//!
//! Run as root (TAP devices and network namespaces need CAP_NET_ADMIN; `ip` from iproute2 and
//! `ethtool` must be installed):
//!
//! ```text
//! cargo run --release --example smoltcp_server -- --client 64            # send 64 MiB, print, exit
//! cargo run --release --example smoltcp_server -- --client 64 --no-lro   # the baseline: ratio 1.0
//! ```
//!
//! `--client MIB` moves the TAP device (`lroex<pid>t` unless named) into a network namespace of
//! its own (named after it: `lroex<pid>tns`),
//! gives the kernel 198.18.0.1/24 there with segmentation offloads off (wire-size frames with
//! real checksums, as a NIC receives them), starts this program again inside it as the client
//! (`--send 198.18.0.2:PORT MIB`: the kernel's TCP stack sends MIB MiB), serves the connection,
//! prints what it measured and exits; the namespace and the TAP device are deleted then, also on
//! failure or Ctrl-C. A run with coalescing prints 33 to 38 ring frames per smoltcp frame for
//! 64 MiB (smoltcp then sees segments of up to 64 KB instead of 1.5 KB frames; the rate depends
//! on how fast the kernel sends, which depends on the machine).
//!
//! Without `--client` it serves until interrupted, one connection after the other, for a
//! client of your own (any program that connects to 198.18.0.2:PORT and sends):
//!
//! ```text
//! cargo run --release --example smoltcp_server -- lrotap0 5201     # terminal 1
//! ip addr add 198.18.0.1/24 dev lrotap0 && ip link set lrotap0 up  # terminal 2
//! ethtool -K lrotap0 tx off tso off gso off
//! target/release/examples/smoltcp_server --send 198.18.0.2:5201 64
//! ```
//!
//! For each connection it prints the bytes received, the frames the ring received, the frames
//! smoltcp processed and their ratio.

use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Instant as WallInstant;

use anyhow::{bail, Context};
use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::sim::SimMac;
use drivers_myri::smoltcp::iface::{Config as IfaceConfig, Interface, SocketSet};
use drivers_myri::smoltcp::phy::{wait, Medium, TunTapInterface};
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::time::{Duration, Instant};
use drivers_myri::smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use drivers_myri::{BufferLayout, RxRing, RxRingStorage};

const USAGE: &str = "usage: smoltcp_server [TAP=lrotap0] [PORT=5201] [--no-lro] [--client MIB]
       smoltcp_server --send ADDR:PORT MIB";

/// Runs a command, failing with its output when it fails.
fn run(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("cannot run {} (is it installed?)", args[0]))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The client: connects to `addr` and sends `mib` MiB of a xorshift stream, then closes.
fn send(addr: &str, mib: u64) -> anyhow::Result<()> {
    let addr: SocketAddr = addr
        .parse()
        .with_context(|| format!("{USAGE}\nbad address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(10))
        .with_context(|| format!("cannot connect to {addr}"))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let total = mib << 20;
    let mut sent = 0u64;
    while sent < total {
        for chunk in buf.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        let n = (buf.len() as u64).min(total - sent) as usize;
        stream.write_all(&buf[..n])?;
        sent += n as u64;
    }
    stream.shutdown(Shutdown::Write)?;
    Ok(())
}

/// The client's namespace; deleted (with the TAP device moved into it) on drop, and by
/// `watcher` when this process is killed (Ctrl-C) and no destructor runs.
struct Netns {
    name: String,
    client: Option<Child>,
    watcher: Option<Child>,
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Some(mut c) = self.client.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        if let Some(mut w) = self.watcher.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// A shell that ignores Ctrl-C and deletes the namespace `name` once this process is gone:
/// SIGINT ends this program without running `Netns::drop`.
fn watch(name: &str) -> anyhow::Result<Child> {
    let pid = std::process::id().to_string();
    Command::new("sh")
        .args([
            "-c",
            "trap '' INT TERM; while kill -0 \"$1\" 2>/dev/null; do sleep 0.2; done; \
             ip netns del \"$2\" 2>/dev/null",
            "sh",
            &pid,
            name,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the namespace's watcher (sh)")
}

/// Moves `tap` into a new namespace, gives the kernel its side of the link there and starts
/// this program inside it as the client.
fn start_client(tap: &str, port: u16, mib: u64) -> anyhow::Result<Netns> {
    let name = format!("{tap}ns");
    run(&["ip", "netns", "add", &name])?;
    let mut ns = Netns {
        name: name.clone(),
        client: None,
        watcher: None,
    };
    ns.watcher = Some(watch(&name)?);
    for cmd in [
        &["ip", "link", "set", tap, "netns", &name][..],
        &["ip", "-n", &name, "link", "set", "lo", "up"],
        &[
            "ip",
            "-n",
            &name,
            "addr",
            "add",
            "198.18.0.1/24",
            "dev",
            tap,
        ],
        &["ip", "-n", &name, "link", "set", tap, "up"],
        // Wire-size frames with real checksums, as a NIC receives them.
        &[
            "ip", "netns", "exec", &name, "ethtool", "-K", tap, "tx", "off", "tso", "off", "gso",
            "off",
        ],
    ] {
        run(cmd)?;
    }
    let me = std::env::current_exe().context("cannot find this program to start the client")?;
    let me = me.to_string_lossy();
    let addr = format!("198.18.0.2:{port}");
    let mib = mib.to_string();
    ns.client = Some(
        Command::new("ip")
            .args(["netns", "exec", &name, &me, "--send", &addr, &mib])
            .spawn()
            .context("cannot start the client")?,
    );
    Ok(ns)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--send") {
        let (Some(addr), Some(mib)) = (args.get(i + 1), args.get(i + 2)) else {
            bail!("{USAGE}");
        };
        return send(addr, mib.parse().context(USAGE)?);
    }
    let lro = !args.iter().any(|a| a == "--no-lro");
    let client_mib: Option<u64> = match args.iter().position(|a| a == "--client") {
        Some(i) => Some(
            args.get(i + 1)
                .and_then(|m| m.parse().ok())
                .filter(|&m| m > 0)
                .with_context(|| format!("{USAGE}\n--client needs a number of MiB"))?,
        ),
        None => None,
    };
    let mut positional = args
        .iter()
        .enumerate()
        .filter(|&(i, a)| {
            let after_client = i > 0 && args[i - 1] == "--client";
            !a.starts_with("--") && !after_client
        })
        .map(|(_, a)| a);
    let pid_name = format!("lroex{}t", std::process::id());
    let tap_name = positional.next().map_or(
        if client_mib.is_some() {
            pid_name.as_str()
        } else {
            "lrotap0"
        },
        String::as_str,
    );
    let port: u16 = positional
        .next()
        .map_or(Ok(5201), |p| p.parse())
        .context(USAGE)?;

    let tap = TunTapInterface::new(tap_name, Medium::Ethernet)
        .map_err(|e| anyhow::anyhow!("cannot create TAP device {tap_name} (root needed?): {e}"))?;
    // 256 descriptors; 64 pages of 32 KiB cut into 2 KiB fragments (Myri10GE page frags).
    let mut storage: Box<RxRingStorage<256, 64>> = Box::default();
    let mut memory = vec![0u8; 64 * 32 * 1024];
    let ring = RxRing::new(
        &mut storage,
        &mut memory,
        BufferLayout::page_frags(32 * 1024, 2048),
    )?;
    let mut mac = SimMac::new(&ring);
    let mut staging = vec![0u8; STAGING_LEN];
    let mut dev: LroDevice<'_, &RxRing<'_>, TunTapInterface> =
        LroDevice::new(&ring, tap, &mut staging);
    dev.set_coalescing(lro);

    let start = WallInstant::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as i64);
    let hw = HardwareAddress::Ethernet(EthernetAddress([0x02, 0, 0, 0, 0x4d, 0x10]));
    let mut iface = Interface::new(IfaceConfig::new(hw), &mut dev, now());
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::v4(198, 18, 0, 2), 24));
    });
    let mut sockets = SocketSet::new(vec![]);
    let handle = sockets.add(tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; 1 << 20]),
        tcp::SocketBuffer::new(vec![0u8; 4096]),
    ));
    sockets.get_mut::<tcp::Socket<'_>>(handle).listen(port)?;
    println!(
        "listening on 198.18.0.2:{port} behind {tap_name} (coalescing {})",
        if lro { "on" } else { "off" }
    );
    let mut netns = match client_mib {
        Some(mib) => {
            let ns = start_client(tap_name, port, mib)?;
            println!(
                "client: the kernel's TCP stack in namespace {} sends {mib} MiB",
                ns.name
            );
            Some(ns)
        }
        None => {
            println!("give the kernel 198.18.0.1/24 on {tap_name} and connect (see the example's documentation)");
            None
        }
    };

    let mut bytes = 0u64;
    let mut counting = false;
    let mut base = (dev.stats(), WallInstant::now());
    loop {
        let pumped = mac.pump(dev.inner_mut(), now(), usize::MAX);
        iface.poll(now(), &mut dev, &mut sockets);
        let socket = sockets.get_mut::<tcp::Socket<'_>>(handle);
        if !socket.is_open() {
            socket.listen(port)?;
        }
        let mut got = 0;
        while socket.can_recv() {
            got += socket.recv(|data| (data.len(), data.len()))?;
        }
        if !counting
            && matches!(
                socket.state(),
                tcp::State::Established | tcp::State::CloseWait
            )
        {
            // Established: count this connection from here. CLOSE-WAIT too: the client's ACK,
            // data and FIN can come in one poll (one segment, or frames that arrived together),
            // and then `may_recv` is never seen true once the data has been read.
            counting = true;
            base = (dev.stats(), WallInstant::now());
        }
        bytes += got as u64;
        if counting && !socket.may_recv() && !socket.can_recv() {
            counting = false;
            socket.close();
            let s = dev.stats();
            let ring_frames = s.frames_in - base.0.frames_in;
            let stack_frames = s.frames_to_stack - base.0.frames_to_stack;
            let secs = base.1.elapsed().as_secs_f64();
            println!(
                "connection closed: {bytes} bytes in {secs:.2} s ({:.0} Mbit/s); ring frames {ring_frames}, frames smoltcp processed {stack_frames} ({:.1} ring frames per smoltcp frame)",
                bytes as f64 * 8.0 / secs / 1e6,
                ring_frames as f64 / stack_frames.max(1) as f64,
            );
            bytes = 0;
            if let Some(ns) = &mut netns {
                // One connection in client mode: let the client finish, then clean up.
                iface.poll(now(), &mut dev, &mut sockets);
                let status = ns.client.take().map(|mut c| c.wait()).transpose()?;
                if status.is_some_and(|s| !s.success()) {
                    bail!("the client failed: {status:?}");
                }
                return Ok(());
            }
        }
        if let Some(ns) = &mut netns {
            // A client that could not connect must not leave the server waiting forever.
            if let Some(c) = &mut ns.client {
                if let Some(status) = c.try_wait()? {
                    if !status.success() {
                        bail!("the client failed ({status}) before the transfer ended");
                    }
                }
            }
        }
        if pumped == 0 && got == 0 {
            let delay = iface
                .poll_delay(now(), &sockets)
                .unwrap_or(Duration::from_millis(100))
                .min(Duration::from_millis(100));
            wait(std::os::fd::AsRawFd::as_raw_fd(dev.inner()), Some(delay))?;
        }
    }
}
