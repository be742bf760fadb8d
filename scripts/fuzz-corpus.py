#!/usr/bin/env python3
"""Seed corpora for the fuzz targets in fuzz/, from packet captures.

Reads every pcap / pcapng under the given folders (default: ../shared/corpus/tcpdump-tests,
830 captures of odd and malformed packets, and ../shared/captures, real kernel TCP traffic in
xz-compressed pcaps), takes out the frames and writes per-target seed files:

    parse/        one frame per file: a selector byte (0: no stripped VLAN tag) then the frame
    coalesce/     a structured `lro_testkit::structured::Input`: an engine setup then up to 24
                  consecutive frames of one capture as raw-frame operations, with flushes
    rss_sorted/   the same inputs (the target decodes the same type)
    resegment/    a `Case` whose raw bytes are one TCP frame (resegmented with MSS 536)

The structured seeds are written in the byte layout the `arbitrary` crate (1.x) decodes:
integers little-endian from the front, `bool` the low bit of a byte, `Option` a bool then the
value, an enum a u32 `tag` with variant `(tag * variants) >> 32`, and each element of a `Vec`
preceded by a byte whose low bit says "one more". `cargo run --example explain -- FILE` in
fuzz/ decodes a coalesce seed back, to check this stays in step with the types.

Link types: Ethernet (1) frames are pushed as Ethernet; raw IP (101, 228, 229, 12, 14) as raw
IP; Linux cooked captures (SLL 113, SLL2 276) have their 16/20-byte header removed and are
pushed as raw IP; anything else (IPoIB, 802.11, ...) goes in as Ethernet bytes unchanged, which
is exactly the "hostile bytes" case.

Usage: scripts/fuzz-corpus.py [--out fuzz/corpus-full] [--max-per-capture N] [DIR_OR_FILE...]
Then minimise into the committed corpus (see fuzz/README.md):
    cd fuzz && cargo +nightly fuzz cmin -O -s none parse corpus-full/parse   (etc.)
"""

import argparse
import hashlib
import lzma
import os
import struct
import sys

RAW_LINKS = {101, 228, 229, 12, 14}
ETHERNET = 1


def read_pcap(data):
    """Yields (linktype, frame) from a classic pcap; stops quietly at truncation."""
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        return
    if len(data) < 24:
        return
    link = struct.unpack(e + "I", data[20:24])[0] & 0x0FFFFFFF
    at = 24
    while at + 16 <= len(data):
        incl = struct.unpack(e + "I", data[at + 8 : at + 12])[0]
        at += 16
        if incl > len(data) - at:
            return
        yield link, data[at : at + incl]
        at += incl


def read_pcapng(data):
    """Yields (linktype, frame) from EPB and SPB blocks of a pcapng; stops at damage."""
    at = 0
    e = "<"
    links = []
    while at + 12 <= len(data):
        btype = struct.unpack(e + "I", data[at : at + 4])[0]
        if btype == 0x0A0D0D0A:
            bom = data[at + 8 : at + 12]
            e = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">"
            links = []
        blen = struct.unpack(e + "I", data[at + 4 : at + 8])[0]
        if blen < 12 or at + blen > len(data):
            return
        body = data[at + 8 : at + blen - 4]
        if btype == 1 and len(body) >= 2:
            links.append(struct.unpack(e + "H", body[:2])[0])
        elif btype == 6 and len(body) >= 20:
            iface, _, _, cap = struct.unpack(e + "IIII", body[:16])
            link = links[iface] if iface < len(links) else ETHERNET
            yield link, body[20 : 20 + min(cap, len(body) - 20)]
        elif btype == 3 and len(body) >= 4:
            yield (links[0] if links else ETHERNET), body[4:]
        at += blen


def frames_of(path):
    """(is_raw_ip, bytes) for every frame of a capture file."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".xz"):
        try:
            data = lzma.decompress(data)
        except lzma.LZMAError:
            return []
    reader = read_pcapng if data[:4] == b"\x0a\x0d\x0d\x0a" else read_pcap
    out = []
    try:
        for link, frame in reader(data):
            if link == ETHERNET:
                out.append((False, frame))
            elif link in RAW_LINKS:
                out.append((True, frame))
            elif link == 113:
                out.append((True, frame[16:]))
            elif link == 276:
                out.append((True, frame[20:]))
            else:
                out.append((False, frame))
    except struct.error:
        pass
    return out


def u8(v):
    return struct.pack("<B", v & 0xFF)


def u16(v):
    return struct.pack("<H", v & 0xFFFF)


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def boolean(v):
    return b"\x01" if v else b"\x00"


def tag(variant, count):
    """A u32 the derive decodes as `variant` of `count`."""
    return u32(((variant << 32) + count - 1) // count)


def vec_u8(data):
    return b"".join(b"\x01" + bytes([b]) for b in data) + b"\x00"


def setup(gro, table):
    out = boolean(gro) + u8(table) + boolean(True) + boolean(False) + u8(0) + u16(0)
    out += boolean(False) + boolean(False)  # no idle timeout, no max hold
    for i in range(4):
        # v6, link, ext, ts, mss (2: 1448), fixed_id, twin, isn
        out += boolean(i % 2) + u8(i) + u8(0) + boolean(i < 2) + u8(2) + boolean(False)
        out += u8(0) + u32(0x01000001 * (i + 1))
    return out


# Op variants: Spec, Raw, FlushAll, FlushIdle, Tick. CsumMode: None, Verified, Complete, Off.
def raw_op(frame, raw_ip, csum):
    return (
        b"\x01"
        + tag(1, 5)
        + vec_u8(frame)
        + boolean(raw_ip)
        + boolean(False)
        + tag(csum, 4)
        + boolean(False)
        + boolean(False)
    )


def flush_all_op():
    return b"\x01" + tag(2, 5)


def coalesce_seed(frames, gro, table, csum):
    out = setup(gro, table)
    for n, (raw_ip, frame) in enumerate(frames):
        out += raw_op(frame, raw_ip, csum)
        if n % 11 == 10:
            out += flush_all_op()
    return out + b"\x00"


def resegment_seed(frame, raw_ip):
    flow = (
        boolean(False) + u8(0) + boolean(False) + u8(1) + boolean(False) + u16(1448)
        + u32(1000) + u16(7) + u32(5) + u16(500) + u8(0)
        + b"\x01" + u8(1) + u16(0) + b"\x01" + u8(1) + u16(0) + b"\x01" + u8(0) + u16(300)
        + b"\x00"
        + boolean(True)
    )
    return flow + flow + struct.pack("<Q", 0xAAAA) + u8(1) + vec_u8(frame) + boolean(raw_ip) + u16(536) + boolean(False)


def write(dirpath, data, seen):
    h = hashlib.sha1(data).hexdigest()
    if h in seen:
        return
    seen.add(h)
    with open(os.path.join(dirpath, h), "wb") as f:
        f.write(data)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    shared = os.path.join(here, "..", "..", "shared")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(here, "..", "fuzz", "corpus-full"))
    ap.add_argument("--max-per-capture", type=int, default=400, help="frames taken per capture")
    ap.add_argument("inputs", nargs="*")
    args = ap.parse_args()
    inputs = args.inputs or [
        os.path.join(shared, "corpus", "tcpdump-tests"),
        os.path.join(shared, "captures"),
    ]
    files = []
    for p in inputs:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if not f.endswith(".md"))
        elif os.path.exists(p):
            files.append(p)
        else:
            print(f"skipping {p}: not found", file=sys.stderr)
    dirs = {}
    for t in ("parse", "coalesce", "rss_sorted", "resegment"):
        dirs[t] = os.path.join(args.out, t)
        os.makedirs(dirs[t], exist_ok=True)
    seen = set()
    counts = dict.fromkeys(dirs, 0)
    for n, path in enumerate(files):
        frames = frames_of(path)[: args.max_per_capture]
        if not frames:
            continue
        for raw_ip, frame in frames:
            before = len(seen)
            write(dirs["parse"], b"\x00" + frame, seen)
            counts["parse"] += len(seen) - before
            if len(frame) >= 40 and len(frame) <= 2000:
                before = len(seen)
                write(dirs["resegment"], resegment_seed(frame, raw_ip), seen)
                counts["resegment"] += len(seen) - before
        for k in range(0, len(frames), 24):
            chunk = frames[k : k + 24]
            for target, gro in (("coalesce", n % 2 == 0), ("rss_sorted", n % 2 == 1)):
                before = len(seen)
                write(dirs[target], coalesce_seed(chunk, gro, 1 + (k // 24) % 3, n % 3), seen)
                counts[target] += len(seen) - before
    print(f"{len(files)} captures -> " + ", ".join(f"{t}: {c}" for t, c in counts.items()))


if __name__ == "__main__":
    main()
