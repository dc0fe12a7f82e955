//! Diagnostics for issue 5 (not part of the product): per-flow and per-QP figures of a run.
use mrc_sim::core::time::Time;
use mrc_sim::nic::Transport;
use mrc_sim::run::{build, Scenario};

fn main() {
    if let Ok(v) = std::env::var("EXP") {
        mrc_firmware::EXP.store(v.parse().unwrap_or(0), core::sync::atomic::Ordering::Relaxed);
    }
    let args: Vec<String> = std::env::args().collect();
    let seed: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let nofail = args.iter().any(|a| a == "nofail");
    let fid = args.iter().any(|a| a == "fid");
    let mut sc = if fid {
        let text = std::fs::read_to_string("hw-sim/scenarios/permutation-1024.toml").unwrap();
        let _ = text;
        unimplemented!()
    } else {
        Scenario::default_for(Transport::Mrc)
    };
    sc.seed = seed;
    if nofail {
        sc.failure = None;
    }
    if args.iter().any(|a| a == "groups") {
        let mut g = Groups { last: Vec::new(), lastpsn: Vec::new(), rows: Vec::new() };
        mrc_sim::run::run_observed(&sc, &mut g).unwrap();
        println!("   t   | leaf0->X Gb/s/flow active cwnd | X->leaf0 | other inter | intra");
        for r in &g.rows {
            println!("{r}");
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "kinds") {
        let h: u32 = args[i + 1].parse().unwrap();
        let mut g = Kinds { h, bytes: [[0; 4]; 5], n: [[0; 4]; 5] };
        mrc_sim::run::run_observed(&sc, &mut g).unwrap();
        for (k, name) in ["data", "retx", "ack", "probe", "reply"].iter().enumerate() {
            println!("{name:6} bytes {:?} pkts {:?}", g.bytes[k], g.n[k]);
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "pair") {
        let a: u32 = args[i + 1].parse().unwrap();
        let b: u32 = args[i + 2].parse().unwrap();
        let mut g = PairTrace { a, b };
        mrc_sim::run::run_observed(&sc, &mut g).unwrap();
        return;
    }
    let mut sim = build(&sc).unwrap();
    let step = mrc_sim::core::time::Duration::from_us(10);
    loop {
        let next = sim.now().saturating_add(step).min(sc.time_limit);
        sim.run_until(next);
        if sim.handler().main_done() || sim.now() >= sc.time_limit {
            break;
        }
    }
    let now = sim.now();
    for n in &mut sim.handler_mut().nics {
        n.settle(now);
    }
    let w = sim.handler();
    {
        let pc = w.fabric.all_port_counters();
        let topo = w.fabric.topology();
        let mut per = [[0u64; 4]; 2];
        let mut pk = [[0u64; 4]; 2];
        for h in 0..64u32 {
            for pl in 0..4u32 {
                let p = topo.host_port(h, pl);
                let c = pc[p.0 as usize];
                per[(h >= 8) as usize][pl as usize] += c.tx_bytes;
                pk[(h >= 8) as usize][pl as usize] += c.tx_packets;
            }
        }
        println!("host tx bytes per plane, leaf0 hosts: {:?} pkts {:?}", per[0].map(|b| b / 8), pk[0].map(|b| b / 8));
        println!("host tx bytes per plane, other hosts: {:?} pkts {:?}", per[1].map(|b| b / 56), pk[1].map(|b| b / 56));
    }
    if args.iter().any(|a| a == "ports") {
        let pc = w.fabric.all_port_counters();
        let mut idx: Vec<usize> = (0..pc.len()).collect();
        idx.sort_by_key(|&i| std::cmp::Reverse(pc[i].ecn_marks * 1000 + pc[i].max_queue_bytes / 1000));
        for &i in idx.iter().take(40) {
            let p = mrc_sim::fabric::PortId(i as u32);
            let peer = w.fabric.port_peer(p).map(|q| w.fabric.topology().port_owner(q));
            println!("{:?} -> {:?}: ecn {} trims {} maxq {} tx {}", w.fabric.topology().port_owner(p), peer, pc[i].ecn_marks, pc[i].trims, pc[i].max_queue_bytes, pc[i].tx_packets);
        }
        return;
    }
    for (a, b) in [(10u32, 7u32), (0, 54), (7, 10), (20, 30), (0, 1)] {
        let nic = &w.nics[a as usize];
        let q = (0..nic.connections()).find(|&q| nic.peer(q) == Some(b)).unwrap();
        println!("{a}->{b}: caps {:?}", nic.qp(q).unwrap().ev_table().plane_capacities());
    }
    {
        let mut st = Vec::new();
        for (h, nic) in w.nics.iter().enumerate() {
            for q in 0..nic.connections() {
                st.push((nic.qp_stall(q).unwrap(), h, nic.peer(q).unwrap()));
            }
        }
        st.sort();
        for x in st.iter().rev().take(8) {
            println!("stall {:.1} us: {} -> {}", x.0.as_ps() as f64 / 1e6, x.1, x.2);
        }
    }
    let us = |t: Time| t.as_ps() as f64 / 1e6;
    let mut rs: Vec<_> = w.flow_results();
    rs.sort_by_key(|r| std::cmp::Reverse(r.done.unwrap_or(Time::ZERO)));
    println!("slowest flows: src(leaf) -> dst(leaf) done_us  stall_us retx");
    for r in rs.iter().take(40) {
        let f = r.flow;
        let nic = &w.nics[f.src as usize];
        let q = (0..nic.connections()).find(|&q| nic.peer(q) == Some(f.dst)).unwrap();
        let st = nic.qp_stall(q).unwrap();
        let rc = nic.qp(q).unwrap().requester().unwrap().counters();
        println!(
            "{:3}({}) -> {:3}({}) {:8.1} {:6.1} {:?}",
            f.src,
            f.src / 8,
            f.dst,
            f.dst / 8,
            us(r.done.unwrap_or(Time::ZERO)),
            st.as_ps() as f64 / 1e6,
            rc.retransmits
        );
    }
    // Per leaf pair: the latest done.
    let mut m = [[0f64; 8]; 8];
    let mut mean = [[0f64; 8]; 8];
    let mut cnt = [[0f64; 8]; 8];
    for r in &rs {
        let (a, b) = ((r.flow.src / 8) as usize, (r.flow.dst / 8) as usize);
        let d = us(r.done.unwrap_or(Time::ZERO));
        m[a][b] = m[a][b].max(d);
        mean[a][b] += d;
        cnt[a][b] += 1.0;
    }
    println!("latest done per leaf pair (row src leaf, col dst leaf); mean below");
    for a in 0..8 {
        let row: Vec<String> = (0..8).map(|b| format!("{:6.1}", m[a][b])).collect();
        let row2: Vec<String> = (0..8).map(|b| format!("{:6.1}", mean[a][b] / cnt[a][b].max(1.0))).collect();
        println!("{}   | {}", row.join(" "), row2.join(" "));
    }
    // Per host: when its last flow out / in ended.
    let mut out = vec![0f64; 64];
    let mut inn = vec![0f64; 64];
    for r in &rs {
        let d = us(r.done.unwrap_or(Time::ZERO));
        out[r.flow.src as usize] = out[r.flow.src as usize].max(d);
        inn[r.flow.dst as usize] = inn[r.flow.dst as usize].max(d);
    }
    println!("per host last out / last in:");
    for h in 0..64 {
        print!("{h}:{:.0}/{:.0} ", out[h], inn[h]);
        if h % 8 == 7 {
            println!();
        }
    }
}

/// Per-group rate and cwnd over time.
pub struct Groups {
    pub last: Vec<u64>,
    pub lastpsn: Vec<u64>,
    pub rows: Vec<String>,
}

impl mrc_sim::run::Observer for Groups {
    fn sample_every(&self) -> mrc_sim::core::time::Duration {
        mrc_sim::core::time::Duration::from_us(5)
    }
    fn on_sample(&mut self, now: Time, w: &mrc_sim::run::World) {
        let rs = w.flow_results();
        if self.last.is_empty() {
            self.last = vec![0; rs.len()];
        }
        // groups: 0 = leaf0 -> other, 1 = other -> leaf0, 2 = other inter-leaf, 3 = intra-leaf
        let mut bytes = [0u64; 4];
        let mut n = [0u64; 4];
        let mut active = [0u64; 4];
        let mut cw = [0u64; 4];
        let mut sent = [0u64; 4];
        let mut infl = [0u64; 4];
        let mut blocked = [0u64; 4];
        if self.lastpsn.is_empty() { self.lastpsn = vec![0; rs.len()]; }
        for r in &rs {
            let (a, b) = (r.flow.src / 8, r.flow.dst / 8);
            let g = if a == b {
                3
            } else if a == 0 {
                0
            } else if b == 0 {
                1
            } else {
                2
            };
            let id = r.flow.id as usize;
            bytes[g] += r.acked_bytes - self.last[id];
            self.last[id] = r.acked_bytes;
            n[g] += 1;
            {
                let nic = &w.nics[r.flow.src as usize];
                let q = (0..nic.connections()).find(|&q| nic.peer(q) == Some(r.flow.dst)).unwrap();
                let nx = nic.qp(q).unwrap().requester().unwrap().nxt().value() as u64;
                sent[g] += nx.wrapping_sub(self.lastpsn[id]) & 0xff_ffff;
                self.lastpsn[id] = nx;
            }
            if r.done.is_none() {
                active[g] += 1;
                let nic = &w.nics[r.flow.src as usize];
                let q = (0..nic.connections()).find(|&q| nic.peer(q) == Some(r.flow.dst)).unwrap();
                cw[g] += nic.qp(q).unwrap().cwnd_bytes();
                let rq = nic.qp(q).unwrap().requester().unwrap();
                infl[g] += rq.inflight_bytes();
                if rq.inflight_bytes() >= nic.qp(q).unwrap().cwnd_bytes() { blocked[g] += 1; }
            }
        }
        let mut s = format!("{:6.1}", now.as_ps() as f64 / 1e6);
        for g in 0..4 {
            // Gb/s per flow
            let rate = bytes[g] as f64 * 8.0 / 5e3 / n[g] as f64;
            let c = if active[g] > 0 { cw[g] / active[g] } else { 0 };
            let srate = sent[g] as f64 * 4096.0 * 8.0 / 5e3 / n[g] as f64;
            let i = if active[g] > 0 { infl[g] / active[g] } else { 0 };
            s += &format!(" | {:5.2} {:5.2} {:3} {:6} {:6} {:3}", rate, srate, active[g], c, i, blocked[g]);
        }
        self.rows.push(s);
    }
}

/// Every packet between two hosts.
pub struct PairTrace {
    pub a: u32,
    pub b: u32,
}

impl mrc_sim::run::Observer for PairTrace {
    fn sample_every(&self) -> mrc_sim::core::time::Duration {
        mrc_sim::core::time::Duration::from_us(1000)
    }
    fn on_sample(&mut self, _now: Time, _w: &mrc_sim::run::World) {}
    fn tap(&self) -> mrc_sim::run::Tap {
        mrc_sim::run::Tap::Host(self.a)
    }
    fn on_tx(
        &mut self,
        now: Time,
        _w: &mrc_sim::run::World,
        src: u32,
        dst: u32,
        p: &mrc_firmware::engine::TxPacket,
    ) {
        if !((src == self.a && dst == self.b) || (src == self.b && dst == self.a)) {
            return;
        }
        use mrc_firmware::engine::TxBody;
        let t = now.as_ps() as f64 / 1e6;
        let dir = if src == self.a { "->" } else { "<-" };
        match &p.body {
            TxBody::Write { .. } => println!(
                "{t:8.3} {dir} DATA psn {} ev {} pl {} retx {}",
                p.psn.value(),
                p.evx.ev_index,
                p.evx.plane,
                p.retransmit
            ),
            b => println!("{t:8.3} {dir} psn {} ev {} pl {} {:?}", p.psn.value(), p.evx.ev_index, p.evx.plane, b),
        }
    }
}

/// Bytes a host sends per plane and kind.
pub struct Kinds {
    pub h: u32,
    pub bytes: [[u64; 4]; 5],
    pub n: [[u64; 4]; 5],
}

impl mrc_sim::run::Observer for Kinds {
    fn sample_every(&self) -> mrc_sim::core::time::Duration {
        mrc_sim::core::time::Duration::from_us(1000)
    }
    fn on_sample(&mut self, _now: Time, _w: &mrc_sim::run::World) {}
    fn tap(&self) -> mrc_sim::run::Tap {
        mrc_sim::run::Tap::Host(self.h)
    }
    fn on_tx(
        &mut self,
        _now: Time,
        _w: &mrc_sim::run::World,
        src: u32,
        _dst: u32,
        p: &mrc_firmware::engine::TxPacket,
    ) {
        if src != self.h {
            return;
        }
        use mrc_firmware::engine::TxBody;
        let k = match &p.body {
            TxBody::Write { .. } => if p.retransmit { 1 } else { 0 },
            TxBody::Ack(_) | TxBody::Nack(_) => 2,
            TxBody::Probe(_) => 3,
            TxBody::ProbeReply(_) => 4,
        };
        let pl = p.evx.plane as usize % 4;
        self.bytes[k][pl] += u64::from(mrc_sim::nic::wire::wire_bytes(p));
        self.n[k][pl] += 1;
    }
}
