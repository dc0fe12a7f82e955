//! Shared setup for the driver's tests and benchmarks (included by the bench with `#[path]`).

#![allow(dead_code)]

use mrc_driver::api::*;
use mrc_driver::device::DeviceConfig;
use mrc_sim::nic_host::SimNic;

/// An application context on `nic`.
pub fn open_app(nic: &SimNic) -> Context {
    Context::from_backend(nic.backend(), &DeviceConfig::default(), Role::Application)
        .expect("open the simulated NIC")
}

/// Ring and region sizes of a [`Looped`] QP.
#[derive(Clone, Copy, Debug)]
pub struct LoopSpec {
    /// Bytes of the one MR (registered with every access right).
    pub mr_bytes: usize,
    /// Entries of the one CQ (send and receive completions).
    pub cq_depth: u32,
    /// Send ring entries.
    pub sq_depth: u32,
    /// Receive ring entries.
    pub rq_depth: u32,
}

impl Default for LoopSpec {
    fn default() -> Self {
        LoopSpec {
            mr_bytes: 4096,
            cq_depth: 1024,
            sq_depth: 256,
            rq_depth: 256,
        }
    }
}

/// A QP connected to itself in RTS, with its PD, MR and CQ. Fields drop in declaration order:
/// the QP before the CQ it completes on.
pub struct Looped {
    pub qp: QueuePair,
    pub cq: CompletionQueue,
    pub mr: MemoryRegion,
    pub pd: ProtectionDomain,
}

/// Context -> PD -> MR -> CQ (on `channel` if given) -> QP, then RESET -> INIT -> RTR -> RTS
/// with the QP as its own peer (device-default EV and CC profiles).
pub fn looped_qp(ctx: &Context, spec: LoopSpec, channel: Option<&CompletionChannel>) -> Looped {
    let pd = ctx.alloc_pd().expect("PD");
    let mr = pd.reg_mr(spec.mr_bytes, Access::ALL).expect("MR");
    let cq = ctx.create_cq(spec.cq_depth, channel).expect("CQ");
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &cq,
            sq_depth: spec.sq_depth,
            rq_depth: spec.rq_depth,
            hint: QpHint::default(),
        })
        .expect("QP");
    qp.modify_init(&InitAttr::default()).expect("INIT");
    qp.modify_rtr(&RtrAttr {
        dest_qpn: qp.qpn(),
        remote_addr: ctx.gid(),
        rq_psn: 0,
        responder_mpr: 1,
        max_wimm: 8,
        dynamic_mpr: false,
    })
    .expect("RTR");
    qp.modify_rts(&RtsAttr {
        sq_psn: 0,
        requester_mpr: 1,
        max_wimm: 8,
        retry_count: 1,
        ack_timeout_exp: 1,
    })
    .expect("RTS");
    Looped { qp, cq, mr, pd }
}

/// The driver benchmark's QP (`benches/datapath.rs`, and `tests/burst.rs`, which holds its
/// rounds to completing): deep rings for rounds of 512 Writes, two receive entries.
pub fn bench_qp(ctx: &Context) -> Looped {
    let spec = LoopSpec {
        cq_depth: 4096,
        sq_depth: 1024,
        rq_depth: 2,
        ..LoopSpec::default()
    };
    looped_qp(ctx, spec, None)
}

/// The driver benchmark's work request: a signaled 64-byte Write of `sge` (one of `mr`'s)
/// to `mr` + 1 KiB.
pub fn bench_write<'a>(mr: &MemoryRegion, sge: &'a [Sge]) -> SendWr<'a> {
    SendWr {
        wr_id: 0,
        op: WriteOp::Write,
        sg_list: sge,
        remote_addr: mr.addr() + 1024,
        rkey: mr.rkey(),
        signaled: true,
        solicited: false,
        fence: false,
    }
}
