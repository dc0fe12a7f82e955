//! QPs and MRs of the device tables mirrored into each NIC's engine and stage (see the module
//! docs of `fabric`).

use mrc_abi::device::admin::QpState as DevQpState;
use mrc_abi::device::EvState;
use mrc_abi::wire::EvFormat;
use mrc_abi::Psn;
use mrc_firmware::datapath::placement::{Access, MemRegion};
use mrc_firmware::engine::ev_state::EvConfig;
use mrc_firmware::engine::qp::{CcProfile, EvProfile, QpAttrs, QpState};

use super::super::state::RKEY_BIT;
use super::super::World;

impl World {
    /// Mirrors NIC `i`'s QPs and MRs into its engine and stage.
    pub(super) fn sync_engine(&mut self, i: usize) {
        let Some(cfg) = self.fabric_cfg() else { return };
        let now = self.now_ns;
        let n = &self.nics[i];
        let Some(fab) = self.fabric.as_mut() else {
            return;
        };
        let ne = &mut fab.engines[i];
        // Regions.
        let want: Vec<(u32, u64, u64)> =
            n.t.mrs
                .iter()
                .filter(|(_, m)| m.remote_writable())
                .map(|(k, m)| (k | RKEY_BIT, m.va, m.len))
                .collect();
        ne.rkeys.retain(|r| {
            let keep = want.iter().any(|w| w.0 == *r);
            if !keep {
                let _ = ne.nic.dp.deregister_region(*r);
            }
            keep
        });
        for (rkey, va, len) in want {
            if !ne.rkeys.contains(&rkey)
                && ne
                    .nic
                    .dp
                    .register_region(MemRegion {
                        rkey,
                        base_va: va,
                        length: len,
                        access: Access::REMOTE_WRITE,
                    })
                    .is_ok()
            {
                ne.rkeys.push(rkey);
            }
        }
        // QPs gone or reset lose their engine QP.
        let gone: Vec<u32> = ne
            .qps
            .keys()
            .copied()
            .filter(|q| {
                n.t.qps
                    .get(q)
                    .is_none_or(|p| matches!(p.state, DevQpState::Reset))
            })
            .collect();
        for q in gone {
            if let Some(e) = ne.qps.remove(&q) {
                let _ = ne.nic.fw_mut().destroy_qp(e);
                ne.dev_qpn.remove(&e);
                ne.sends.retain(|_, p| p.qpn != q);
            }
        }
        // New QPs and state changes.
        let mut denials = 0;
        for (&q, p) in n.t.qps.iter() {
            let target = match p.state {
                DevQpState::Init => QpState::Init,
                DevQpState::Rtr => QpState::Rtr,
                DevQpState::Rts => QpState::Rts,
                _ => continue,
            };
            let e = match ne.qps.get(&q) {
                Some(&e) => e,
                None => {
                    let Ok(e) = ne.nic.fw_mut().create_qp() else {
                        continue;
                    };
                    ne.qps.insert(q, e);
                    ne.dev_qpn.insert(e, q);
                    e
                }
            };
            let evs =
                n.t.ev_profiles
                    .get(&p.ev_profile)
                    .map_or(n.params.max_evs_per_qp, |pr| pr.evs.len() as u32)
                    .clamp(1, 256) as u16;
            let mut table = EvConfig::new(evs, n.params.num_planes.clamp(1, 4) as u8);
            table.probe_base_ns = 20_000;
            table.probe_cap_ns = 2_000_000;
            let ev = EvProfile {
                table,
                format: EvFormat::Udp,
                value_base: 0xC000,
            };
            let cc = CcProfile::Fixed {
                cwnd_bytes: cfg.cwnd_bytes,
            };
            let attrs = QpAttrs::connect(ev, cc, p.dest_qpn)
                .psns(Psn::new(p.sq_psn), Psn::new(p.rq_psn))
                .window(cfg.mpr, cfg.max_wimm)
                .retry(cfg.retry_cnt, cfg.timeout_exp);
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                let cur = ne.nic.fw().qp_state(e);
                if cur.is_none_or(|c| rank(c) >= rank(target)) {
                    break;
                }
                if cur.is_some_and(|c| rank(c) >= rank(s)) {
                    continue;
                }
                if ne.nic.fw_mut().modify_qp(e, s, &attrs, now).is_err() {
                    break;
                }
            }
            // Controller EV denials (and re-allowances) of the QP's profile. Each change is
            // told once; one the engine refuses (the min-active guard) is not retried.
            let denied: Vec<u16> =
                n.t.ev_profiles
                    .get(&p.ev_profile)
                    .map(|pr| {
                        pr.evs
                            .iter()
                            .take(usize::from(evs))
                            .enumerate()
                            .filter(|(_, v)| v.state == EvState::Denied)
                            .map(|(k, _)| k as u16)
                            .collect()
                    })
                    .unwrap_or_default();
            let told: Vec<u16> = ne
                .denied
                .range((q, 0)..=(q, u16::MAX))
                .map(|k| k.1)
                .collect();
            if denied == told || ne.nic.fw().qp_state(e).is_none_or(|c| rank(c) < 1) {
                continue;
            }
            for &ev in denied.iter().filter(|v| !told.contains(v)) {
                let _ = ne.nic.fw_mut().set_ev_allowed(now, e, ev, false);
                ne.denied.insert((q, ev));
                denials += 1;
            }
            for &ev in told.iter().filter(|v| !denied.contains(v)) {
                let _ = ne.nic.fw_mut().set_ev_allowed(now, e, ev, true);
                ne.denied.remove(&(q, ev));
                denials += 1;
            }
        }
        fab.counters.ev_denials += denials;
        // The stage takes the QP contexts and EV table writes (unless the core is stalled).
        if !fab.faults.stalled(i) {
            fab.engines[i].pump(now);
        }
    }
}

fn rank(s: QpState) -> u8 {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Error => 4,
    }
}
