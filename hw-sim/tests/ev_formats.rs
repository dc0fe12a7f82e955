//! The three EV formats run through the fabric: `ev-srv6` (uSID source routes), `ev-udp` (EV in
//! the UDP source port) and `ev-stev` (flow label + source port) through ECMP-hashing switches,
//! each with a link failing mid-run. Every flow completes with every byte delivered, and each
//! format is routed the way it says (source-routed packets die on the failed link as
//! `usid_port_down`, hashed ones as `link_down`).

use mrc_abi::wire::EvFormat;
use mrc_sim::fabric::DropCause;
use mrc_sim::nic::Transport;
use mrc_sim::run::run;
use mrc_sim::scenario::ScenarioSpec;
use mrc_sim::workload::Workload;

#[test]
fn every_ev_format_delivers_every_byte_through_the_fabric() {
    for (name, format) in [
        ("ev-srv6", EvFormat::Srv6),
        ("ev-udp", EvFormat::Udp),
        ("ev-stev", EvFormat::Stev),
    ] {
        let spec = ScenarioSpec::builtin(name).unwrap();
        let sc = spec.scenario(Transport::Mrc);
        assert_eq!(sc.mrc_ev_format, format, "{name}");
        let Workload::Permutation { bytes_per_host, .. } = sc.workload else {
            panic!("{name}: a permutation");
        };
        let r = run(&sc).unwrap();
        assert_eq!((r.completed, r.failed), (r.flows, 0), "{name}");
        assert_eq!(r.acked_bytes, u64::from(r.hosts) * bytes_per_host, "{name}");
        assert!(r.conserved, "{name}");
        let usid_drops = r.drops[DropCause::UsidPortDown as usize];
        let hashed_drops = r.drops[DropCause::LinkDown as usize];
        assert!(r.retransmits > 0, "{name}: the failure cost packets");
        if format == EvFormat::Srv6 {
            assert!(usid_drops > 0, "{name}: source routes hit the failed link");
        } else {
            assert_eq!(usid_drops, 0, "{name}: nothing is source-routed");
            assert!(hashed_drops > 0, "{name}: hashed EVs hit the failed link");
        }
    }
}

#[test]
fn ev_format_needs_the_mrc_transport() {
    let text = include_str!("../scenarios/ev-udp.toml")
        .replace(r#"transports = ["mrc"]"#, r#"transports = ["mrc-1ev"]"#);
    let e = ScenarioSpec::parse("s.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nic.ev_format"), "{e}");
}
