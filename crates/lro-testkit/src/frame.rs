//! The frame type the harness pushes ([`Tagged`]: an identity the engine cannot forge) and
//! the sink that records what comes out ([`Recorder`], [`Out`]).

use lro_core::testing::FrameSpec;
use lro_core::{Segment, SegmentInfo, Sink};
use lro_gre::testing::{GreSpec, InnerFrame};

/// The bytes of the frame `spec` describes (`FrameSpec::write` fills a caller's buffer; a test
/// wants the frame owned).
pub fn bytes_of(spec: &FrameSpec<'_>) -> Vec<u8> {
    let mut b = vec![0u8; spec.len()];
    spec.write(&mut b).expect("a buffer of the spec's length");
    b
}

/// The bytes of `inner` wrapped in the GRE tunnel `gre` (`GreSpec::write` fills a caller's
/// buffer). Panics when `inner` cannot be wrapped (see `GreSpec::write`'s errors).
pub fn wrapped(gre: &GreSpec, inner: InnerFrame<'_>) -> Vec<u8> {
    let mut b = vec![
        0u8;
        gre.wrapped_len(inner)
            .expect("an inner frame GRE can carry")
    ];
    gre.write(inner, &mut b)
        .expect("a buffer of the wrapped length");
    b
}

/// A frame buffer with an identity the engine cannot forge (not `Clone`).
#[derive(Debug)]
pub struct Tagged {
    /// Index of the input.
    pub id: usize,
    /// Bytes.
    pub buf: Vec<u8>,
}

impl AsRef<[u8]> for Tagged {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl AsMut<[u8]> for Tagged {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

/// What came out.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // test records, built once per output
pub enum Out {
    /// A segment.
    Seg {
        /// Frame ids, head first.
        ids: Vec<usize>,
        /// As one contiguous frame.
        bytes: Vec<u8>,
        /// The scatter-gather pieces.
        chunks: Vec<Vec<u8>>,
        /// Its info.
        info: SegmentInfo,
    },
    /// A released frame.
    Rel(usize),
}

/// Records the output in order.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// Everything, in order.
    pub out: Vec<Out>,
}

impl Sink<Tagged> for Recorder {
    fn segment(&mut self, seg: Segment<'_, Tagged>) {
        let info = *seg.info();
        let mut bytes = vec![0u8; seg.len()];
        let n = seg.copy_to(&mut bytes).expect("sized to fit");
        assert_eq!(n, seg.len(), "copy_to wrote {n} bytes of {}", seg.len());
        assert!(
            seg.copy_to(&mut vec![0u8; seg.len().saturating_sub(1)])
                .is_err()
                || seg.is_empty(),
            "copy_to into a short buffer succeeded"
        );
        let chunks: Vec<Vec<u8>> = seg.chunks().map(<[u8]>::to_vec).collect();
        assert_eq!(seg.head(), &chunks[0][..], "head() is not the first chunk");
        let ids: Vec<usize> = seg.into_frames().map(|f| f.id).collect();
        assert_eq!(
            ids.len(),
            chunks.len(),
            "frames and chunks differ in number"
        );
        self.out.push(Out::Seg {
            ids,
            bytes,
            chunks,
            info,
        });
    }

    fn release(&mut self, frame: Tagged) {
        self.out.push(Out::Rel(frame.id));
    }
}
