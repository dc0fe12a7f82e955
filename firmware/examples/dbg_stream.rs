use mrc_firmware::testkit::stream::*;
fn main() {
    let seed: u64 = std::env::args().nth(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let loss: u32 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let r = run_stream(StreamConfig { seed, packets: n, loss_ppm: loss, ..Default::default() });
    println!("{r:#?}");
}
