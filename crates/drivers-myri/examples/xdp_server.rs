//! A smoltcp TCP server on an AF_XDP socket with the lro coalescer in front, and the two
//! helpers `scripts/xdp-demo.sh` compares it with.
//!
//! Build: `cargo build --release -p drivers-myri --features xdp,smoltcp --example xdp_server`
//! (`scripts/xdp-demo.sh` builds and runs it).
//!
//! ```text
//! xdp_server IFACE [--ip A.B.C.D/LEN] [--port P] [--connections N] [--no-lro] [--mode native|generic|auto]
//!     smoltcp at --ip (default 198.18.0.2/24) with IFACE's MAC address, behind the XDP program
//!     and an AF_XDP socket on queue 0; serves connections (reads and discards), and for each
//!     prints bytes, throughput, frames received from AF_XDP and frames smoltcp processed.
//!     Ctrl-C (SIGINT/SIGTERM) stops it; the XDP program is detached on the way out (and by
//!     the kernel, with the program's BPF link, if the process is killed).
//! xdp_server IFACE --kernel [--port P] [--connections N]
//!     the same measurement with the kernel's own TCP receiver (its GRO) on IFACE instead.
//! xdp_server --send ADDR:PORT MIB
//!     the kernel's TCP client: sends MIB MiB and closes.
//! ```
//! Needs root for the first two. Run it inside the namespace that holds IFACE
//! (`ip netns exec NS ...`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallInstant};

use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::smoltcp::iface::{Config as IfaceConfig, Interface, SocketSet};
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::time::Instant;
use drivers_myri::smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr};
use drivers_myri::xdp::{stop_on_signals, XdpMode, XdpProgram, XskConfig, XskRx, XskTx};

struct Args {
    ifname: String,
    port: u16,
    connections: Option<usize>,
    lro: bool,
    kernel: bool,
    mode: XdpMode,
    ip: IpCidr,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: xdp_server IFACE [--port P] [--connections N] [--no-lro] [--kernel] [--mode native|generic|auto] [--ip A.B.C.D/LEN]\n       xdp_server --send ADDR:PORT MIB"
    );
    ExitCode::from(2)
}

fn parse(args: &[String]) -> Option<Args> {
    let mut a = Args {
        ifname: String::new(),
        port: 5201,
        connections: None,
        lro: true,
        kernel: false,
        mode: XdpMode::Auto,
        ip: "198.18.0.2/24".parse().ok()?,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--port" => a.port = it.next()?.parse().ok()?,
            "--connections" => a.connections = Some(it.next()?.parse().ok()?),
            "--no-lro" => a.lro = false,
            "--kernel" => a.kernel = true,
            "--ip" => a.ip = it.next()?.parse().ok()?,
            "--mode" => {
                a.mode = match it.next()?.as_str() {
                    "native" => XdpMode::Native,
                    "generic" => XdpMode::Generic,
                    "auto" => XdpMode::Auto,
                    _ => return None,
                }
            }
            s if !s.starts_with('-') && a.ifname.is_empty() => a.ifname = s.to_owned(),
            _ => return None,
        }
    }
    (!a.ifname.is_empty()).then_some(a)
}

/// The kernel's TCP client.
fn send(addr: &str, mib: usize) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr)?;
    let buf = vec![0x5au8; 256 * 1024];
    let total = mib << 20;
    let start = WallInstant::now();
    let mut sent = 0;
    while sent < total {
        let n = buf.len().min(total - sent);
        stream.write_all(&buf[..n])?;
        sent += n;
    }
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut rest = [0u8; 64];
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let _ = stream.read(&mut rest);
    let secs = start.elapsed().as_secs_f64();
    println!(
        "sent {sent} bytes in {secs:.2} s ({:.0} Mbit/s)",
        sent as f64 * 8.0 / secs / 1e6
    );
    Ok(())
}

fn rx_packets(ifname: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/statistics/rx_packets"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The kernel's own receiver on the interface, for comparison.
fn kernel_sink(a: &Args, stop: &AtomicBool) -> std::io::Result<()> {
    let listener = TcpListener::bind(("0.0.0.0", a.port))?;
    listener.set_nonblocking(true)?;
    println!("listening (kernel TCP) on port {}", a.port);
    let mut served = 0;
    while a.connections.is_none_or(|n| served < n) {
        let (mut stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return Err(e),
        };
        stream.set_nonblocking(false)?;
        let frames0 = rx_packets(&a.ifname);
        let mut buf = vec![0u8; 256 * 1024];
        let mut bytes = 0usize;
        let mut first = None;
        loop {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                break;
            }
            first.get_or_insert_with(WallInstant::now);
            bytes += n;
        }
        let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
        served += 1;
        println!(
            "connection {served} from {peer} (kernel TCP, GRO): {bytes} bytes in {secs:.2} s, {:.0} Mbit/s; frames received {}",
            bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
            // (0 when the counter could not be read, not an underflow)
            rx_packets(&a.ifname).saturating_sub(frames0)
        );
    }
    Ok(())
}

/// CPU time of the calling thread in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported
    // on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mac_of(ifname: &str) -> Option<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).ok()?;
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for m in &mut mac {
        *m = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

fn smoltcp_server(a: &Args, stop: &AtomicBool) -> Result<(), String> {
    let mac =
        mac_of(&a.ifname).ok_or_else(|| format!("cannot read the MAC address of {}", a.ifname))?;
    let xdp = XdpProgram::attach(&a.ifname, a.mode).map_err(|e| e.to_string())?;
    let (rx, tx) = xdp
        .socket(0, &XskConfig::default())
        .map_err(|e| e.to_string())?
        .split();
    let mut staging = vec![0u8; STAGING_LEN];
    let mut dev: LroDevice<'_, XskRx, XskTx> = LroDevice::new(rx, tx, &mut staging);
    dev.set_coalescing(a.lro);
    let start = WallInstant::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as i64);
    let hw = HardwareAddress::Ethernet(EthernetAddress(mac));
    let mut iface = Interface::new(IfaceConfig::new(hw), &mut dev, now());
    iface.update_ip_addrs(|addrs| {
        let _ = addrs.push(a.ip);
    });
    let mut sockets = SocketSet::new(vec![]);
    let new_socket = || {
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; 1 << 20]),
            tcp::SocketBuffer::new(vec![0u8; 4096]),
        );
        s.listen(a.port).map(|()| s).map_err(|e| e.to_string())
    };
    let mut handle = sockets.add(new_socket()?);
    println!(
        "listening (smoltcp {} on AF_XDP, {} XDP, lro {}) on port {}",
        a.ip,
        xdp.mode(),
        if a.lro { "on" } else { "off" },
        a.port
    );
    let mut served = 0;
    let mut bytes = 0usize;
    let mut first: Option<WallInstant> = None;
    // The connection got past the handshake (it may have sent nothing).
    let mut connected = false;
    let mut base = (dev.stats(), dev.engine_stats().clone());
    let mut cpu0 = thread_cpu_ns();
    let (mut poll_ns, mut kick_ns) = (0u64, 0u64);
    while a.connections.is_none_or(|n| served < n) && !stop.load(Ordering::SeqCst) {
        let t0 = thread_cpu_ns();
        iface.poll(now(), &mut dev, &mut sockets);
        poll_ns += thread_cpu_ns() - t0;
        let socket = sockets.get_mut::<tcp::Socket<'_>>(handle);
        let mut got = 0;
        while socket.can_recv() {
            got += socket.recv(|d| (d.len(), d.len())).unwrap_or(0);
        }
        if got > 0 && first.is_none() {
            first = Some(WallInstant::now());
            cpu0 = thread_cpu_ns();
            (poll_ns, kick_ns) = (0, 0);
        }
        bytes += got;
        if matches!(
            socket.state(),
            tcp::State::Established | tcp::State::CloseWait
        ) {
            connected = true;
        }
        if connected && !socket.may_recv() && !socket.can_recv() {
            socket.close();
            iface.poll(now(), &mut dev, &mut sockets);
            dev.inner_mut().flush();
            let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
            let cpu_ms = (thread_cpu_ns() - cpu0) as f64 / 1e6;
            let s = dev.stats();
            let frames = s.frames_in - base.0.frames_in;
            let to_stack = s.frames_to_stack - base.0.frames_to_stack;
            served += 1;
            println!(
                "connection {served} (smoltcp on AF_XDP, lro {}): {bytes} bytes in {secs:.2} s, {:.0} Mbit/s; frames received {frames}, frames smoltcp processed {to_stack} ({:.1} per smoltcp frame), ACKs merged {}; server thread CPU {cpu_ms:.0} ms ({:.3} ms/MB; smoltcp polls {:.0} ms, TX kicks {:.0} ms)",
                if a.lro { "on" } else { "off" },
                bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
                frames as f64 / to_stack.max(1) as f64,
                dev.engine_stats().acks_merged - base.1.acks_merged,
                cpu_ms / (bytes as f64 / 1e6),
                poll_ns as f64 / 1e6,
                kick_ns as f64 / 1e6,
            );
            sockets.remove(handle);
            handle = sockets.add(new_socket()?);
            bytes = 0;
            first = None;
            connected = false;
            base = (dev.stats(), dev.engine_stats().clone());
            continue;
        }
        let t0 = thread_cpu_ns();
        dev.inner_mut().flush();
        kick_ns += thread_cpu_ns() - t0;
        if got == 0 {
            let delay = iface
                .poll_delay(now(), &sockets)
                .map_or(Duration::from_millis(50), |d| {
                    Duration::from_micros(d.total_micros())
                })
                .min(Duration::from_millis(50));
            let _ = dev.driver_mut().wait(Some(delay));
        }
    }
    if stop.load(Ordering::SeqCst) {
        println!("stopped by a signal");
    }
    drop(iface);
    let (mut rx, _tx) = dev.into_parts();
    rx.refill();
    println!("{}", rx.account());
    xdp.detach().map_err(|e| e.to_string())?;
    println!("XDP program detached");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--send") {
        let (Some(addr), Some(mib)) = (args.get(1), args.get(2).and_then(|m| m.parse().ok()))
        else {
            return usage();
        };
        return match send(addr, mib) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xdp_server --send: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(a) = parse(&args) else {
        return usage();
    };
    let stop = match stop_on_signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xdp_server: signal handler: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if a.kernel {
        kernel_sink(&a, stop).map_err(|e| e.to_string())
    } else {
        smoltcp_server(&a, stop)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xdp_server: {e}");
            ExitCode::FAILURE
        }
    }
}
