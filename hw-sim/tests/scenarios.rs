//! Scenario files: the built-ins, validation errors (exact messages), the default's one source.

use mrc_sim::nic::Transport;
use mrc_sim::run::Scenario;
use mrc_sim::scenario::{ScenarioSpec, BUILTIN};

const DEFAULT: &str = include_str!("../scenarios/default.toml");

fn err(text: &str) -> String {
    ScenarioSpec::parse("s.toml", text).unwrap_err().to_string()
}

#[test]
fn probe() {
    for t in [
        DEFAULT.replace("planes = 4", "planes = 4\nbogus = 1"),
        DEFAULT.replace("planes = 4", "planes = \"four\""),
        DEFAULT.replace("planes = 4", ""),
        DEFAULT.replace("kmin_bytes = 37_350", "kmin_bytes = 37_350, x = 1"),
        DEFAULT.replace("kind = \"permutation\"", "kind = \"permutationx\""),
        DEFAULT.replace("msg_bytes = 262_144", "msg_bytes = 262_144\nfoo=1"),
        DEFAULT.replace("\"mrc-1ev\"", "\"mrc-2ev\""),
        DEFAULT.replace("planes = 4", "planes = 5"),
        DEFAULT.replace("radix = 16", "radix = 15"),
        DEFAULT.replace("planes = 4", "planes = -4"),
        "seed = ".to_string(),
    ] {
        println!("{}", err(&t));
    }
}
