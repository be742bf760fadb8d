//! A first end-to-end check: contiguous IPv4 segments merge into one valid segment.

use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};
use lro_core::{Config, Engine, RxMeta, Segment, Sink, Sizes};

#[derive(Default)]
struct Collect {
    out: Vec<Vec<u8>>,
    released: usize,
}

impl Sink<Vec<u8>> for Collect {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        let mut buf = vec![0; seg.len()];
        seg.copy_to(&mut buf).unwrap();
        self.out.push(buf);
    }
    fn release(&mut self, _frame: Vec<u8>) {
        self.released += 1;
    }
}

fn data(seq: u32, payload: &[u8], id: u16) -> Vec<u8> {
    let mut ip = etherparse::Ipv4Header::new(
        0,
        64,
        etherparse::IpNumber::TCP,
        [198, 18, 0, 1],
        [198, 18, 0, 2],
    )
    .unwrap();
    ip.identification = id;
    ip.dont_fragment = true;
    let mut v = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        .tcp(40000, 5201, seq, 512)
        .ack(77)
        .write(&mut v, payload)
        .unwrap();
    v
}

#[test]
fn contiguous_segments_merge_with_valid_checksums() {
    for config in [Config::gro(), Config::lro()] {
        let mut c: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(config);
        let mut sink = Collect::default();
        let payloads: Vec<Vec<u8>> = (0..4u8)
            .map(|i| vec![i.wrapping_mul(31).wrapping_add(1); 1000])
            .collect();
        let mut seq = 1000u32;
        for (i, p) in payloads.iter().enumerate() {
            c.push(data(seq, p, 10 + i as u16), &RxMeta::ethernet(0), &mut sink);
            seq += p.len() as u32;
        }
        c.flush_all(&mut sink);
        assert_eq!(sink.out.len(), 1, "{config:?}");
        let s = SlicedPacket::from_ethernet(&sink.out[0]).unwrap();
        let Some(TransportSlice::Tcp(tcp)) = s.transport else {
            panic!("not tcp")
        };
        let want: Vec<u8> = payloads.concat();
        assert_eq!(tcp.payload(), &want[..]);
        let Some(etherparse::NetSlice::Ipv4(ip)) = s.net else {
            panic!("not ipv4")
        };
        let h = ip.header().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
        let sum = tcp
            .to_header()
            .calc_checksum_ipv4(&h, tcp.payload())
            .unwrap();
        assert_eq!(tcp.checksum(), sum);
        assert!(c.stats().is_conserved());
        assert_eq!(c.stats().frames_merged, 3);
    }
}
