//! post_send + doorbell and poll_cq per core against the simulated NIC (`mrc_sim::nic_host`).
//! The device model runs inside each doorbell write, so these numbers are an upper bound on
//! driver cost plus the model; compare runs, not absolute budgets.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mrc_driver::api::*;
use mrc_driver::device::DeviceConfig;
use mrc_sim::nic_host::SimHost;

fn datapath(c: &mut Criterion) {
    let host = SimHost::loopback_pair().unwrap();
    let ctx = Context::from_backend(
        host.nics()[0].backend(),
        &DeviceConfig::default(),
        Role::Application,
    )
    .unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut cq = ctx.create_cq(4096, None).unwrap();
    let mut qp = pd
        .create_qp(&QpInitAttr {
            send_cq: &cq,
            recv_cq: &cq,
            sq_depth: 1024,
            rq_depth: 2,
            hint: QpHint::default(),
        })
        .unwrap();
    qp.modify_init(&InitAttr::default()).unwrap();
    qp.modify_rtr(&RtrAttr {
        dest_qpn: qp.qpn(),
        remote_addr: ctx.gid(),
        rq_psn: 0,
        responder_mpr: 1,
        max_wimm: 1,
        dynamic_mpr: false,
    })
    .unwrap();
    qp.modify_rts(&RtsAttr {
        sq_psn: 0,
        requester_mpr: 1,
        max_wimm: 1,
        retry_count: 1,
        ack_timeout_exp: 1,
    })
    .unwrap();
    let wr = SendWr {
        wr_id: 0,
        op: WriteOp::Write,
        sg_list: &[],
        remote_addr: mr.addr(),
        rkey: mr.rkey(),
        signaled: true,
        solicited: false,
        fence: false,
    };
    let batch = [wr; 32];
    let mut wcs = [WorkCompletion::default(); 32];
    let mut g = c.benchmark_group("datapath");
    g.throughput(Throughput::Elements(32));
    g.bench_function("post_send_32_doorbell_poll_cq_32", |b| {
        b.iter(|| {
            qp.post_send(&batch).unwrap();
            let mut got = 0;
            while got < 32 {
                got += cq.poll(&mut wcs).unwrap();
            }
        })
    });
    g.finish();
}

criterion_group!(benches, datapath);
criterion_main!(benches);
