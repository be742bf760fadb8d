//! The firmware's only `unsafe`: reading the painted stack.
//!
//! cortex-m-rt's `paint-stack` feature fills the RAM between `_stack_end` (the end of .bss)
//! and `_stack_start` (the initial stack pointer) with [`cortex_m_rt::STACK_PAINT_VALUE`]
//! before `main`; the deepest the stack ever went is where the paint stops being intact.

use cortex_m_rt::STACK_PAINT_VALUE;

extern "C" {
    static _stack_start: u32;
    static _stack_end: u32;
}

/// The lowest bytes of the stack region that must stay painted: a stack that reached them
/// may have gone on into `.bss` (nothing guards the boundary), which the paint cannot tell.
const GUARD: usize = 64;

/// Bytes of stack used so far (the high-water mark since reset); `None` when the stack
/// reached the lowest [`GUARD`] bytes of its region, where an overflow into `.bss` (the frame
/// buffers, the engine) cannot be told from a deep but legal use.
pub(crate) fn stack_high_water() -> Option<usize> {
    let top = core::ptr::addr_of!(_stack_start) as usize;
    let bottom = core::ptr::addr_of!(_stack_end) as usize;
    let mut p = bottom;
    while p < top {
        // SAFETY: `p` is word-aligned (`_stack_end` is 4-aligned, checked by cortex-m-rt's
        // linker script) and lies in RAM between `_stack_end` and `_stack_start`, which the
        // linker reserves for the stack and which cortex-m-rt painted before `main`. No Rust
        // reference points below the current stack pointer, and the words above it belong
        // to live frames that are only read here, never written, with a volatile read.
        let word = unsafe { (p as *const u32).read_volatile() };
        if word != STACK_PAINT_VALUE {
            break;
        }
        p += 4;
    }
    (p - bottom >= GUARD).then_some(top - p)
}
