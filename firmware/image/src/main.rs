#![no_std]
#![no_main]
use riscv_rt::entry;
#[entry] fn main() -> ! { loop {} }
#[panic_handler] fn p(_: &core::panic::PanicInfo) -> ! { loop {} }
