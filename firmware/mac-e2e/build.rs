//! The memory map of QEMU's `mcimx6ul-evk` for aarch32-rt's linker script: the image, its data
//! and the stacks in DDR at 0x8000_0000 (the firmware keeps its rings, buffers and sockets on
//! the system-mode stack, so that one is large).

use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it"));
    let memory = "\
MEMORY {
    DDR : ORIGIN = 0x80000000, LENGTH = 128M
}
REGION_ALIAS(\"VECTORS\", DDR);
REGION_ALIAS(\"CODE\", DDR);
REGION_ALIAS(\"DATA\", DDR);
REGION_ALIAS(\"STACKS\", DDR);
PROVIDE(_sys_stack_size = 16M);
PROVIDE(_svc_stack_size = 16K);
PROVIDE(_und_stack_size = 16K);
PROVIDE(_abt_stack_size = 16K);
PROVIDE(_hyp_stack_size = 16K);
PROVIDE(_irq_stack_size = 1K);
PROVIDE(_fiq_stack_size = 1K);
";
    fs::write(out.join("memory.x"), memory).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    println!("cargo:rerun-if-changed=build.rs");
}
