//! mrcctl: inspect and drive MRC NICs.
fn main() {
    eprintln!("mrcctl: no commands are implemented yet (see issue 6); nothing was done");
    std::process::exit(2);
}
