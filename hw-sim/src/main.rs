fn main() {
    println!("mrc-sim: the simulator has not landed yet (issue 5).");
}
